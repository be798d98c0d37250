package cmd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policyc/policyc/runtime/approval"
)

// procGateway is a policyc gateway process with a stdio front.
type procGateway struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	responses chan map[string]any
	stderr    *syncBuffer
	admin     string
}

// startProcGateway starts 'policyc gateway --config cfg' as a process of
// its own and waits for its admin listener; it is stopped when the test
// ends, unless the test killed it.
func startProcGateway(t *testing.T, cfg string) *procGateway {
	t.Helper()
	g := &procGateway{cmd: exec.Command("policyc", "gateway", "--config", cfg), responses: make(chan map[string]any, 200), stderr: &syncBuffer{}}
	g.cmd.Stderr = g.stderr
	var err error
	if g.stdin, err = g.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := g.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- g.cmd.Wait() }()
	t.Cleanup(func() {
		g.stdin.Close()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			g.cmd.Process.Kill()
			t.Errorf("the gateway process of %s did not stop when its input ended", cfg)
		}
	})
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["id"] != nil {
				g.responses <- m
			}
		}
	}()
	addr := regexp.MustCompile(`serving the approvals page and admin API.* address=(127\.0\.0\.1:\d+)`)
	for deadline := time.Now().Add(60 * time.Second); g.admin == ""; time.Sleep(20 * time.Millisecond) {
		if m := addr.FindStringSubmatch(g.stderr.String()); m != nil {
			g.admin = "http://" + m[1]
		}
		select {
		case err := <-exited:
			t.Fatalf("the gateway process of %s exited: %v\n%s", cfg, err, g.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no admin listener:\n%s", g.stderr.String())
		}
	}
	g.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"cli-test-agent","version":"3"}}}`)
	<-g.responses
	g.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return g
}

func (g *procGateway) send(line string) { io.WriteString(g.stdin, line+"\n") }

func (g *procGateway) call(id int, args string) {
	g.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"github__merge_pull_request","arguments":%s}}`, id, args))
}

// pending lists the pending requests g's admin API shows.
func (g *procGateway) pending(t *testing.T) []approval.RequestView {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.admin+"/api/v1/requests?status=pending", nil)
	req.Header.Set("Authorization", "Bearer carol-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Requests []approval.RequestView `json:"requests"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	return list.Requests
}

// waitHeld waits until the gateways hold n calls in all for one pending
// request, and returns it.
func waitHeld(t *testing.T, n int, gws ...*procGateway) approval.RequestView {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		total, ids := 0, map[string]bool{}
		var r approval.RequestView
		for _, g := range gws {
			for _, q := range g.pending(t) {
				total += q.Waiting
				ids[q.ID] = true
				r = q
			}
		}
		if total == n && len(ids) == 1 {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls held for requests %v, want %d for one", total, ids, n)
		}
	}
}

// Three gateway processes sharing one database: 100 concurrent identical
// calls spread over them make one request, and an approval once on one
// runs exactly one call; a replica killed during a hold loses no request:
// the call repeated on another folds into it, and runs when approved there.
func TestGatewayProcessReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gateway processes")
	}
	setupReplicas(t, "a", "b", "c")
	gws := []*procGateway{startProcGateway(t, "a.cue"), startProcGateway(t, "b.cue"), startProcGateway(t, "c.cue")}
	const n = 100
	for i := range n {
		gws[i%len(gws)].call(100+i, `{"number":7,"repo":"acme/web"}`)
	}
	r := waitHeld(t, n, gws...)
	t.Setenv("POLICYC_ADMIN_URL", gws[1].admin)
	t.Setenv("POLICYC_ADMIN_TOKEN", "carol-token")
	if code, out, errOut := runPolicyc("approvals", "approve", r.ID); code != 0 {
		t.Fatalf("approve on b: %d %s%s", code, out, errOut)
	}
	ran, identical := 0, 0
	for i := range n {
		var m map[string]any
		select {
		case m = <-gws[i%len(gws)].responses:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d calls answered (%d ran, %d identical)", ran+identical, n, ran, identical)
		}
		res, _ := json.Marshal(m["result"])
		switch {
		case strings.Contains(string(res), "github merge_pull_request done") && !strings.Contains(string(res), `"isError":true`):
			ran++
		case strings.Contains(string(res), "identical to another call"):
			identical++
		default:
			t.Fatalf("call %v answered %s", m["id"], res)
		}
	}
	if ran != 1 || identical != n-1 {
		t.Fatalf("%d calls ran, %d were told they were identical; want 1 and %d", ran, identical, n-1)
	}

	// Kill a during a hold; the call repeated on c folds into its request.
	gws[0].call(300, `{"number":9}`)
	r = waitHeld(t, 1, gws[0])
	if err := gws[0].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	gws[2].call(301, `{"number":9}`)
	if again := waitHeld(t, 1, gws[1], gws[2]); again.ID != r.ID {
		t.Fatalf("the repeated call made request %s; want it folded into %s", again.ID, r.ID)
	}
	if code, out, errOut := runPolicyc("approvals", "approve", r.ID); code != 0 {
		t.Fatalf("approve on b: %d %s%s", code, out, errOut)
	}
	select {
	case m := <-gws[2].responses:
		res, _ := json.Marshal(m["result"])
		if m["id"] != float64(301) || !strings.Contains(string(res), "github merge_pull_request done") {
			t.Fatalf("the repeated call answered %v", m)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the repeated call did not run after the approval")
	}
}

// tcpProxy forwards connections to target while up; taking it down cuts
// every connection and refuses new ones: the database going away.
type tcpProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	down  bool
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln}
	t.Cleanup(func() { ln.Close(); p.setDown(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			u, err := net.Dial("tcp", target)
			if p.down || err != nil {
				p.mu.Unlock()
				c.Close()
				if u != nil {
					u.Close()
				}
				continue
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

func (p *tcpProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// waitLog waits until the process's log holds s.
func (g *procGateway) waitLog(t *testing.T, s string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(g.stderr.String(), s); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never logged %q:\n%s", s, g.stderr.String())
		}
	}
}

// A gateway process whose database goes away during service: an allowed
// call is still served, a call that needs a hold is answered at once with
// a tool error saying why, and once the database is back the gateway
// reconnects by itself, says so, and holds calls again.
func TestGatewayProcessDatabaseDown(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a gateway process")
	}
	setupReplicas(t, "a")
	dsn := os.Getenv("POLICYC_TEST_STATE_DSN")
	p := newTCPProxy(t, "127.0.0.1:5432")
	t.Setenv("POLICYC_TEST_STATE_DSN", strings.Replace(dsn, "127.0.0.1:5432", p.ln.Addr().String(), 1))
	g := startProcGateway(t, "a.cue")
	p.setDown(true)
	g.waitLog(t, "lost the connection to the state database")
	answer := func(id int) string {
		t.Helper()
		select {
		case m := <-g.responses:
			if m["id"] != float64(id) {
				t.Fatalf("answer to %v, want %d", m["id"], id)
			}
			b, _ := json.Marshal(m)
			return string(b)
		case <-time.After(30 * time.Second):
			t.Fatalf("call %d was not answered", id)
		}
		return ""
	}
	g.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"github__echo","arguments":{"text":"hi"}}}`)
	if a := answer(2); strings.Contains(a, `"isError":true`) || strings.Contains(a, `"error"`) {
		t.Fatalf("the allowed call with the database down: %s", a)
	}
	start := time.Now()
	g.call(3, `{"number":1}`)
	if a := answer(3); !strings.Contains(a, `"isError":true`) || !strings.Contains(a, "could not be recorded, so it was not made and the call did not run") {
		t.Fatalf("the held call with the database down: %s", a)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the held call was refused after %s", d)
	}
	p.setDown(false)
	g.waitLog(t, "reconnected to the state database")
	g.call(4, `{"number":1}`)
	r := waitHeld(t, 1, g)
	t.Setenv("POLICYC_ADMIN_URL", g.admin)
	t.Setenv("POLICYC_ADMIN_TOKEN", "carol-token")
	if code, out, errOut := runPolicyc("approvals", "approve", r.ID); code != 0 {
		t.Fatalf("approve: %d %s%s", code, out, errOut)
	}
	if a := answer(4); !strings.Contains(a, "github merge_pull_request done") {
		t.Fatalf("the held call after the database came back: %s", a)
	}
}
