package approval

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a settable clock for tests of durations.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var pageChannel = Channel{Name: "page", Kind: ChannelPage}

// openGate opens a gate on dir (a fresh directory when empty).
func openGate(t testing.TB, dir string, mutate func(*Config)) *Gate {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := Config{StateDir: dir, PageServed: true, PageURL: "http://approvals.test"}
	if mutate != nil {
		mutate(&cfg)
	}
	g, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// crash drops the gate without the orderly Close: the store's files are
// closed as a dying process would leave them, nothing more is written.
func crash(g *Gate) {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.cancel()
	g.store.close()
}

func call(principal, tool, args string) *Call {
	return &Call{Principal: principal, Server: "github", Tool: tool, Arguments: []byte(args), Origin: "policy.cue:7",
		Timeout: 10 * time.Second, Channel: pageChannel, Client: "test-agent 1.0", Session: "s-1", TableSerial: 3}
}

type held struct {
	o   Outcome
	err error
}

// hold starts HoldCall in the background.
func hold(ctx context.Context, g *Gate, c *Call) <-chan held {
	ch := make(chan held, 1)
	go func() {
		o, err := g.HoldCall(ctx, c)
		ch <- held{o, err}
	}()
	return ch
}

// pendingFor waits until the gate has a pending request for principal and
// tool with n calls waiting, and returns it.
func pendingFor(t testing.TB, g *Gate, principal, tool string, n int) Request {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ch := g.Changed()
		for _, r := range g.List(Filter{Status: Pending}) {
			if r.Principal == principal && r.Tool == tool && g.Waiting(r.ID) >= n {
				return r
			}
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("no pending request for %s/%s with %d calls waiting", principal, tool, n)
		}
	}
}

// pendingWith waits until the gate has a pending request for principal
// and tool, with a call waiting, that ok accepts, and returns it.
func pendingWith(t testing.TB, g *Gate, principal, tool string, ok func(Request) bool) Request {
	t.Helper()
	return pendingWhere(t, g, func(r Request) bool { return r.Principal == principal && r.Tool == tool && ok(r) })
}

// pendingWhere waits until the gate has a pending request with a call
// waiting that ok accepts, and returns it. It looks again whenever the
// gate says something changed (Changed), not at intervals.
func pendingWhere(t testing.TB, g *Gate, ok func(Request) bool) Request {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ch := g.Changed()
		for _, r := range g.List(Filter{Status: Pending}) {
			if g.Waiting(r.ID) > 0 && ok(r) {
				return r
			}
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("no such pending request")
		}
	}
}

func recv(t testing.TB, ch <-chan held) held {
	t.Helper()
	select {
	case h := <-ch:
		return h
	case <-time.After(10 * time.Second):
		t.Fatal("the held call did not return")
	}
	return held{}
}

// still checks that the call ch is held for request id and has not been
// answered: the request is pending with a call waiting, and ch is empty.
// A held call is answered only once its request is decided or ends, or
// the call leaves it, each of which the gate's state shows: the check is
// exact when it is made, with no wait.
func still(t testing.TB, g *Gate, id string, ch <-chan held) {
	t.Helper()
	if r, ok := g.Get(id); !ok || r.Status != Pending || g.Waiting(id) == 0 {
		t.Fatalf("request %s is %v with %d calls waiting; want it pending with its call held", id, r.Status, g.Waiting(id))
	}
	select {
	case h := <-ch:
		t.Fatalf("the call returned %v (%v) while it should still be held", h.o.Answer, h.err)
	default:
	}
}

func mustDecide(t testing.TB, g *Gate, id, verdict, forWhat string) Request {
	t.Helper()
	r, err := g.Decide(id, verdict, forWhat, "", Approver{Name: "carol", From: "test"})
	if err != nil {
		t.Fatalf("Decide %s %s %s: %v", id, verdict, forWhat, err)
	}
	return r
}

func wantErr(t testing.TB, err, target error, contains string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
	if !strings.Contains(err.Error(), contains) {
		t.Fatalf("error %q does not say %q", err, contains)
	}
}

func readFile(t testing.TB, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
