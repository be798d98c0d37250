package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/runtime/gateway"
)

// The tests here run a held call past its hold in place: the agent gets a
// checkpoint, waits through the wait tool, and repeats the call once the
// request is decided. The hold in place is short; nothing waits for luck:
// every step waits for the one before it.

// shortHolds holds a call in place for 50 ms, but a minute for the client
// named "patient".
func shortHolds(c *gateway.Config) {
	c.Holds = gateway.HoldOptions{InPlace: 50 * time.Millisecond, Clients: map[string]time.Duration{"patient": time.Minute}}
}

// checkpointOf calls the held tool and returns its checkpoint's request id.
func checkpointOf(t *testing.T, cs *mcp.ClientSession, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	var sc struct {
		Status, RequestID, URL, WaitTool, Approvers, Expires string
	}
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &struct {
		Status    *string `json:"status"`
		RequestID *string `json:"request_id"`
		WaitTool  *string `json:"wait_tool"`
		Approvers *string `json:"approvers"`
		Expires   *string `json:"expires"`
	}{&sc.Status, &sc.RequestID, &sc.WaitTool, &sc.Approvers, &sc.Expires})
	text := resultText(res)
	if !res.IsError || sc.Status != "pending" || sc.RequestID == "" || sc.WaitTool != gateway.WaitToolName || sc.Approvers != "page" || sc.Expires == "" {
		t.Fatalf("the held call's answer is not a checkpoint: isError %v, %s, %s", res.IsError, b, text)
	}
	for _, want := range []string{"waiting for a human's approval", sc.RequestID, gateway.WaitToolName, "repeat this call exactly once with the same arguments", "Do not try another tool or route"} {
		if !strings.Contains(text, want) {
			t.Errorf("checkpoint text lacks %q: %s", want, text)
		}
	}
	return sc.RequestID
}

// waitFor calls the wait tool for id and returns its answer.
func waitFor(t *testing.T, cs *mcp.ClientSession, id string) (text string, isError bool, status string) {
	t.Helper()
	text, isError, status, err := callWait(cs, id)
	if err != nil {
		t.Fatal(err)
	}
	return text, isError, status
}

// callWait is waitFor for any goroutine: it returns the call's error
// rather than ending the test.
func callWait(cs *mcp.ClientSession, id string) (text string, isError bool, status string, err error) {
	args := map[string]any{}
	if id != "" {
		args["request_id"] = id
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: gateway.WaitToolName, Arguments: args})
	if err != nil {
		return "", false, "", err
	}
	var st struct {
		Status string `json:"status"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &st)
	return resultText(res), res.IsError, st.Status, nil
}

// TestCheckpointWaitAndRetry: the held call's hold in place ends with a
// checkpoint; the wait tool answers pending until an approver approves
// once, then approved; the agent's retry with the same arguments runs
// once, and a second retry makes a new request.
func TestCheckpointWaitAndRetry(t *testing.T) {
	gate := openGate(t, "", pageOnly)
	s := newStack(t, gate, e2ePolicy, shortHolds)
	cs := s.client(t, "alice")
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, tool := range tools.Tools {
		listed = listed || tool.Name == gateway.WaitToolName
	}
	if !listed {
		t.Fatal("the wait tool is not listed to a principal with held tools")
	}
	args := map[string]any{"number": 7}
	id := checkpointOf(t, cs, args)
	if r, _ := gate.Get(id); r.Status != Pending {
		t.Fatalf("after the checkpoint the request is %s; want pending", r.Status)
	}
	if text, isErr, status := waitFor(t, cs, id); status != "pending" || !isErr || !strings.Contains(text, "still pending") {
		t.Fatalf("wait before a decision: %s %v %s", status, isErr, text)
	}
	if text, _, _ := waitFor(t, cs, ""); !strings.Contains(text, "1 approval requests pending") || !strings.Contains(text, id) {
		t.Errorf("listing own requests: %s", text)
	}
	// Approved while the agent waits (from a client held in place for
	// long, by its name).
	waiter := s.namedClient(t, "alice", "patient")
	waited := make(chan string, 1)
	go func() { // no t.Fatal off the test's goroutine: the outcome is sent
		text, _, status, err := callWait(waiter, id)
		if err != nil {
			text, status = err.Error(), "error"
		}
		waited <- status + ": " + text
	}()
	for deadline := time.Now().Add(30 * time.Second); gate.awaiting.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the wait tool's call never reached the gate")
		}
	}
	mustDecide(t, gate, id, VerdictApprove, ForOnce)
	if got := <-waited; !strings.HasPrefix(got, "approved: ") || !strings.Contains(got, "now repeat the original call to github__merge_pull_request exactly once, with the same arguments") {
		t.Fatalf("wait after the approval: %s", got)
	}
	if s.up.count("merge_pull_request") != 0 {
		t.Fatal("the call ran before its retry")
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("the retry: %v %s", err, resultText(res))
	}
	if n := s.up.count("merge_pull_request"); n != 1 {
		t.Fatalf("the upstream ran the call %d times; want once", n)
	}
	if text, isErr, _ := waitFor(t, cs, id); isErr || !strings.Contains(text, "used the approval already") {
		t.Errorf("wait after the use: %v %s", isErr, text)
	}
	// Once used, the same call asks again.
	if again := checkpointOf(t, cs, args); again == id {
		t.Fatal("a second retry used the approval once again")
	}
}

// namedClient connects a client of principal that gives name as its own.
func (s *stack) namedClient(t testing.TB, principal, name string) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := s.gw.Connect(context.Background(), principal, st); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestHundredRetriesOneRun: after an approval once with no call held, a
// hundred concurrent retries of the call: exactly one reaches the
// upstream; the others make one new request, pending.
func TestHundredRetriesOneRun(t *testing.T) {
	gate := openGate(t, "", pageOnly)
	s := newStack(t, gate, e2ePolicy, shortHolds)
	cs := s.client(t, "alice")
	args := map[string]any{"number": 1}
	id := checkpointOf(t, cs, args)
	mustDecide(t, gate, id, VerdictApprove, ForOnce)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran, pending := 0, map[string]bool{}
	for range 100 {
		wg.Go(func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: args})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if !res.IsError {
				ran++
				return
			}
			b, _ := json.Marshal(res.StructuredContent)
			var sc struct {
				RequestID string `json:"request_id"`
			}
			json.Unmarshal(b, &sc)
			pending[sc.RequestID] = true
		})
	}
	wg.Wait()
	if n := s.up.count("merge_pull_request"); ran != 1 || n != 1 {
		t.Fatalf("%d retries ran, the upstream saw %d; want exactly one", ran, n)
	}
	if len(pending) != 1 || pending[id] {
		t.Errorf("the other retries were answered for requests %v; want one new request", pending)
	}
}

// TestWaitDeniedExpiredAndOthers: the wait tool answers a denial with the
// reason as a tool error, an expiry as one, and another principal's
// request id as an unknown one.
func TestWaitDeniedExpiredAndOthers(t *testing.T) {
	gate := openGate(t, "", pageOnly)
	s := newStack(t, gate, strings.Replace(e2ePolicy, "approval_timeout_seconds: 30", "approval_timeout_seconds: 1", 1), shortHolds)
	alice, bob := s.client(t, "alice"), s.client(t, "bob")
	id := checkpointOf(t, alice, map[string]any{"number": 2})
	if text, isErr, _ := waitFor(t, bob, id); !isErr || !strings.Contains(text, "there is no approval request") {
		t.Errorf("bob waiting for alice's request: %v %s", isErr, text)
	}
	if text, _, _ := waitFor(t, bob, "apr-aaaaaaaaaaaaaaaa"); !strings.Contains(text, "there is no approval request") {
		t.Errorf("an unknown id: %s", text)
	}
	if _, err := gate.Decide(id, VerdictDeny, "", "not today", Approver{Name: "carol"}); err != nil {
		t.Fatal(err)
	}
	if text, isErr, status := waitFor(t, alice, id); status != "denied" || !isErr || !strings.Contains(text, "saying: not today") || !strings.Contains(text, "Do not retry it") {
		t.Errorf("wait for a denied request: %s %v %s", status, isErr, text)
	}
	id2 := checkpointOf(t, alice, map[string]any{"number": 3})
	for {
		text, isErr, status := waitFor(t, alice, id2)
		if status == "pending" {
			continue // the request lives 1 s; each wait lasts 50 ms
		}
		if status != "expired" || !isErr || !strings.Contains(text, "expired before anyone decided") {
			t.Errorf("wait for an expired request: %s %v %s", status, isErr, text)
		}
		break
	}
}

// TestMaxPending: a principal with MaxPending requests pending cannot
// make another (the call is refused, as a tool error naming the cap);
// another principal can, and a retry that folds into a pending request
// is not counted.
func TestMaxPending(t *testing.T) {
	g := openGate(t, "", func(c *Config) { c.MaxPending = 3 })
	for i := range 3 {
		c := call("alice", "merge_pull_request", fmt.Sprintf(`{"n":%d}`, i))
		c.HoldFor = time.Millisecond
		if o, err := g.HoldCall(context.Background(), c); err != nil || o.Answer != AnswerPending {
			t.Fatalf("request %d: %+v %v", i, o, err)
		}
	}
	c := call("alice", "merge_pull_request", `{"n":3}`)
	c.HoldFor = time.Millisecond
	o, err := g.HoldCall(context.Background(), c)
	if err != nil || o.Answer != AnswerRefused || !strings.Contains(o.Reason, "3 approval requests of this principal are pending already") {
		t.Fatalf("a fourth request: %+v %v; want it refused", o, err)
	}
	if n := len(g.PendingOf("alice")); n != 3 {
		t.Fatalf("%d pending after the refusal; want 3", n)
	}
	again := call("alice", "merge_pull_request", `{"n":0}`)
	again.HoldFor = time.Millisecond
	if o, _ := g.HoldCall(context.Background(), again); o.Answer != AnswerPending {
		t.Errorf("a retry of a pending call: %+v; want it folded in, pending", o)
	}
	bob := call("bob", "merge_pull_request", `{"n":0}`)
	bob.HoldFor = time.Millisecond
	if o, _ := g.HoldCall(context.Background(), bob); o.Answer != AnswerPending {
		t.Errorf("another principal's request: %+v; want pending", o)
	}
}

// TestSelfByReference: a requester known by an access token's reference
// cannot approve its own request under its plain name, nor under another
// name with the same issuer and subject.
func TestSelfByReference(t *testing.T) {
	g := openGate(t, "", nil)
	c := call("bob groups=dev iss=https://idp.example.com sub=248289761001", "merge_pull_request", `{}`)
	c.HoldFor = time.Millisecond
	o, err := g.HoldCall(context.Background(), c)
	if err != nil || o.Answer != AnswerPending {
		t.Fatalf("%+v %v", o, err)
	}
	for _, by := range []string{"bob", "robert iss=https://idp.example.com sub=248289761001"} {
		_, err := g.Decide(o.RequestID, VerdictApprove, ForOnce, "", Approver{Name: by})
		wantErr(t, err, ErrSelf, "cannot decide it")
	}
	if _, err := g.Decide(o.RequestID, VerdictApprove, ForOnce, "", Approver{Name: "carol"}); err != nil {
		t.Fatalf("another approver: %v", err)
	}
}

// After a restart, an approval once that no call used is over, and the
// wait tool says so as it happened: approved, and not run because the
// gateway stopped, not that the request expired before anyone decided.
func TestWaitApprovedOnceLostInRestart(t *testing.T) {
	dir := t.TempDir()
	long := func(c *Config) { pageOnly(c); c.OnceWindow = time.Hour }
	gate := openGate(t, dir, long)
	s := newStack(t, gate, e2ePolicy, shortHolds)
	id := checkpointOf(t, s.client(t, "alice"), map[string]any{"number": 7})
	mustDecide(t, gate, id, VerdictApprove, ForOnce)
	s.gw.Close()
	gate.Close()

	gate = openGate(t, dir, long)
	cs := newStack(t, gate, e2ePolicy, shortHolds).client(t, "alice")
	text, isErr, _ := waitFor(t, cs, id)
	for _, want := range []string{"was approved once by carol", "did not run: the gateway stopped before a call used the approval", "needs a new approval"} {
		if !strings.Contains(text, want) {
			t.Errorf("wait after the restart lacks %q: %s", want, text)
		}
	}
	if !isErr || strings.Contains(text, "before anyone decided") {
		t.Errorf("wait after the restart: isError %v, %s", isErr, text)
	}
}
