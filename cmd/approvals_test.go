package cmd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/policyc/policyc/runtime/approval"
)

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// approvalsAPI is a gate with its admin API on a test server; carol and
// alice approve, alice-mcp is an MCP client token.
func approvalsAPI(t *testing.T) (*approval.Gate, *httptest.Server) {
	t.Helper()
	g, err := approval.Open(approval.Config{StateDir: t.TempDir(), PageServed: true, PageURL: "http://admin.test",
		Servers: map[string]approval.ServerOptions{"github": {MaxDuration: approval.ForWorkday}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	h, err := g.AdminHandler(approval.AdminOptions{
		Approvers:    map[string]string{sha256Hex("carol-token"): "carol", sha256Hex("alice-approver"): "alice"},
		ClientTokens: map[string]string{sha256Hex("alice-mcp"): "alice"},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return g, srv
}

type heldCall struct {
	o   approval.Outcome
	err error
}

func holdCall(g *approval.Gate, tool, args string) <-chan heldCall {
	return holdRechecked(g, tool, args, nil)
}

// holdRechecked is holdCall with the gateway's re-check of the serving
// table just before an approved call runs.
func holdRechecked(g *approval.Gate, tool, args string, recheck func() error) <-chan heldCall {
	ch := make(chan heldCall, 1)
	go func() {
		o, err := g.HoldCall(context.Background(), &approval.Call{Principal: "alice", Server: "github", Tool: tool, Arguments: []byte(args),
			Origin: "github.cue:12", Timeout: time.Minute, Channel: approval.Channel{Name: "page", Kind: approval.ChannelPage}, Client: "agent 1.0",
			Recheck: recheck})
		ch <- heldCall{o, err}
	}()
	return ch
}

// An approval is not a call that ran: when a reload has denied the held
// call meanwhile, approve says the call did not run, and why; the admin
// API's answer carries it (held_calls).
func TestApprovalsApproveSaysWhatBecameOfTheHeldCalls(t *testing.T) {
	g, srv := approvalsAPI(t)
	t.Setenv("POLICYC_ADMIN_TOKEN", "carol-token")
	t.Setenv("POLICYC_ADMIN_URL", srv.URL)
	const reloaded = "the serving table (serial 2) denies github / merge_pull_request now"
	held := holdRechecked(g, "merge_pull_request", `{"number":7}`, func() error { return errors.New(reloaded) })
	r := waitPending(t, g, "merge_pull_request")
	code, out, errOut := runPolicyc("approvals", "approve", r.ID)
	want := r.ID + ": approved once by carol; not run: " + reloaded + "\n  1 held call: not run: " + reloaded + "\n"
	if code != 0 || out != want {
		t.Fatalf("approve: exit %d\n%s%s\nwant exit 0 and\n%s", code, out, errOut, want)
	}
	if h := <-held; h.o.Answer != approval.AnswerNotRun {
		t.Fatalf("held call: %+v", h)
	}

	held = holdRechecked(g, "merge_pull_request", `{"number":8}`, func() error { return nil })
	r = waitPending(t, g, "merge_pull_request")
	code, out, errOut = runPolicyc("approvals", "approve", r.ID, "--format", "json")
	var v approval.RequestView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || !slices.Equal(v.HeldCalls, []approval.HeldCall{{Count: 1, Answer: "run"}}) || v.Ran != "ran" {
		t.Fatalf("approve --format json: exit %d\n%s%s", code, out, errOut)
	}
	if h := <-held; h.o.Answer != approval.AnswerRun {
		t.Fatalf("held call: %+v", h)
	}
}

func waitPending(t *testing.T, g *approval.Gate, tool string) approval.Request {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, r := range g.List(approval.Filter{Status: approval.Pending}) {
			if r.Tool == tool && g.Waiting(r.ID) > 0 {
				return r
			}
		}
	}
	t.Fatalf("no pending request for %s", tool)
	return approval.Request{}
}

// A preview that leaves something out says so in approvals show.
func TestApprovalsShowIncompletePreview(t *testing.T) {
	g, srv := approvalsAPI(t)
	t.Setenv("POLICYC_ADMIN_TOKEN", "carol-token")
	t.Setenv("POLICYC_ADMIN_URL", "")
	args := map[string]string{"repo": "acme/web"}
	for i := range 40 {
		args[fmt.Sprintf("a%02d", i)] = strings.Repeat("x", 80)
	}
	b, _ := json.Marshal(args)
	holdCall(g, "merge_pull_request", string(b))
	r := waitPending(t, g, "merge_pull_request")
	code, out, errOut := runPolicyc("approvals", "show", r.ID, "--admin", srv.URL)
	if code != 0 || !strings.Contains(out, approval.IncompleteNote) || !strings.Contains(out, `repo: "acme/web"`) || !strings.Contains(out, approval.NotShown) {
		t.Fatalf("show: %d\n%s%s", code, out, errOut)
	}
}

func runPolicyc(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestApprovalsCommand(t *testing.T) {
	g, srv := approvalsAPI(t)
	t.Setenv("POLICYC_ADMIN_TOKEN", "carol-token")
	t.Setenv("POLICYC_ADMIN_URL", "")
	held := holdCall(g, "merge_pull_request", `{"number":7,"repo":"acme/web"}`)
	r := waitPending(t, g, "merge_pull_request")

	code, out, errOut := runPolicyc("approvals", "list", "--admin", srv.URL)
	if code != 0 || !strings.Contains(out, r.ID) || !strings.Contains(out, "github / merge_pull_request") || !strings.Contains(out, "pending until") {
		t.Fatalf("list: %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runPolicyc("approvals", "show", r.ID, "--admin", srv.URL)
	for _, want := range []string{"request:     " + r.ID, "principal:   alice", "agent:       agent 1.0", "rule:        github.cue:12", `repo: "acme/web"`, "number: 7", "may give:    once, 1h, 8h", "link:        http://admin.test/approvals/" + r.ID} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	if code != 0 || strings.Contains(out, "preview is incomplete") {
		t.Fatalf("show: %d\n%s", code, out)
	}
	code, out, _ = runPolicyc("approvals", "show", r.ID, "--admin", srv.URL, "--format", "json")
	var v approval.RequestView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.ID != r.ID || v.Waiting != 1 {
		t.Fatalf("show --format json: %d %s", code, out)
	}

	// Refusals exit 5 and say why.
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"carol-token", []string{"approvals", "approve", "apr-aaaaaaaaaaaaaaaa"}, "no approval request \"apr-aaaaaaaaaaaaaaaa\" (list them with 'policyc approvals list') (404)"},
		{"carol-token", []string{"approvals", "approve", r.ID, "--for", "7d"}, "at most 8h"},
		{"carol-token", []string{"approvals", "revoke", r.ID}, "is pending: there is no approval to revoke (409)"},
		{"alice-approver", []string{"approvals", "approve", r.ID}, "cannot decide it; another approver must (403)"},
		{"alice-mcp", []string{"approvals", "list"}, "this is an MCP client token; the admin side accepts approver tokens only (401)"},
		{"nonsense", []string{"approvals", "list"}, "unknown token"},
	} {
		t.Setenv("POLICYC_ADMIN_TOKEN", tc.env)
		code, _, errOut := runPolicyc(append(tc.args, "--admin", srv.URL)...)
		if code != ExitRefused || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tc.args, code, errOut, ExitRefused, tc.want)
		}
	}
	select {
	case h := <-held:
		t.Fatalf("the call returned during refusals: %+v", h)
	default:
	}

	t.Setenv("POLICYC_ADMIN_TOKEN", "carol-token")
	code, out, errOut = runPolicyc("approvals", "approve", r.ID, "--for", "8h", "--reason", "release day", "--admin", srv.URL)
	if code != 0 || !strings.Contains(out, r.ID+": approved 8h by carol, until ") || !strings.HasSuffix(out, "\n  1 held call: ran\n") {
		t.Fatalf("approve: %d %s%s", code, out, errOut)
	}
	if h := <-held; h.err != nil || h.o.Answer != approval.AnswerRun {
		t.Fatalf("held call: %+v", h)
	}
	code, _, errOut = runPolicyc("approvals", "deny", r.ID, "--admin", srv.URL)
	if code != ExitRefused || !strings.Contains(errOut, "already approved (8h) by carol") || !strings.Contains(errOut, "(409)") {
		t.Fatalf("deny after approve: %d %s", code, errOut)
	}
	code, out, _ = runPolicyc("approvals", "list", "--active", "--admin", srv.URL)
	if code != 0 || !strings.Contains(out, r.ID) {
		t.Fatalf("list --active: %d %s", code, out)
	}
	code, out, errOut = runPolicyc("approvals", "revoke", r.ID, "--admin", srv.URL)
	if code != 0 || !strings.Contains(out, "revoked by carol") {
		t.Fatalf("revoke: %d %s%s", code, out, errOut)
	}
	code, out, _ = runPolicyc("approvals", "list", "--active", "--admin", srv.URL)
	if code != 0 || !strings.Contains(out, "No remembered approval is in force.") {
		t.Fatalf("list --active after revoke: %d %s", code, out)
	}

	// A denial with a reason.
	held = holdCall(g, "delete_branch", `{"branch":"main"}`)
	r2 := waitPending(t, g, "delete_branch")
	code, out, _ = runPolicyc("approvals", "deny", r2.ID, "--reason", "main is protected", "--admin", srv.URL)
	if code != 0 || !strings.Contains(out, "denied by carol (main is protected)\n  1 held call: denied: main is protected\n") {
		t.Fatalf("deny: %d %s", code, out)
	}
	if h := <-held; h.o.Answer != approval.AnswerDenied || h.o.Reason != "main is protected" {
		t.Fatalf("denied call: %+v", h)
	}
	code, out, _ = runPolicyc("approvals", "list", "--admin", srv.URL)
	if code != 0 || !strings.Contains(out, "No pending approval requests.") {
		t.Fatalf("empty list: %d %q", code, out)
	}

	// --admin pointing somewhere else than the admin listener.
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	code, _, errOut = runPolicyc("approvals", "list", "--admin", other.URL)
	if code != ExitFailure || !strings.Contains(errOut, "is --admin the admin listener") {
		t.Fatalf("wrong listener: %d %s", code, errOut)
	}
}

// holdAs holds a call of tool for alice, sent by a client that calls
// itself client.
func holdAs(g *approval.Gate, client, tool, args string) <-chan heldCall {
	ch := make(chan heldCall, 1)
	go func() {
		o, err := g.HoldCall(context.Background(), &approval.Call{Principal: "alice", Server: "github", Tool: tool, Arguments: []byte(args),
			Origin: "github.cue:12", Timeout: time.Minute, Channel: approval.Channel{Name: "page", Kind: approval.ChannelPage}, Client: client})
		ch <- heldCall{o, err}
	}()
	return ch
}

// The attack from the field: an agent whose client name erases the lines
// above it (ESC[2K, CR, cursor up), forges a "tool: … (read-only)" line and
// hides what follows. approvals show prints no ESC or CR byte; the forged
// line is data on the agent line, visible as such, and the one tool line is
// the gate's.
func TestApprovalsShowNeutralisesClientName(t *testing.T) {
	g, srv := approvalsAPI(t)
	t.Setenv("POLICYC_ADMIN_TOKEN", "carol-token")
	t.Setenv("POLICYC_ADMIN_URL", srv.URL)
	const forged = "claude-code 2.1\x1b[2K\r\x1b[1A\x1b[2K\r\x1b[1A\x1b[2K\r\x1b[32mtool:        github / read_file (read-only)\x1b[0m\n\u202e\x1b[8m"
	held := holdAs(g, forged, "delete_repository", `{"repo":"acme/web\u202e"}`)
	r := waitPending(t, g, "delete_repository")

	code, out, errOut := runPolicyc("approvals", "show", r.ID)
	if code != 0 {
		t.Fatalf("show: exit %d\n%s%s", code, out, errOut)
	}
	for _, bad := range []string{"\x1b", "\r", "\u202e", "\u009b"} {
		if strings.Contains(out, bad) {
			t.Errorf("show prints %q:\n%q", bad, out)
		}
	}
	lines := strings.Split(out, "\n")
	wantAgent := `agent:       claude-code 2.1\x1b[2K\x0d\x1b[1A\x1b[2K\x0d\x1b[1A\x1b[2K\x0d\x1b[32mtool:        github / read_file (read-only)\x1b[0m\x0a\u202e\x1b[8m`
	var agent, tools []string
	for _, l := range lines {
		if strings.HasPrefix(l, "agent:") {
			agent = append(agent, l)
		}
		if strings.HasPrefix(l, "tool:") {
			tools = append(tools, l)
		}
	}
	if len(agent) != 1 || agent[0] != wantAgent {
		t.Errorf("agent line(s) %q, want\n%s", agent, wantAgent)
	}
	if len(tools) != 1 || tools[0] != "tool:        github / delete_repository" {
		t.Errorf("tool line(s) %q, want the gate's alone", tools)
	}
	if !strings.Contains(out, "\n  repo: \"acme/web\\u202e\"\n") || !strings.Contains(out, "\nprincipal:   alice\n") {
		t.Errorf("show:\n%s", out)
	}

	code, out, _ = runPolicyc("approvals", "list")
	if code != 0 || strings.ContainsAny(out, "\x1b\r\u202e") || !strings.Contains(out, "github / delete_repository") {
		t.Errorf("list: exit %d\n%q", code, out)
	}
	// JSON keeps the value, in bytes that are safe to print.
	code, out, _ = runPolicyc("approvals", "show", r.ID, "--format", "json")
	var v approval.RequestView
	if code != 0 || strings.ContainsAny(out, "\x1b\r\u202e") || !strings.Contains(out, `\u001b[2K\r\u001b[1A`) || !strings.Contains(out, `\u202e`) ||
		json.Unmarshal([]byte(out), &v) != nil || v.Client != forged {
		t.Errorf("show --format json: exit %d, client %q\n%s", code, v.Client, out)
	}

	// An approver's reason is shown to other approvers: neutralised too.
	code, out, _ = runPolicyc("approvals", "deny", r.ID, "--reason", "no\x1b]0;owned\x07")
	if code != 0 || out != r.ID+": denied by carol (no\\x1b]0;owned\\x07)\n  1 held call: denied: no\\x1b]0;owned\\x07\n" {
		t.Errorf("deny: exit %d\n%q", code, out)
	}
	<-held
}

// approvals list prints a page at a time and says how to get the next.
func TestApprovalsListPages(t *testing.T) {
	g, srv := approvalsAPI(t)
	t.Setenv("POLICYC_ADMIN_TOKEN", "carol-token")
	t.Setenv("POLICYC_ADMIN_URL", srv.URL)
	var ids []string
	for _, tool := range []string{"t1", "t2", "t3"} {
		holdAs(g, "agent", tool, `{}`)
		ids = append([]string{waitPending(t, g, tool).ID}, ids...)
	}
	code, out, errOut := runPolicyc("approvals", "list", "--limit", "2")
	next := regexp.MustCompile(`(?m)^2 of 3 shown; the next page: add --cursor (\S+)$`).FindStringSubmatch(out)
	if code != 0 || next == nil || !strings.Contains(out, ids[0]) || !strings.Contains(out, ids[1]) || strings.Contains(out, ids[2]) {
		t.Fatalf("the first page: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runPolicyc("approvals", "list", "--limit", "2", "--cursor", next[1])
	if code != 0 || !strings.Contains(out, ids[2]) || strings.Contains(out, ids[0]) || strings.Contains(out, "next page") {
		t.Fatalf("the second page: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runPolicyc("approvals", "list", "--limit", "2", "--format", "json")
	var l approval.ListView
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil || len(l.Requests) != 2 || l.Total != 3 || l.Next != next[1] {
		t.Fatalf("--format json: exit %d\n%s", code, out)
	}
	code, _, errOut = runPolicyc("approvals", "list", "--cursor", "nope")
	if code != ExitRefused || !strings.Contains(errOut, `cursor "nope" is not one a list answered: start again without it (400)`) {
		t.Fatalf("a bad cursor: exit %d %s", code, errOut)
	}
}
