package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/gateway/internal/testupstream"
	"github.com/policyc/policyc/runtime/table"
)

// benchRoleEnv, in the environment of this test binary, makes it serve as
// one party of a benchmark in a process of its own instead of running
// tests. A role is a party and a front:
//
//   - upstream-http, upstream-stdio: the test upstream;
//   - gateway-http, proxy-http: the gateway or the bare proxy
//     (bareProxy) over streamable HTTP, in front of the upstream at
//     benchUpstreamEnv;
//   - gateway-stdio, proxy-stdio: the gateway or the bare proxy over
//     stdio, in front of an upstream-stdio process it starts.
//
// An HTTP role prints its URL on a line of its own, answers the commands
// of benchCommand on its standard input and serves until that input ends.
// A stdio role speaks MCP on its standard input and output until the input
// ends.
const benchRoleEnv = "POLICYC_BENCH_ROLE"

// benchUpstreamEnv is the upstream's URL, given to an HTTP middle party.
const benchUpstreamEnv = "POLICYC_BENCH_UPSTREAM"

// benchProfileEnv, when set to a path prefix, makes each middle party's
// process write its CPU profile to the prefix followed by "." and its role
// (PREFIX.gateway-http, PREFIX.proxy-stdio, ...). A benchmark that starts
// such processes in several rows adds the row to the prefix (profileEnv).
const benchProfileEnv = "POLICYC_BENCH_CPUPROFILE"

// serveBenchRole runs this process as the named role and returns its exit
// status.
func serveBenchRole(role string) int {
	party, front, _ := strings.Cut(role, "-")
	if (party != "upstream" && party != "gateway" && party != "proxy") || (front != "http" && front != "stdio") {
		fmt.Fprintf(os.Stderr, "%s=%q: want upstream, gateway or proxy, then -http or -stdio\n", benchRoleEnv, role)
		return 2
	}
	if os.Getenv("GOGC") == "" {
		// Both middle parties run with the gateway command's collection
		// policy, so that the ratio compares their code and not their
		// collection targets; the upstream, which is not measured, with
		// the command's stdio target.
		if front == "http" && party != "upstream" {
			defer benchHeapFloor()()
		} else {
			debug.SetGCPercent(benchGCPercent)
		}
	}
	if prefix := os.Getenv(benchProfileEnv); prefix != "" && party != "upstream" {
		f, err := os.Create(prefix + "." + role)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if err := serveRole(party, front); err != nil {
		fmt.Fprintf(os.Stderr, "bench %s: %v\n", role, err)
		return 1
	}
	return 0
}

func serveRole(party, front string) error {
	ctx := context.Background()
	if party == "upstream" {
		up := testupstream.New(testupstream.Options{Name: "github"})
		if front == "stdio" {
			return up.Server.Run(ctx, &mcp.StdioTransport{})
		}
		return serveHTTPRole(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.Server }, nil))
	}
	upstream := Upstream{Name: "github", URL: os.Getenv(benchUpstreamEnv)}
	if front == "stdio" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		upstream = Upstream{Name: "github", Command: exe, Args: []string{"-test.run=^$"}, Env: append(BaseEnv(), benchRoleEnv+"=upstream-stdio")}
	} else if upstream.URL == "" {
		return fmt.Errorf("%s is not set", benchUpstreamEnv)
	}
	if party == "proxy" {
		p, err := newBareProxy(ctx, map[string]mcp.Transport{"github": proxyTransport(upstream)})
		if err != nil {
			return err
		}
		defer p.Close()
		if front == "http" {
			return serveHTTPRole(p.httpHandler())
		}
		ss, err := p.server.Connect(ctx, &mcp.StdioTransport{}, nil)
		if err != nil {
			return err
		}
		ss.Wait()
		return nil
	}
	g, err := benchGatewayProcess(upstream)
	if err != nil {
		return err
	}
	defer g.Close()
	if front == "http" {
		h, err := g.HTTPHandler(HTTPOptions{Tokens: map[string]string{tokenHash("bench-token"): "alice"}, MaxSessions: 100000})
		if err != nil {
			return err
		}
		return serveHTTPRole(h)
	}
	return g.ServeIO(ctx, "alice", os.Stdin, os.Stdout)
}

// proxyTransport is how the bare proxy reaches upstream, as the gateway
// does (dialConfigured): streamable HTTP with as many idle connections, or
// the upstream's command with the same environment.
func proxyTransport(upstream Upstream) mcp.Transport {
	if upstream.URL != "" {
		base := http.DefaultTransport.(*http.Transport).Clone()
		base.MaxIdleConnsPerHost = 64
		return &mcp.StreamableClientTransport{Endpoint: upstream.URL, HTTPClient: &http.Client{Transport: base}, MaxRetries: -1}
	}
	cmd := exec.Command(upstream.Command, upstream.Args...)
	cmd.Env = upstream.Env
	cmd.Stderr = os.Stderr
	return &mcp.CommandTransport{Command: cmd}
}

// benchGatewayProcess is the gateway of a benchmark's gateway process: the
// benchmark policy and a decision log in a real file.
func benchGatewayProcess(upstream Upstream) (*Gateway, error) {
	res := compiler.Compile(compiler.Input{
		Files:  []compiler.File{{Name: "policy.cue", Data: []byte(benchPolicy)}},
		Source: table.Source{PolicyPath: "bench"},
		Serial: 1,
	})
	if res.Table == nil {
		return nil, fmt.Errorf("the benchmark policy does not compile: %v", res.Diagnostics)
	}
	rt, err := decide.Load(res.Table)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "policyc-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir) // the open file stays writable
	f, err := os.OpenFile(filepath.Join(dir, "decisions.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return New(context.Background(), Config{
		Tables:      fixed(rt),
		Log:         NewJSONLog(f),
		CallTimeout: 30 * time.Second,
		Upstreams:   []Upstream{upstream},
	})
}

// serveHTTPRole serves h on a loopback port, prints its URL and answers
// benchCommand lines on standard input until it ends.
func serveHTTPRole(h http.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var inFlight atomic.Int64
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		h.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: counted, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	fmt.Printf("http://%s\n", ln.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var want int64
		if _, err := fmt.Sscanf(in.Text(), "mem %d", &want); err != nil {
			return fmt.Errorf("command %q: want mem N", in.Text())
		}
		fmt.Println(roleMemory(&inFlight, want))
	}
	return nil
}

// roleMemory answers "mem N": once N requests are in flight (the
// standalone streams or listens of N idle clients; for at most ten
// seconds), the live heap, goroutine stacks and goroutines after a
// collection, and the requests in flight.
func roleMemory(inFlight *atomic.Int64, want int64) string {
	for deadline := time.Now().Add(10 * time.Second); inFlight.Load() != want && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	runtime.GC() // twice: the first keeps what sync.Pools held
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return fmt.Sprintf("%d %d %d %d", ms.HeapAlloc, ms.StackInuse, runtime.NumGoroutine(), inFlight.Load())
}

// profileEnv is the environment that makes the processes a benchmark row
// starts write their CPU profiles to PREFIX.ROW.ROLE, when benchProfileEnv
// is PREFIX; none when it is not set.
func profileEnv(row string) []string {
	if prefix := os.Getenv(benchProfileEnv); prefix != "" {
		return []string{benchProfileEnv + "=" + prefix + "." + row}
	}
	return nil
}

// roleProcess is this test binary run as an HTTP role.
type roleProcess struct {
	role string
	url  string
	pid  int
	in   io.Writer
	out  *bufio.Reader
}

// startRole starts this test binary as a benchmark process in an HTTP
// role; the process ends when the benchmark does. A process that does not
// print its URL within ten seconds, or does not end within ten seconds of
// its input closing, is killed.
func startRole(b *testing.B, role string, env ...string) *roleProcess {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, benchRoleEnv+"="+role)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		kill := time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
		defer kill.Stop()
		if err := cmd.Wait(); err != nil {
			b.Errorf("%s process: %v", role, err)
		}
	})
	p := &roleProcess{role: role, pid: cmd.Process.Pid, in: stdin, out: bufio.NewReader(stdout)}
	kill := time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
	line, err := p.out.ReadString('\n')
	kill.Stop()
	if err != nil {
		b.Fatalf("%s process printed no URL: %v", role, err)
	}
	p.url = strings.TrimSpace(line)
	return p
}

// memory is what the process holds once inFlight requests are in flight:
// live heap and goroutine stacks in bytes, and goroutines.
func (p *roleProcess) memory(b *testing.B, inFlight int) (heap, stack, goroutines float64) {
	if _, err := fmt.Fprintf(p.in, "mem %d\n", inFlight); err != nil {
		b.Fatal(err)
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		b.Fatalf("%s process: %v", p.role, err)
	}
	var got int
	if _, err := fmt.Sscanf(line, "%g %g %g %d", &heap, &stack, &goroutines, &got); err != nil {
		b.Fatalf("%s process answered %q: %v", p.role, line, err)
	}
	if got != inFlight {
		b.Fatalf("%s process: %d requests in flight, want %d", p.role, got, inFlight)
	}
	return heap, stack, goroutines
}

// stdioRole starts this test binary as a stdio middle party in role and
// connects a client to it at version, with env added to its environment;
// it returns the session and the process id. Closing the session ends the process.
func stdioRole(b *testing.B, role, version string, env ...string) (*mcp.ClientSession, int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, benchRoleEnv+"="+role)...)
	cmd.Stderr = os.Stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(),
		&mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		b.Fatalf("%s process: %v", role, err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs, cmd.Process.Pid
}

// cpuTime is the CPU time process pid has used: the sum of its threads'
// run time from /proc/PID/task/*/schedstat (nanoseconds), or, where that
// is missing, user and system time from /proc/PID/stat (10 ms ticks); 0
// where there is no /proc. A thread that has ended no longer counts; the
// Go runtime keeps its threads.
func cpuTime(pid int) time.Duration {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var total time.Duration
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			total = -1
			break
		}
		f := strings.Fields(string(data))
		if len(f) == 0 {
			total = -1
			break
		}
		ns, _ := strconv.ParseInt(f[0], 10, 64)
		total += time.Duration(ns)
	}
	if total > 0 {
		return total
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(data, ')')
	if err != nil || i < 0 {
		return 0
	}
	// After the command's name, in parentheses, come the state (field 3)
	// and so on: utime and stime are fields 14 and 15.
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, _ := strconv.ParseInt(s, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}
