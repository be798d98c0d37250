package approval

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// 100 identical calls fold into one request; an approval once runs exactly
// one of them, and every other is told it is a duplicate.
func TestFoldApproveOnce(t *testing.T) {
	g := openGate(t, "", nil)
	const n = 100
	results := make([]<-chan held, n)
	for i := range results {
		results[i] = hold(context.Background(), g, call("alice", "merge_pull_request", `{"number":7,"repo":"acme/web"}`))
	}
	r := pendingFor(t, g, "alice", "merge_pull_request", n)
	if got := len(g.List(Filter{Status: Pending})); got != 1 {
		t.Fatalf("%d pending requests, want 1 (identical calls fold)", got)
	}
	mustDecide(t, g, r.ID, VerdictApprove, ForOnce)
	counts := map[Answer]int{}
	for _, ch := range results {
		h := recv(t, ch)
		if h.err != nil {
			t.Fatal(h.err)
		}
		if h.o.RequestID != r.ID {
			t.Errorf("outcome names request %s, want %s", h.o.RequestID, r.ID)
		}
		counts[h.o.Answer]++
	}
	if counts[AnswerRun] != 1 || counts[AnswerDuplicate] != n-1 {
		t.Fatalf("answers %v, want 1 run and %d duplicates", counts, n-1)
	}
	got, _ := g.Get(r.ID)
	if got.Calls != n || got.Ran != "ran" || got.Status != Approved {
		t.Fatalf("request after use: calls %d, ran %q, status %s", got.Calls, got.Ran, got.Status)
	}
	// Used once: the same arguments again make a new request.
	ch := hold(context.Background(), g, call("alice", "merge_pull_request", `{"number":7,"repo":"acme/web"}`))
	r2 := pendingFor(t, g, "alice", "merge_pull_request", 1)
	if r2.ID == r.ID {
		t.Fatal("an approval once was used twice")
	}
	mustDecide(t, g, r2.ID, VerdictDeny, "")
	if h := recv(t, ch); h.o.Answer != AnswerDenied {
		t.Fatalf("got %v, want denied", h.o.Answer)
	}
}

// An approval is bound to the arguments: other arguments are another
// request, and are not covered.
func TestChangedArgumentsNotCovered(t *testing.T) {
	g := openGate(t, "", nil)
	a := hold(context.Background(), g, call("alice", "merge_pull_request", `{"number":7}`))
	ra := pendingFor(t, g, "alice", "merge_pull_request", 1)
	b := hold(context.Background(), g, call("alice", "merge_pull_request", `{"number":8}`))
	rb := pendingWith(t, g, "alice", "merge_pull_request", func(r Request) bool { return r.ID != ra.ID })
	mustDecide(t, g, ra.ID, VerdictApprove, ForOnce)
	if h := recv(t, a); h.o.Answer != AnswerRun {
		t.Fatalf("approved call: %v", h.o.Answer)
	}
	still(t, g, rb.ID, b)
	if rb.Fingerprint == ra.Fingerprint || rb.ID == ra.ID {
		t.Fatalf("the changed call shares the approved request: %+v", rb)
	}
	mustDecide(t, g, rb.ID, VerdictDeny, "")
	if h := recv(t, b); h.o.Answer != AnswerDenied {
		t.Fatalf("changed call: %v, want denied", h.o.Answer)
	}
}

// A request lives its timeout, whatever became of its calls: held in
// place for HoldFor, a call is answered pending and the request goes on
// until it expires. In a synctest bubble.
func TestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := openGate(t, "", nil)
		c := call("alice", "merge_pull_request", `{}`)
		c.Timeout, c.HoldFor = 10*time.Minute, 50*time.Second
		start := time.Now()
		o, err := g.HoldCall(context.Background(), c)
		if err != nil || o.Answer != AnswerPending || o.RequestID == "" || time.Since(start) != c.HoldFor {
			t.Fatalf("got %+v, %v after %v; want pending naming the request after %v", o, err, time.Since(start), c.HoldFor)
		}
		if r, _ := g.Get(o.RequestID); r.Status != Pending {
			t.Fatalf("request is %s after the hold in place; want pending", r.Status)
		}
		time.Sleep(c.Timeout - c.HoldFor)
		synctest.Wait()
		r, _ := g.Get(o.RequestID)
		if r.Status != Expired || r.End != noDecision {
			t.Fatalf("request is %s (%q) after its timeout, want expired", r.Status, r.End)
		}
		_, err = g.Decide(o.RequestID, VerdictApprove, ForOnce, "", Approver{Name: "carol"})
		wantErr(t, err, ErrExpired, "expired")
	})
}

// A call whose client goes away leaves its request pending: the agent's
// retry finds it.
func TestHeldCallEnds(t *testing.T) {
	g := openGate(t, "", nil)
	ctx, cancel := context.WithCancel(context.Background())
	ch := hold(ctx, g, call("alice", "merge_pull_request", `{}`))
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)
	cancel()
	if h := recv(t, ch); h.o.Answer != AnswerPending {
		t.Fatalf("got %v", h.o.Answer)
	}
	got, _ := g.Get(r.ID)
	if got.Status != Pending {
		t.Fatalf("request %s: %q; want it still pending", got.Status, got.End)
	}
	// Decided with no call held, approved once: the retry of the same
	// call runs, and only it.
	if _, err := g.Decide(r.ID, VerdictApprove, ForOnce, "", Approver{Name: "carol"}); err != nil {
		t.Fatal(err)
	}
	other := call("alice", "merge_pull_request", `{"x":1}`)
	other.HoldFor = time.Millisecond
	if o, _ := g.HoldCall(context.Background(), other); o.Answer != AnswerPending || o.RequestID == r.ID {
		t.Fatalf("a call with other arguments got %+v; want a request of its own, pending", o)
	}
	if o, _ := g.HoldCall(context.Background(), call("alice", "merge_pull_request", `{}`)); o.Answer != AnswerRun || o.RequestID != r.ID {
		t.Fatalf("the retry got %+v; want it run under %s", o, r.ID)
	}
	if got, _ := g.Get(r.ID); got.Ran != "ran" {
		t.Fatalf("after the retry the request says ran=%q", got.Ran)
	}
	_, err := g.Decide(r.ID, VerdictApprove, ForOnce, "", Approver{Name: "carol"})
	wantErr(t, err, ErrDecided, "already approved")
}

// An approval once goes to the next held call when the one it went to
// ended before it could run.
func TestApproveOncePassesOn(t *testing.T) {
	g := openGate(t, "", nil)
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	c1 := call("alice", "merge_pull_request", `{}`)
	c1.Recheck = func() error { cancel1(); return nil } // the client goes away just then
	first := hold(ctx1, g, c1)
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)
	second := hold(context.Background(), g, call("alice", "merge_pull_request", `{}`))
	pendingFor(t, g, "alice", "merge_pull_request", 2)
	mustDecide(t, g, r.ID, VerdictApprove, ForOnce)
	if h := recv(t, first); h.o.Answer != AnswerTimedOut {
		t.Fatalf("first: %v", h.o.Answer)
	}
	if h := recv(t, second); h.o.Answer != AnswerRun {
		t.Fatalf("second: %v, want run", h.o.Answer)
	}
	if got, _ := g.Get(r.ID); got.Ran != "ran" {
		t.Fatalf("ran %q", got.Ran)
	}
}

func TestDeny(t *testing.T) {
	g := openGate(t, "", nil)
	a := hold(context.Background(), g, call("alice", "delete_branch", `{"branch":"main"}`))
	b := hold(context.Background(), g, call("alice", "delete_branch", `{"branch":"main"}`))
	r := pendingFor(t, g, "alice", "delete_branch", 2)
	if _, err := g.Decide(r.ID, VerdictDeny, "", "main is protected", Approver{Name: "carol", From: "api 10.0.0.1:5000"}); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan held{a, b} {
		h := recv(t, ch)
		if h.o.Answer != AnswerDenied || h.o.Reason != "main is protected" || h.o.By != "carol" || h.o.RequestID != r.ID {
			t.Fatalf("got %+v", h.o)
		}
	}
	_, err := g.Decide(r.ID, VerdictApprove, ForOnce, "", Approver{Name: "dave"})
	wantErr(t, err, ErrDecided, "already denied by carol")
}

func TestSelfApprovalRefused(t *testing.T) {
	g := openGate(t, "", nil)
	ch := hold(context.Background(), g, call("alice", "merge_pull_request", `{}`))
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)
	for _, v := range []string{VerdictApprove, VerdictDeny} {
		_, err := g.Decide(r.ID, v, "", "", Approver{Name: "alice", From: "page"})
		wantErr(t, err, ErrSelf, "cannot decide it")
	}
	still(t, g, r.ID, ch)
	if got, _ := g.Get(r.ID); got.Status != Pending {
		t.Fatalf("status %s after refused self-approval", got.Status)
	}
	mustDecide(t, g, r.ID, VerdictApprove, ForOnce)
	if h := recv(t, ch); h.o.Answer != AnswerRun {
		t.Fatal(h.o.Answer)
	}
}

func TestDecideBadInput(t *testing.T) {
	g := openGate(t, "", func(c *Config) { c.Servers = map[string]ServerOptions{"github": {MaxDuration: ForWorkday}} })
	_, err := g.Decide("apr-nosuchrequest234", VerdictApprove, ForOnce, "", Approver{Name: "carol"})
	wantErr(t, err, ErrNotFound, "no approval request")
	ch := hold(context.Background(), g, call("alice", "merge_pull_request", `{}`))
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)
	for _, tc := range []struct{ verdict, forWhat, want string }{
		{"maybe", "", "approve or deny"},
		{VerdictApprove, "2h", "not an approval duration"},
		{VerdictApprove, ForWeek, "at most 8h"},
		{VerdictApprove, ForRemember, "not an approval duration"},
	} {
		_, err := g.Decide(r.ID, tc.verdict, tc.forWhat, "", Approver{Name: "carol"})
		wantErr(t, err, ErrInvalid, tc.want)
	}
	_, err = g.Decide(r.ID, VerdictApprove, ForOnce, "", Approver{})
	wantErr(t, err, ErrInvalid, "approver")
	still(t, g, r.ID, ch)
	if got := g.AllowedDurations("github"); strings.Join(got, ",") != "once,1h,8h" {
		t.Fatalf("allowed durations %v", got)
	}
	if got := g.AllowedDurations("linear"); strings.Join(got, ",") != "once,1h,8h,7d" {
		t.Fatalf("allowed durations %v", got)
	}
	mustDecide(t, g, r.ID, VerdictApprove, ForWorkday)
	recv(t, ch)
}

func TestArgumentsNotAnObject(t *testing.T) {
	g := openGate(t, "", nil)
	for _, args := range []string{`[1,2]`, `"x"`, `42`, `null`, ``, `{"a":`} {
		c := call("alice", "merge_pull_request", args)
		if _, err := g.HoldCall(context.Background(), c); err == nil || !strings.Contains(err.Error(), "JSON object") {
			t.Errorf("arguments %q: got %v, want a refusal", args, err)
		}
	}
	if n := len(g.List(Filter{})); n != 0 {
		t.Fatalf("%d requests made for bad arguments", n)
	}
}

// A duration approval lets later calls of the tool by the principal
// through, with any arguments, until it ends; the server's cap holds.
func TestDurationApproval(t *testing.T) {
	clk := newClock()
	g := openGate(t, "", func(c *Config) { c.Now = clk.Now })
	ch := hold(context.Background(), g, call("alice", "create_issue", `{"title":"a"}`))
	r := pendingFor(t, g, "alice", "create_issue", 1)
	mustDecide(t, g, r.ID, VerdictApprove, ForHour)
	if h := recv(t, ch); h.o.Answer != AnswerRun || h.o.For != ForHour {
		t.Fatalf("got %+v", h.o)
	}
	for _, args := range []string{`{"title":"a"}`, `{"title":"other","body":"x"}`} {
		o, err := g.HoldCall(context.Background(), call("alice", "create_issue", args))
		if err != nil || o.Answer != AnswerRun || o.RequestID != r.ID {
			t.Fatalf("covered call: %+v, %v", o, err)
		}
	}
	if n := len(g.List(Filter{})); n != 1 {
		t.Fatalf("%d requests; calls under a duration approval make none", n)
	}
	// Another principal, another tool: not covered.
	other := hold(context.Background(), g, call("bob", "create_issue", `{"title":"a"}`))
	ro := pendingFor(t, g, "bob", "create_issue", 1)
	still(t, g, ro.ID, other)
	tool := hold(context.Background(), g, call("alice", "close_issue", `{}`))
	rt := pendingFor(t, g, "alice", "close_issue", 1)
	still(t, g, rt.ID, tool)
	// Past the hour: asked again.
	clk.Add(time.Hour + time.Second)
	late := hold(context.Background(), g, call("alice", "create_issue", `{"title":"a"}`))
	r2 := pendingFor(t, g, "alice", "create_issue", 1)
	if r2.ID == r.ID {
		t.Fatal("an ended approval still covers")
	}
	still(t, g, r2.ID, late)
	_, err := g.Revoke(r.ID, Approver{Name: "carol"})
	wantErr(t, err, ErrExpired, "ended at")
}

func TestRevoke(t *testing.T) {
	g := openGate(t, "", nil)
	ch := hold(context.Background(), g, call("alice", "create_issue", `{}`))
	r := pendingFor(t, g, "alice", "create_issue", 1)
	mustDecide(t, g, r.ID, VerdictApprove, ForWorkday)
	recv(t, ch)
	if o, _ := g.HoldCall(context.Background(), call("alice", "create_issue", `{}`)); o.Answer != AnswerRun {
		t.Fatal("not covered before the revocation")
	}
	got, err := g.Revoke(r.ID, Approver{Name: "alice", From: "page"}) // revoking one's own approval narrows access: allowed
	if err != nil || got.Decision.Revoked == nil || got.Decision.Revoked.By != "alice" {
		t.Fatalf("Revoke: %+v, %v", got.Decision, err)
	}
	next := hold(context.Background(), g, call("alice", "create_issue", `{}`))
	rn := pendingFor(t, g, "alice", "create_issue", 1)
	still(t, g, rn.ID, next)
	_, err = g.Revoke(r.ID, Approver{Name: "carol"})
	wantErr(t, err, ErrDecided, "already revoked by alice")
	_, err = g.Revoke("apr-aaaaaaaaaaaaaaaa", Approver{Name: "carol"})
	wantErr(t, err, ErrNotFound, "no approval request")
	// An approval once is not remembered; a pending request has nothing.
	pend := pendingFor(t, g, "alice", "create_issue", 1)
	_, err = g.Revoke(pend.ID, Approver{Name: "carol"})
	wantErr(t, err, ErrDecided, "is pending")
	mustDecide(t, g, pend.ID, VerdictApprove, ForOnce)
	recv(t, next)
	_, err = g.Revoke(pend.ID, Approver{Name: "carol"})
	wantErr(t, err, ErrDecided, "approved once")
}

// Just before an approved call is released the caller re-checks the table;
// a refusal means it does not run, and the approval once is spent.
func TestRecheck(t *testing.T) {
	g := openGate(t, "", nil)
	c := call("alice", "merge_pull_request", `{}`)
	c.Recheck = func() error { return errors.New("the serving table now denies github/merge_pull_request") }
	ch := hold(context.Background(), g, c)
	pendingFor(t, g, "alice", "merge_pull_request", 1)
	dup := hold(context.Background(), g, call("alice", "merge_pull_request", `{}`))
	r := pendingFor(t, g, "alice", "merge_pull_request", 2)
	mustDecide(t, g, r.ID, VerdictApprove, ForOnce)
	h := recv(t, ch)
	if h.o.Answer != AnswerNotRun || !strings.Contains(h.o.Reason, "now denies") {
		t.Fatalf("got %+v", h.o)
	}
	if d := recv(t, dup); d.o.Answer != AnswerNotRun {
		t.Fatalf("the folded call: %+v", d.o)
	}
	got, _ := g.Get(r.ID)
	if !strings.HasPrefix(got.Ran, "not run: ") {
		t.Fatalf("ran %q", got.Ran)
	}
}

// An approval once not used within the window lapses.
func TestOnceWindow(t *testing.T) {
	clk := newClock()
	g := openGate(t, "", func(c *Config) { c.Now = clk.Now; c.OnceWindow = time.Second })
	c := call("alice", "merge_pull_request", `{}`)
	c.Recheck = func() error { clk.Add(2 * time.Second); return nil }
	ch := hold(context.Background(), g, c)
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)
	mustDecide(t, g, r.ID, VerdictApprove, ForOnce)
	if h := recv(t, ch); h.o.Answer != AnswerNotRun || !strings.Contains(h.o.Reason, "not used within 1s") {
		t.Fatalf("got %+v", h.o)
	}
}

// A held call whose client asked for progress is told at once, and then
// every ProgressInterval, that it waits, naming the request and its link.
// In a synctest bubble: the intervals pass in fake time, and after
// synctest.Wait every message due has been sent, so they are counted
// exactly.
func TestProgress(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const interval = 15 * time.Second
		g := openGate(t, "", func(c *Config) { c.ProgressInterval = interval })
		var mu sync.Mutex
		var msgs []string
		c := call("alice", "merge_pull_request", `{}`)
		c.Timeout = time.Hour
		c.Progress = func(m string) { mu.Lock(); msgs = append(msgs, m); mu.Unlock() }
		ch := hold(context.Background(), g, c)
		synctest.Wait()
		r := pendingFor(t, g, "alice", "merge_pull_request", 1)
		time.Sleep(3*interval + interval/2)
		synctest.Wait()
		mu.Lock()
		n := len(msgs)
		mu.Unlock()
		if n != 4 {
			t.Errorf("%d progress messages after 3.5 intervals; want 4 (one at once, one per interval)", n)
		}
		mustDecide(t, g, r.ID, VerdictDeny, "")
		recv(t, ch)
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if !strings.Contains(m, r.ID) || !strings.Contains(m, "http://approvals.test/approvals/"+r.ID) {
				t.Fatalf("progress message %q does not name the request and its link", m)
			}
		}
	})
}

// The store keeps a preview, never the arguments; previews can be off.
func TestArgumentsNeverStored(t *testing.T) {
	dir := t.TempDir()
	g := openGate(t, dir, func(c *Config) { c.Servers = map[string]ServerOptions{"vault": {NoPreview: true}} })
	secret := strings.Repeat("x", 80) + "SECRET-TAIL-1234"
	args := fmt.Sprintf(`{"token":%q,"nested":{"password":"hunter2-SECRET"},"list":["SECRET-IN-LIST"]}`, secret)
	ch := hold(context.Background(), g, call("alice", "merge_pull_request", args))
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)
	vc := call("alice", "read_secret", `{"path":"kv/SECRET-PATH"}`)
	vc.Server = "vault"
	vch := hold(context.Background(), g, vc)
	rv := pendingFor(t, g, "alice", "read_secret", 1)
	if rv.Preview != nil || !rv.PreviewOff {
		t.Fatalf("preview off: %+v", rv.Preview)
	}
	mustDecide(t, g, r.ID, VerdictDeny, "")
	mustDecide(t, g, rv.ID, VerdictDeny, "")
	recv(t, ch)
	recv(t, vch)
	want := map[string]string{"list": "[array of 1]", "nested": "{object with 1 key}", "token": `"` + strings.Repeat("x", 80) + `"… (96 characters)`}
	for _, f := range r.Preview.Fields {
		if want[f.Key] != f.Value {
			t.Errorf("preview %s = %s, want %s", f.Key, f.Value, want[f.Key])
		}
	}
	for _, name := range []string{StateFile, AuditFile} {
		s := readFile(t, dir, name)
		if strings.Contains(s, "SECRET") || strings.Contains(s, "hunter2") {
			t.Errorf("%s holds argument values:\n%s", name, s)
		}
		// Not even their fingerprints, which could be reversed by
		// guessing small arguments.
		for _, fp := range []string{r.Fingerprint, rv.Fingerprint} {
			if fp == "" || strings.Contains(s, strings.TrimPrefix(fp, "sha256:")) {
				t.Errorf("%s holds the fingerprint %q", name, fp)
			}
		}
	}
}

// A restart ends pending requests as expired and keeps remembered
// approvals; decisions made before it stand.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	g := openGate(t, dir, func(c *Config) { c.Now = clk.Now })
	// A duration approval.
	ch := hold(context.Background(), g, call("alice", "create_issue", `{}`))
	granted := pendingFor(t, g, "alice", "create_issue", 1)
	mustDecide(t, g, granted.ID, VerdictApprove, ForWeek)
	recv(t, ch)
	// A denial, and an approval once that ran.
	ch = hold(context.Background(), g, call("alice", "delete_repo", `{}`))
	denied := pendingFor(t, g, "alice", "delete_repo", 1)
	mustDecide(t, g, denied.ID, VerdictDeny, "")
	recv(t, ch)
	ch = hold(context.Background(), g, call("alice", "close_issue", `{}`))
	once := pendingFor(t, g, "alice", "close_issue", 1)
	mustDecide(t, g, once.ID, VerdictApprove, ForOnce)
	recv(t, ch)
	// A pending request whose call dies with the gateway.
	ctx, cancel := context.WithCancel(context.Background())
	held := hold(ctx, g, call("alice", "merge_pull_request", `{}`))
	pending := pendingFor(t, g, "alice", "merge_pull_request", 1)
	crash(g)
	cancel()
	<-held // the call is gone with the process

	clk.Add(time.Hour)
	g2 := openGate(t, dir, func(c *Config) { c.Now = clk.Now })
	got, ok := g2.Get(pending.ID)
	if !ok || got.Status != Expired || !strings.Contains(got.End, "gateway stopped") {
		t.Fatalf("pending request after restart: %+v", got)
	}
	// It was recorded with the call that made it.
	if got.Calls != 1 {
		t.Errorf("the pending request was recorded with %d calls, want 1", got.Calls)
	}
	_, err := g2.Decide(pending.ID, VerdictApprove, ForOnce, "", Approver{Name: "carol"})
	wantErr(t, err, ErrExpired, "expired")
	if d, _ := g2.Get(denied.ID); d.Status != Denied || d.Decision.By != "carol" {
		t.Fatalf("denial lost: %+v", d)
	}
	if o, _ := g2.Get(once.ID); o.Status != Approved || o.Ran != "ran" {
		t.Fatalf("approval once lost: %+v", o)
	}
	o, err := g2.HoldCall(context.Background(), call("alice", "create_issue", `{"title":"after restart"}`))
	if err != nil || o.Answer != AnswerRun || o.RequestID != granted.ID {
		t.Fatalf("duration approval after restart: %+v, %v", o, err)
	}
	// Revoked survives another restart.
	if _, err := g2.Revoke(granted.ID, Approver{Name: "carol"}); err != nil {
		t.Fatal(err)
	}
	g2.Close()
	g3 := openGate(t, dir, func(c *Config) { c.Now = clk.Now })
	if r, _ := g3.Get(granted.ID); r.Active(clk.Now()) || r.Decision.Revoked == nil {
		t.Fatalf("revocation lost: %+v", r.Decision)
	}
	audit := readFile(t, dir, AuditFile)
	for _, want := range []string{`"event":"requested"`, `"event":"approved"`, `"by":"carol"`, `"from":"test"`, `"event":"denied"`, `"event":"expired"`, `"event":"revoked"`, `"event":"ran"`} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit log lacks %s", want)
		}
	}
}

func TestStoreDamage(t *testing.T) {
	dir := t.TempDir()
	g := openGate(t, dir, nil)
	ch := hold(context.Background(), g, call("alice", "create_issue", `{}`))
	r := pendingFor(t, g, "alice", "create_issue", 1)
	mustDecide(t, g, r.ID, VerdictApprove, ForWeek)
	recv(t, ch)
	crash(g)
	path := filepath.Join(dir, StateFile)
	good, _ := os.ReadFile(path)
	// A line cut short at the end: dropped, the rest stands.
	os.WriteFile(path, append(append([]byte{}, good...), `{"id":"apr-torn","kind":"tool","sta`...), 0o600)
	g2 := openGate(t, dir, nil)
	if got, _ := g2.Get(r.ID); !got.Active(time.Now()) {
		t.Fatal("approval lost next to a torn line")
	}
	crash(g2)
	// A damaged line in the middle: refuse to start, naming it.
	os.WriteFile(path, append([]byte("not json\n"), good...), 0o600)
	_, err := Open(Config{StateDir: dir})
	if err == nil || !strings.Contains(err.Error(), StateFile+":1:") {
		t.Fatalf("got %v, want the damaged line named", err)
	}
}

func TestOneGatewayPerStore(t *testing.T) {
	dir := t.TempDir()
	openGate(t, dir, nil)
	_, err := Open(Config{StateDir: dir})
	if err == nil || !strings.Contains(err.Error(), "in use by another gateway") {
		t.Fatalf("got %v", err)
	}
	if _, err := Open(Config{}); err == nil || !strings.Contains(err.Error(), "state directory") {
		t.Fatalf("no state dir: %v", err)
	}
}

func TestConsent(t *testing.T) {
	g := openGate(t, "", func(c *Config) { c.ConsentWait = 5 * time.Second })
	cc := &ConsentCall{Principal: "alice", Server: "github", URI: "ui://github/app.html", Channel: pageChannel}
	type res struct {
		ok  bool
		err error
	}
	ask := func() <-chan res {
		ch := make(chan res, 1)
		go func() {
			ok, _, err := g.Consent(context.Background(), cc)
			ch <- res{ok, err}
		}()
		return ch
	}
	waitPending := func() Request {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			changed := g.Changed()
			for _, r := range g.List(Filter{Status: Pending}) {
				if r.Kind == KindConsent && g.Waiting(r.ID) > 0 {
					return r
				}
			}
			select {
			case <-changed:
			case <-deadline:
				t.Fatal("no consent request")
			}
		}
	}
	ch := ask()
	r := waitPending()
	if r.URI != cc.URI || r.Tool != "" {
		t.Fatalf("consent request %+v", r)
	}
	_, err := g.Decide(r.ID, VerdictApprove, ForHour, "", Approver{Name: "carol"})
	wantErr(t, err, ErrInvalid, "remembered")
	mustDecide(t, g, r.ID, VerdictDeny, "")
	if x := <-ch; x.ok || x.err != nil {
		t.Fatalf("denied consent: %+v", x)
	}
	ch = ask()
	r = waitPending()
	mustDecide(t, g, r.ID, VerdictApprove, "")
	if x := <-ch; !x.ok {
		t.Fatal("granted consent refused")
	}
	// Remembered: no new request.
	if ok, o, _ := g.Consent(context.Background(), cc); !ok || o.RequestID != r.ID {
		t.Fatalf("remembered consent: %v %+v", ok, o)
	}
	// Per resource and per principal.
	other := *cc
	other.URI = "ui://github/other.html"
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if ok, _, _ := g.Consent(ctx, &other); ok {
		t.Fatal("consent to one resource covered another")
	}
	if _, err := g.Revoke(r.ID, Approver{Name: "carol"}); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if ok, _, _ := g.Consent(ctx2, cc); ok {
		t.Fatal("revoked consent still granted")
	}
	if _, _, err := g.Consent(context.Background(), &ConsentCall{Principal: "alice", Server: "github", URI: "https://x"}); err == nil {
		t.Fatal("consent asked for a resource that is not ui://")
	}
}

func TestCheckChannel(t *testing.T) {
	g := openGate(t, "", func(c *Config) { c.PageServed = false })
	for _, tc := range []struct {
		ch   Channel
		want string
	}{
		{Channel{Kind: ChannelPage}, "no admin listener"},
		{Channel{Kind: ChannelWebhook, URL: "https://hooks.example.com/x"}, "no webhook secret"},
		{Channel{Kind: "pager"}, "unknown kind"},
	} {
		if err := g.CheckChannel("c", tc.ch); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.ch, err, tc.want)
		}
	}
	g2 := openGate(t, "", func(c *Config) { c.Webhook.Secret = []byte("0123456789abcdef0123") })
	if err := g2.CheckChannel("c", Channel{Kind: ChannelWebhook, URL: "https://hooks.example.com/x"}); err != nil {
		t.Fatal(err)
	}
	if err := g2.CheckChannel("c", Channel{Kind: ChannelWebhook, URL: "ftp://x"}); err == nil {
		t.Fatal("ftp webhook accepted")
	}
	if err := g2.CheckChannel("c", Channel{Kind: ChannelPage}); err != nil {
		t.Fatal(err)
	}
	// A webhook with its secret but no admin listener tells someone of a
	// request nobody can decide.
	g3 := openGate(t, "", func(c *Config) { c.Webhook.Secret = []byte("0123456789abcdef0123"); c.PageServed = false })
	if err := g3.CheckChannel("c", Channel{Kind: ChannelWebhook, URL: "https://hooks.example.com/x"}); err == nil || !strings.Contains(err.Error(), "no admin listener") {
		t.Errorf("a webhook without an admin listener: got %v, want an error naming the admin listener", err)
	}
	if _, err := Open(Config{StateDir: t.TempDir(), Webhook: WebhookOptions{Secret: []byte("short")}}); err == nil {
		t.Fatal("a short secret was accepted")
	}
}

// Many principals and tools at once, decided concurrently: every call
// gets exactly the answer its request was given. In a synctest bubble: the
// test waits for the gate's changes, and a call that never shows up as
// waiting fails the test as a deadlock instead of hanging it.
func TestConcurrentDecisions(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := openGate(t, "", nil)
		const n = 40
		var ran atomic.Int32
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				o, err := g.HoldCall(context.Background(), call(fmt.Sprintf("p%d", i), "t", fmt.Sprintf(`{"i":%d}`, i)))
				if err != nil {
					t.Error(err)
					return
				}
				want := AnswerRun
				if i%2 == 1 {
					want = AnswerDenied
				}
				if o.Answer != want {
					t.Errorf("call %d: %v, want %v", i, o.Answer, want)
				}
				if o.Answer == AnswerRun {
					ran.Add(1)
				}
			})
		}
		decided := map[string]bool{}
		for len(decided) < n {
			changed := g.Changed()
			for _, r := range g.List(Filter{Status: Pending}) {
				if decided[r.ID] || g.Waiting(r.ID) == 0 {
					continue
				}
				decided[r.ID] = true
				var i int
				fmt.Sscanf(r.Principal, "p%d", &i)
				v := VerdictApprove
				if i%2 == 1 {
					v = VerdictDeny
				}
				go func() {
					if _, err := g.Decide(r.ID, v, "", "", Approver{Name: "carol"}); err != nil {
						t.Error(err)
					}
				}()
			}
			if len(decided) < n {
				<-changed
			}
		}
		wg.Wait()
		if ran.Load() != n/2 {
			t.Fatalf("%d ran, want %d", ran.Load(), n/2)
		}
	})
}

// Whatever the state file holds, opening it either fails with a message
// naming the file, or yields requests the gate could have written.
func FuzzStateFile(f *testing.F) {
	f.Add([]byte(`{"id":"apr-aaaaaaaaaaaaaaaa","kind":"tool","status":"pending","principal":"a","server":"s","tool":"t","channel":"c","created":"2026-01-01T00:00:00Z","expires":"2026-01-01T00:05:00Z","calls":1}` + "\n"))
	f.Add([]byte("{}\n{\"id\":\"x\"}\n"))
	f.Add([]byte(`{"id":"x","kind":"tool","status":"approved"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, StateFile), data, 0o600); err != nil {
			t.Fatal(err)
		}
		reqs, _, err := readState(filepath.Join(dir, StateFile))
		if err != nil {
			if !strings.Contains(err.Error(), StateFile) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, r := range reqs {
			if err := r.check(); err != nil {
				t.Fatalf("accepted a request the gate could not have written: %v", err)
			}
		}
	})
}
