package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/policyc/policyc/internal/testop"
	"github.com/policyc/policyc/runtime/approval"
)

// logWatch is a log the gateway writes and a test waits on: each write
// wakes the waiters, who look for their line again.
type logWatch struct {
	mu      sync.Mutex
	b       strings.Builder
	changed chan struct{}
}

func newLogWatch() *logWatch { return &logWatch{changed: make(chan struct{})} }

func (l *logWatch) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	close(l.changed)
	l.changed = make(chan struct{})
	return len(p), nil
}

// wait returns re's first match in the log, waiting for it as long as
// exited does not fire, at most 20 s.
func (l *logWatch) wait(t *testing.T, re *regexp.Regexp, exited <-chan int) []string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		l.mu.Lock()
		m, ch, all := re.FindStringSubmatch(l.b.String()), l.changed, l.b.String()
		l.mu.Unlock()
		if m != nil {
			return m
		}
		select {
		case <-ch:
		case code := <-exited:
			t.Fatalf("the gateway exited with %d:\n%s", code, all)
		case <-deadline:
			t.Fatalf("no log line matches %s:\n%s", re, all)
		}
	}
}

// policyc gateway with approvers from an identity provider, end to end:
// the gateway reaches the test provider at start, and policyc approvals
// decides a held call with an access token the provider issued: refused
// (403) for someone in no approver group, done for an approver, whose
// issuer and subject the audit log records.
func TestApprovalsThroughGatewayProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a subprocess upstream")
	}
	p, err := testop.Start(jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const audience = "https://approvals.example.com/"
	p.SetClient("erin", testop.Client{Secret: "erin-secret", Subject: "sub-erin", Audience: []string{audience},
		Claims: map[string]any{"email": "erin@example.com", "groups": []any{"release-managers"}}})
	p.SetClient("frank", testop.Client{Secret: "frank-secret", Subject: "sub-frank", Audience: []string{audience},
		Claims: map[string]any{"email": "frank@example.com", "groups": []any{"staff"}}})

	dir := t.TempDir()
	bin := testUpstream(t)
	write := func(name, content string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("policy/policy.cue", `package policy

defaults: {tool: "deny", prompt: "deny", resource: "deny"}

approval_channels: page: approvals_page: {}

mcp_servers: github: access: tool: {
	approval_list: ["merge_pull_request"]
	approval_channel: "page"
}
`)
	os.MkdirAll(filepath.Join(dir, "state"), 0o755)
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
	write("gateway.cue", fmt.Sprintf(`package gateway

table:     "table.signed.json"
trust:     ["ci.pub"]
state_dir: "state"
upstreams: github: command: [%q, "-name", "github"]
front: stdio: principal: "alice"
approvals: admin: {
	address: "127.0.0.1:0"
	oauth: {
		issuer:          %q
		audience:        %q
		principal_claim: "email"
		approver_groups: ["release-managers"]
	}
}
`, bin, p.Issuer, audience))

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := newLogWatch()
	exited := make(chan int, 1)
	go func() {
		code := Run([]string{"gateway", "--config", "gateway.cue"}, inR, outW, stderr)
		outW.Close()
		exited <- code
	}()
	defer func() {
		inW.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Error("the gateway did not stop when its input ended")
		}
	}()
	admin := "http://" + stderr.wait(t, regexp.MustCompile(`serving the approvals page and admin API.* address=(127\.0\.0\.1:\d+)`), exited)[1]
	responses := make(chan map[string]any, 10)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["id"] != nil {
				responses <- m
			}
		}
	}()
	send := func(line string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"cli-test-agent","version":"3"}}}`)
	<-responses
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"github__merge_pull_request","arguments":{"number":7}}}`)
	id := stderr.wait(t, regexp.MustCompile(`msg="approval requested" id=(apr-[a-z0-9]+)`), exited)[1]

	token := func(client string) string {
		tok, err := p.Token(context.Background(), client)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	t.Setenv("POLICYC_ADMIN_URL", admin)
	t.Setenv("POLICYC_ADMIN_TOKEN", token("frank"))
	if code, _, errOut := runPolicyc("approvals", "approve", id); code != ExitRefused || !strings.Contains(errOut, "(403)") || !strings.Contains(errOut, "frank@example.com") || !strings.Contains(errOut, "is not an approver") {
		t.Fatalf("frank approving: %d %s", code, errOut)
	}
	t.Setenv("POLICYC_ADMIN_TOKEN", token("erin"))
	if code, out, errOut := runPolicyc("approvals", "approve", id); code != 0 || !strings.Contains(out, "approved once by erin@example.com") {
		t.Fatalf("erin approving: %d %s%s", code, out, errOut)
	}
	select {
	case m := <-responses:
		res, _ := json.Marshal(m["result"])
		if m["id"] != float64(2) || !strings.Contains(string(res), "github merge_pull_request done") || strings.Contains(string(res), `"isError":true`) {
			t.Fatalf("the held call answered %v", m)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the held call did not complete after the approval")
	}
	audit, _ := os.ReadFile(filepath.Join(dir, "state", approval.AuditFile))
	if want := `"by":"erin@example.com iss=` + p.Issuer + ` sub=sub-erin"`; !strings.Contains(string(audit), want) {
		t.Errorf("audit log lacks %s:\n%s", want, audit)
	}
}
