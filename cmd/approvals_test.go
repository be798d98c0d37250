package cmd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
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
	if code != 0 {
		t.Fatalf("show: %d", code)
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
