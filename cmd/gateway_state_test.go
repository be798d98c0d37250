package cmd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/policyc/policyc/internal/pgtest"
	"github.com/policyc/policyc/internal/policytest"
	"github.com/policyc/policyc/runtime/approval"
	"github.com/policyc/policyc/runtime/table"
)

// stdioGateway is a gateway run by Run, with a stdio front the test speaks
// JSON-RPC on.
type stdioGateway struct {
	send      func(line string)
	responses chan map[string]any
	stderr    *syncBuffer
	admin     string
	exited    chan int
}

// startGateway runs policyc gateway --config cfg (and the extra
// arguments) and waits for its admin listener; the gateway stops when the
// test ends.
func startGateway(t *testing.T, cfg string, extra ...string) *stdioGateway {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	g := &stdioGateway{responses: make(chan map[string]any, 10), stderr: &syncBuffer{}, exited: make(chan int, 1)}
	go func() {
		code := Run(append([]string{"gateway", "--config", cfg}, extra...), inR, outW, g.stderr)
		outW.Close()
		g.exited <- code
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-g.exited:
		case <-time.After(20 * time.Second):
			t.Errorf("the gateway of %s did not stop when its input ended", cfg)
		}
	})
	addr := regexp.MustCompile(`serving the approvals page and admin API.* address=(127\.0\.0\.1:\d+)`)
	for deadline := time.Now().Add(20 * time.Second); g.admin == ""; time.Sleep(10 * time.Millisecond) {
		if m := addr.FindStringSubmatch(g.stderr.String()); m != nil {
			g.admin = "http://" + m[1]
		}
		select {
		case code := <-g.exited:
			t.Fatalf("the gateway of %s exited with %d:\n%s", cfg, code, g.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no admin listener:\n%s", g.stderr.String())
		}
	}
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["id"] != nil {
				g.responses <- m
			}
		}
	}()
	g.send = func(line string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Error(err)
		}
	}
	g.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"cli-test-agent","version":"3"}}}`)
	<-g.responses
	g.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return g
}

// Two gateways sharing one state database: a call held on one runs when
// an approver decides it through the other's admin API, and 'policyc
// gateway status' shows both replicas and their tables.
func TestGatewayReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a subprocess upstream")
	}
	setupReplicas(t, "a", "b")
	a, b := startGateway(t, "a.cue"), startGateway(t, "b.cue")
	a.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"github__merge_pull_request","arguments":{"number":7,"repo":"acme/web"}}}`)

	t.Setenv("POLICYC_ADMIN_URL", b.admin)
	t.Setenv("POLICYC_ADMIN_TOKEN", "carol-token")
	var list struct {
		Requests []approval.RequestView `json:"requests"`
	}
	for deadline := time.Now().Add(20 * time.Second); len(list.Requests) == 0; time.Sleep(20 * time.Millisecond) {
		code, out, errOut := runPolicyc("approvals", "list", "--format", "json")
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
			t.Fatalf("list on b: %d %s%s", code, out, errOut)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call held on a is not listed on b:\n%s", a.stderr.String())
		}
	}
	r := list.Requests[0]
	if code, out, errOut := runPolicyc("approvals", "approve", r.ID); code != 0 || !strings.Contains(out, "approved once by carol") {
		t.Fatalf("approve on b: %d %s%s", code, out, errOut)
	}
	select {
	case m := <-a.responses:
		res, _ := json.Marshal(m["result"])
		if m["id"] != float64(2) || !strings.Contains(string(res), "github merge_pull_request done") || strings.Contains(string(res), `"isError":true`) {
			t.Fatalf("the call held on a answered %v", m)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the call held on a did not complete after the approval on b:\n%s", a.stderr.String())
	}

	code, out, errOut := runPolicyc("gateway", "status", "--config", "a.cue")
	if code != 0 {
		t.Fatalf("gateway status: %d %s%s", code, out, errOut)
	}
	for _, want := range []string{"replica-a (", "replica-b (", "live", "last accepted: serial 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("gateway status lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(a.stderr.String(), "replica serving table") || !strings.Contains(a.stderr.String(), "replica=replica-a") {
		t.Errorf("a's log does not say which table it serves:\n%s", a.stderr.String())
	}
}

// setupReplicas makes, in a new directory it moves to, a signed table that
// holds github__merge_pull_request for approval, and a gateway
// configuration NAME.cue per name: a stdio front for alice, an admin
// listener for the approver carol (token "carol-token"), and the state
// shared in a new database.
func setupReplicas(t *testing.T, names ...string) {
	t.Helper()
	dsn := pgtest.DB(t)
	dir := t.TempDir()
	bin := testUpstream(t)
	write := func(name, content string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("policy/policy.cue", `package policy

defaults: {tool: "deny", prompt: "deny", resource: "deny"}

approval_channels: page: approvals_page: {}

mcp_servers: github: access: tool: {
	allow_list: ["echo"]
	approval_list: ["merge_pull_request"]
	approval_timeout_seconds: 60
	approval_channel: "page"
}
`)
	t.Chdir(dir)
	for _, args := range [][]string{
		{"keygen", "--out", "ci"},
		{"compile", "policy", "-o", "table.json"},
		{"sign", "table.json", "--key", "ci.key", "-o", "table.signed.json"},
	} {
		if code, out, errOut := runPolicyc(args...); code != 0 {
			t.Fatalf("policyc %v: %d\n%s%s", args, code, out, errOut)
		}
	}
	t.Setenv("POLICYC_TEST_STATE_DSN", dsn)
	for _, name := range names {
		os.MkdirAll(filepath.Join(dir, "state-"+name), 0o755)
		write(name+".cue", fmt.Sprintf(`package gateway

table:     "table.signed.json"
trust:     ["ci.pub"]
state_dir: "state-%s"
state: postgres: {dsn_env: "POLICYC_TEST_STATE_DSN", replica: "replica-%s"}
decision_log: "decisions-%s.jsonl"
upstreams: github: command: [%q, "-name", "github"]
front: stdio: principal: "alice"
approvals: admin: {
	address: "127.0.0.1:0"
	approvers: carol: token_sha256: [%q]
}
`, name, name, name, bin, sha256Hex("carol-token")))
	}
}

// A replica refuses a table older than one another replica accepted,
// though its own state directory never saw the newer one.
func TestGatewayReplicaRollback(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a subprocess upstream")
	}
	setupReplicas(t, "a", "b")
	src, err := os.ReadFile("policy/policy.cue")
	if err != nil {
		t.Fatal(err)
	}
	b, err := table.Encode(policytest.Compile(t, string(src), 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("table1.json", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runPolicyc("sign", "table1.json", "--key", "ci.key", "-o", "table1.signed.json"); code != 0 {
		t.Fatalf("sign: %d %s%s", code, out, errOut)
	}
	startGateway(t, "a.cue", "--table", "table1.signed.json")
	code, _, errOut := runPolicyc("gateway", "--config", "b.cue")
	if code != ExitRollback || !strings.Contains(errOut, "table serial 0 is older than serial 1, accepted by replica replica-a") {
		t.Fatalf("b with serial 0 after a accepted serial 1: exit %d\n%s", code, errOut)
	}
	code, out, errOut := runPolicyc("gateway", "status", "--config", "b.cue")
	if code != 0 || !strings.Contains(out, "last accepted: serial 1") || !strings.Contains(out, "replica-a (") || strings.Contains(out, "replica-b (") {
		t.Fatalf("gateway status: %d\n%s%s", code, out, errOut)
	}
}

// A status without drift says pins are off when the table pins nothing,
// and that nothing drifted when it pins: a gateway of an earlier build,
// whose status has no pinned list, is taken at its word.
func TestGatewayStatusPinsOff(t *testing.T) {
	for _, tc := range []struct {
		pinned []string
		want   string
	}{
		{[]string{}, "pins off: the table pins no definition"},
		{[]string{"github"}, "no drift: every listed item is the one the table pins"},
		{nil, "no drift: every listed item is the one the table pins"},
	} {
		var b strings.Builder
		st := approval.GatewayStatus{Table: approval.TableStatus{Serial: 3, Digest: "sha256:00"}, Pinned: tc.pinned}
		if err := writeGatewayStatus(&b, "http://127.0.0.1:1", &st); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("pinned %v: status\n%s\nwant %q", tc.pinned, b.String(), tc.want)
		}
	}
}
