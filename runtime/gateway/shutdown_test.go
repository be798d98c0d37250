package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// stdioGatewayEnv, in the environment of this test binary, makes it serve
// as a stdio gateway process instead of running tests, as the command
// does: one stdio upstream, the test upstream binary named by the
// variable's value, started with -outlive-input and given an hour to stop
// when its connection ends; ServeIO on standard input and output, then
// Close.
const stdioGatewayEnv = "POLICYC_TEST_STDIO_GATEWAY"

// serveStdioGateway runs this process as a stdio gateway; see
// stdioGatewayEnv.
func serveStdioGateway(upstream string) int {
	res := compiler.Compile(compiler.Input{
		Files:  []compiler.File{{Name: "policy.cue", Data: []byte(testPolicy)}},
		Source: table.Source{PolicyPath: "test"},
		Serial: 1,
	})
	if res.Table == nil {
		fmt.Fprintln(os.Stderr, "the test policy does not compile:", res.Diagnostics)
		return 1
	}
	rt, err := decide.Load(res.Table)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	g, err := New(context.Background(), Config{
		Tables:    fixed(rt),
		Log:       NewJSONLog(io.Discard),
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, nil)),
		Upstreams: []Upstream{{Name: "github", Command: upstream, Args: []string{"-name", "github", "-outlive-input"}, Env: BaseEnv()}},
		// Far longer than the test waits: Close must not wait for it.
		TerminateTimeout: time.Hour,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := g.ServeIO(context.Background(), "alice", os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	g.Close()
	return 0
}

// gatewayProcess is a stdio gateway run as a process of its own, with a
// test upstream that ignores both the end of its input and SIGTERM.
type gatewayProcess struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	exited chan error // Wait's result, sent once
	// upstream is the upstream's process id.
	upstream int
}

// startGatewayProcess starts a gatewayProcess, completes the handshake and
// asks the upstream for its process id. Cleanup kills what is left of both.
func startGatewayProcess(t *testing.T) *gatewayProcess {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	bin, err := upstreamBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), stdioGatewayEnv+"="+bin)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &gatewayProcess{cmd: cmd, in: in, out: bufio.NewReader(out), exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if p.upstream > 0 {
			syscall.Kill(p.upstream, syscall.SIGKILL)
		}
	})
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+legacyVersion+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	p.answer(t, 1)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"github__pid","arguments":{}}}`)
	var res struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(p.answer(t, 2), &res); err != nil || len(res.Result.Content) == 0 {
		t.Fatalf("github__pid: %v", err)
	}
	if p.upstream, err = strconv.Atoi(res.Result.Content[0].Text); err != nil {
		t.Fatalf("github__pid answered %q", res.Result.Content[0].Text)
	}
	return p
}

func (p *gatewayProcess) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// answer reads lines until the answer to call id, and returns it.
func (p *gatewayProcess) answer(t *testing.T, id int) []byte {
	t.Helper()
	for {
		line, err := p.out.ReadBytes('\n')
		if err != nil {
			t.Fatalf("waiting for the answer to call %d: %v", id, err)
		}
		var m struct {
			ID *int `json:"id"`
		}
		if json.Unmarshal(line, &m) == nil && m.ID != nil && *m.ID == id {
			return line
		}
	}
}

// waitExit waits for the gateway process to exit, for a generous while:
// it is the order of events that is checked, not how long they took.
func (p *gatewayProcess) waitExit(t *testing.T, after string) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the gateway was still running 30s after %s", after)
	}
}

// processGone reports whether process pid has ended: it is not there, or
// it is a zombie no one has reaped yet.
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && strings.HasPrefix(string(b[i+1:]), " Z")
}

// A host closing a stdio gateway ends its input, then kills it soon
// after. The gateway ends the call still running (one the upstream never
// answers), stops its upstream, which ignores both its own input's end and
// SIGTERM, and exits: by the time it has exited, its upstream is gone, and
// the call was answered before the output ended.
func TestInputEndStopsTheGatewayAndItsUpstreams(t *testing.T) {
	p := startGatewayProcess(t)
	p.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"github__hang","arguments":{}}}`)
	p.in.Close()
	answer := p.answer(t, 3)
	if !strings.Contains(string(answer), `"error"`) && !strings.Contains(string(answer), `"isError":true`) {
		t.Errorf("the call running when the input ended was answered %s; want an error", answer)
	}
	p.waitExit(t, "its input ended")
	if !processGone(p.upstream) {
		t.Errorf("the gateway exited, and its upstream (process %d) is still running", p.upstream)
	}
}

// A gateway killed with SIGKILL cannot stop its upstreams itself; on
// Linux they get SIGKILL when it ends (a parent-death signal), even one
// that ignores the end of its input and SIGTERM.
func TestKilledGatewayTakesItsUpstreams(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a parent-death signal is Linux's")
	}
	p := startGatewayProcess(t)
	p.cmd.Process.Kill()
	p.waitExit(t, "SIGKILL")
	deadline := time.Now().Add(30 * time.Second)
	for !processGone(p.upstream) {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway was killed, and its upstream (process %d) is still running 30s later", p.upstream)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// When the input of the stdio front ends, the calls still running are
// given inputEndGrace and then cancelled, and ServeIO returns: a held call
// does not keep a gateway whose host has gone. In a synctest bubble (the
// front runs over pipes), so the grace is measured in fake time.
func TestServeIOInputEndCancelsTheCallsRead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		held := make(chan struct{})
		cancelled := make(chan error, 1)
		oplog := &syncBuffer{}
		tg := startGateway(t, func(c *Config) {
			c.Logger = slog.New(slog.NewTextHandler(oplog, nil))
			c.Tables = fixed(loadTable(t, strings.Replace(approvalPolicy, "approval_timeout_seconds: 1", "approval_timeout_seconds: 120", 1), 1))
			c.Approvals = gateFunc(func(ctx context.Context, req *HoldRequest) (Verdict, error) {
				close(held)
				<-ctx.Done() // ends only when cancelled
				cancelled <- context.Cause(ctx)
				return Verdict{Outcome: OutcomeTimedOut}, nil
			})
		})
		c := rawSession(t, tg.Gateway, "alice", legacyVersion)
		go io.Copy(io.Discard, c.r)
		c.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"github__merge_pull_request","arguments":{"n":1}}}`)
		<-held
		ended := time.Now()
		c.w.Close()
		if err := <-c.served; err != nil {
			t.Errorf("ServeIO returned %v; want nil at the end of the input", err)
		}
		if d := time.Since(ended); d > inputEndGrace {
			t.Errorf("ServeIO returned %s after the end of its input; want within inputEndGrace (%s)", d, inputEndGrace)
		}
		select {
		case err := <-cancelled:
			if !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
				t.Errorf("the held call ended with %v", err)
			}
		default:
			t.Error("the held call was not cancelled")
		}
		if !strings.Contains(oplog.String(), `msg="session ending: its input ended; answering the calls already read" principal=alice calls=1 within=200ms`) {
			t.Errorf("after the end of input, the log says:\n%s", oplog.String())
		}
	})
}
