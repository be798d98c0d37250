package approval

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/runtime/principal"
)

// chromium is where Debian's chromium package puts the browser.
const chromium = "/usr/bin/chromium"

// browserContext starts a headless Chromium with a fresh profile and
// returns a tab's context. The test skips when Chromium is not installed.
func browserContext(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("skipping the browser test: it needs Chromium at %s (Debian: apt-get install -y chromium)", chromium)
	}
	profile, err := os.MkdirTemp("", "policyc-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Chromium's helpers may still write to the profile for a moment
		// after the browser exits.
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
	)
	t.Cleanup(cancelAlloc)
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(cancelTab)
	ctx, cancel := context.WithTimeout(tab, 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// callOut is what a held call returned to its agent.
type callOut struct {
	res *mcp.CallToolResult
	err error
}

// holdMerge has alice call github__merge_pull_request through the gate,
// which holds it, and returns the stack, the pending request and what the
// call will return.
func holdMerge(t *testing.T, gate *Gate) (*stack, Request, <-chan callOut) {
	t.Helper()
	s := newStack(t, gate, e2ePolicy)
	cs := s.client(t, "alice")
	done := make(chan callOut, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: map[string]any{"number": 42, "repo": "acme/web"}})
		done <- callOut{res, err}
	}()
	return s, pendingFor(t, gate, "alice", "merge_pull_request", 1), done
}

// A real click on the approvals page approves a held call, and the call
// then completes: the link to the request lands on it after signing in.
func TestBrowserApprove(t *testing.T) {
	ctx := browserContext(t)
	gate := openGate(t, "", pageOnly)
	srv := adminServer(t, gate)
	s, r, done := holdMerge(t, gate)

	openSignedIn(t, ctx, srv.URL, r.ID)
	preview, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("table.preview")))
	if err != nil || !strings.Contains(preview, "acme/web") || !strings.Contains(preview, "42") {
		t.Fatalf("preview on the page: %q (%v)", preview, err)
	}
	select {
	case o := <-done:
		t.Fatalf("the call returned before anyone decided: %+v %v", o.res, o.err)
	default:
	}

	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.ID(r.ID+"-once")))); err != nil {
		t.Fatalf("click Approve once: %v", err)
	}
	outcome, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("dd.outcome")))
	if err != nil || !strings.Contains(outcome, "approved once by carol") {
		t.Fatalf("the page after the click says %q (%v)", outcome, err)
	}
	select {
	case o := <-done:
		if o.err != nil || o.res.IsError || !strings.Contains(resultText(o.res), "merge_pull_request ran with") {
			t.Fatalf("the held call: %+v %v", o.res, o.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held call did not complete after the click")
	}
	if n := s.up.count("merge_pull_request"); n != 1 {
		t.Fatalf("upstream ran %d times", n)
	}
	got, _ := gate.Get(r.ID)
	if got.Decision.By != "carol" || !strings.HasPrefix(got.Decision.From, "page ") || got.Ran != "ran" {
		t.Fatalf("recorded decision %+v, ran %q", got.Decision, got.Ran)
	}
}

// openSignedIn opens the link to request id an approver is sent and, not
// signed in yet, signs in as carol with her token on the form it shows;
// the browser must land on the request's page.
func openSignedIn(t *testing.T, ctx context.Context, base, id string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/approvals/"+id)); err != nil {
		t.Fatalf("open the request's link: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("token")), chromedp.SendKeys(chromedp.ID("token"), carolToken)); err != nil {
		t.Fatalf("fill in the sign-in form: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.ID("sign-in")))); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || loc != base+"/approvals/"+id {
		t.Fatalf("after signing in the page is %s (%v), want the request's", loc, err)
	}
}

// An approver who types a reason and presses Enter denies the request:
// the browser submits the form with its first button, which is Deny, not
// an approval. The held call does not run and the agent is told why.
func TestBrowserEnterInReasonDenies(t *testing.T) {
	ctx := browserContext(t)
	gate := openGate(t, "", pageOnly)
	srv := adminServer(t, gate)
	s, r, done := holdMerge(t, gate)
	openSignedIn(t, ctx, srv.URL, r.ID)

	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil,
		chromedp.SendKeys(chromedp.ID("reason-"+r.ID), "no, wrong repository"+kb.Enter))); err != nil {
		t.Fatalf("type a reason and press Enter: %v", err)
	}
	outcome, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("dd.outcome")))
	if err != nil || !strings.Contains(outcome, "denied by carol") {
		t.Fatalf("the page after Enter says %q (%v)", outcome, err)
	}
	select {
	case o := <-done:
		if o.err != nil || !o.res.IsError || !strings.Contains(resultText(o.res), "no, wrong repository") {
			t.Fatalf("the held call: %+v %v", o.res, o.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held call did not end after the denial")
	}
	if n := s.up.count("merge_pull_request"); n != 0 {
		t.Fatalf("upstream ran %d times", n)
	}
	if got, _ := gate.Get(r.ID); got.Status != Denied || got.Decision.Reason != "no, wrong repository" {
		t.Fatalf("recorded %s, decision %+v", got.Status, got.Decision)
	}
}

// An approver signs in through the identity provider in a real browser
// (the page's button, the provider's login form, the authorization code
// with PKCE back to the page's callback), lands on the request's page and
// approves it; the held call then completes, recorded with the
// approver's issuer and subject. Signing out ends the session.
func TestBrowserProviderSignIn(t *testing.T) {
	ctx := browserContext(t)
	p := startProvider(t)
	gate, srv := signInServer(t, p, pageOnly)
	_, r, done := holdMerge(t, gate)

	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/approvals/"+r.ID)); err != nil {
		t.Fatalf("open the request's link: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.ID("sign-in-provider")))); err != nil {
		t.Fatalf("click the provider's sign-in: %v", err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || !strings.HasPrefix(loc, p.Issuer+"/login?") {
		t.Fatalf("after the sign-in button the browser is at %s (%v), want the provider's login form", loc, err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("username")), chromedp.SendKeys(chromedp.ID("username"), "erin"),
		chromedp.SendKeys(chromedp.ID("password"), "erin-password")); err != nil {
		t.Fatalf("fill in the provider's login form: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.ID("login")))); err != nil {
		t.Fatalf("sign in at the provider: %v", err)
	}
	loc, err = chromedp.Run(ctx, chromedp.Location())
	if err != nil || loc != srv.URL+"/approvals/"+r.ID {
		t.Fatalf("after signing in the page is %s (%v), want the request's", loc, err)
	}
	who, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("form.whoami strong")))
	if err != nil || who != "erin@example.com" {
		t.Fatalf("signed in as %q (%v)", who, err)
	}
	if n := p.Logins(); n != 1 {
		t.Fatalf("the provider's login form signed in %d times", n)
	}

	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.ID(r.ID+"-once")))); err != nil {
		t.Fatalf("click Approve once: %v", err)
	}
	outcome, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("dd.outcome")))
	if err != nil || !strings.Contains(outcome, "approved once by erin@example.com") {
		t.Fatalf("the page after the click says %q (%v)", outcome, err)
	}
	select {
	case o := <-done:
		if o.err != nil || o.res.IsError || !strings.Contains(resultText(o.res), "merge_pull_request ran with") {
			t.Fatalf("the held call: %+v %v", o.res, o.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held call did not complete after the click")
	}
	got, _ := gate.Get(r.ID)
	if want := principal.Ref(principal.Parts{Name: "erin@example.com", Issuer: p.Issuer, Subject: "sub-erin"}); got.Decision.By != want || !strings.HasPrefix(got.Decision.From, "page ") {
		t.Fatalf("recorded decision %+v, want by %q", got.Decision, want)
	}

	// Sign out: the page asks for a sign-in again.
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS("form.whoami button")))); err != nil {
		t.Fatalf("sign out: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/approvals")); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("sign-in-provider"))); err != nil {
		t.Fatalf("after signing out: %v", err)
	}
}
