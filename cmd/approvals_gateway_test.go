package cmd

import (
	"bufio"
	"bytes"
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

	"github.com/policyc/policyc/runtime/approval"
)

// syncBuffer is a buffer written by the gateway and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// policyc gateway with an approvals block, end to end: a signed table that
// holds merge_pull_request, a stdio upstream, the stdio front for alice,
// and the admin listener; policyc approvals decides the held call, which
// then completes; the decision is in the store and the audit log.
func TestApprovalsThroughGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a subprocess upstream")
	}
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
	allow_list: ["echo"]
	approval_list: ["merge_pull_request"]
	approval_timeout_seconds: 60
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
decision_log: "decisions.jsonl"
upstreams: github: command: [%q, "-name", "github"]
front: stdio: principal: "alice"
approvals: {
	admin: {
		address: "127.0.0.1:0"
		approvers: {
			carol: token_sha256: [%q]
			alice: token_sha256: [%q]
		}
	}
	servers: github: max_approval: "1h"
}
`, bin, sha256Hex("carol-token"), sha256Hex("alice-approver")))

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &syncBuffer{}
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
	addr := regexp.MustCompile(`serving the approvals page and admin API.* address=(127\.0\.0\.1:\d+)`)
	var admin string
	for deadline := time.Now().Add(20 * time.Second); admin == ""; time.Sleep(10 * time.Millisecond) {
		if m := addr.FindStringSubmatch(stderr.String()); m != nil {
			admin = "http://" + m[1]
		}
		select {
		case code := <-exited:
			t.Fatalf("the gateway exited with %d:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no admin listener:\n%s", stderr.String())
		}
	}
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
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"github__merge_pull_request","arguments":{"number":7,"repo":"acme/web"}}}`)

	t.Setenv("POLICYC_ADMIN_URL", admin)
	t.Setenv("POLICYC_ADMIN_TOKEN", "carol-token")
	var list struct {
		Requests []approval.RequestView `json:"requests"`
	}
	for deadline := time.Now().Add(20 * time.Second); len(list.Requests) == 0; time.Sleep(20 * time.Millisecond) {
		code, out, errOut := runPolicyc("approvals", "list", "--format", "json")
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
			t.Fatalf("list: %d %s%s", code, out, errOut)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call was not held:\n%s", stderr.String())
		}
	}
	r := list.Requests[0]
	if r.Principal != "alice" || r.Tool != "merge_pull_request" || r.Client != "cli-test-agent 3" || r.URL != admin+"/approvals/"+r.ID || strings.Join(r.Durations, ",") != "once,1h" {
		t.Fatalf("held request %+v", r)
	}
	// Alice may not approve her own call, the MCP side does not take
	// approver tokens (stdio here: there are none), and 8h is over the cap.
	t.Setenv("POLICYC_ADMIN_TOKEN", "alice-approver")
	if code, _, errOut := runPolicyc("approvals", "approve", r.ID); code != ExitRefused || !strings.Contains(errOut, "(403)") {
		t.Fatalf("self-approval: %d %s", code, errOut)
	}
	t.Setenv("POLICYC_ADMIN_TOKEN", "carol-token")
	if code, _, errOut := runPolicyc("approvals", "approve", r.ID, "--for", "8h"); code != ExitRefused || !strings.Contains(errOut, "at most 1h") {
		t.Fatalf("over the cap: %d %s", code, errOut)
	}
	if code, out, errOut := runPolicyc("approvals", "approve", r.ID); code != 0 || !strings.Contains(out, "approved once by carol") {
		t.Fatalf("approve: %d %s%s", code, out, errOut)
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
	if code, _, errOut := runPolicyc("approvals", "deny", r.ID); code != ExitRefused || !strings.Contains(errOut, "(409)") {
		t.Fatalf("deny after approve: %d %s", code, errOut)
	}
	audit, _ := os.ReadFile(filepath.Join(dir, "state", approval.AuditFile))
	for _, want := range []string{`"event":"approved"`, `"by":"carol"`, `"from":"api 127.0.0.1:`, `"event":"ran"`} {
		if !strings.Contains(string(audit), want) {
			t.Errorf("audit log lacks %s:\n%s", want, audit)
		}
	}
	// The end of the stdio front's input is its host closing the gateway,
	// which is killed soon after: a call still held then is not waited
	// for. It is answered as cancelled, and the gateway exits.
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"github__merge_pull_request","arguments":{"number":8}}}`)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		// The old spelling, --json, still prints JSON, and only JSON: its
		// note goes to standard error.
		code, out, errOut := runPolicyc("approvals", "list", "--json")
		if code == 0 && !strings.Contains(errOut, "--json is deprecated") {
			t.Fatalf("list --json: no deprecation note: %s", errOut)
		}
		if code == 0 && json.Unmarshal([]byte(out), &list) == nil && len(list.Requests) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second call was not held")
		}
	}
	inW.Close()
	select {
	case m := <-responses:
		errObj, _ := json.Marshal(m["error"])
		if m["id"] != float64(3) || !strings.Contains(string(errObj), "input ended before the call was answered") {
			t.Fatalf("the call held when the input ended was answered %v", m)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call held when the input ended was not answered")
	}
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("the gateway exited with %d:\n%s", code, stderr.String())
		}
		exited <- code
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway did not stop after its input ended")
	}
	decisions, _ := os.ReadFile(filepath.Join(dir, "decisions.jsonl"))
	if !strings.Contains(string(decisions), `"op":"approval"`) || !strings.Contains(string(decisions), `"verdict":"approved","request":"`+r.ID+`"`) {
		t.Errorf("decision log lacks the approval:\n%s", decisions)
	}
}
