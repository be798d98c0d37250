package approval

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"
)

// An approver has at most maxPageSessions sign-ins at once: one more ends
// the oldest, and no other approver's. Expired sign-ins are let go as new
// ones are made, so the sign-ins kept stay bounded however often an
// approver's token signs in.
func TestPageSessionsCapped(t *testing.T) {
	clk := newClock()
	g := openGate(t, "", func(c *Config) { c.Now = clk.Now })
	srv := adminServer(t, g)
	signedIn := func(b *browser) bool {
		t.Helper()
		st, _, _ := b.do("GET", "/approvals", nil, nil)
		return st == http.StatusOK
	}
	signIn := func(token string) *browser {
		t.Helper()
		b := newBrowser(t, srv)
		if st, _, _ := b.do("POST", "/login", url.Values{"token": {token}}, nil); st != http.StatusSeeOther {
			t.Fatalf("sign-in: %d", st)
		}
		return b
	}
	dave := signIn(daveToken)
	var carol []*browser
	for range maxPageSessions {
		clk.Add(time.Second) // each sign-in expires a second after the one before
		carol = append(carol, signIn(carolToken))
	}
	for i, b := range carol {
		if !signedIn(b) {
			t.Fatalf("carol's sign-in %d of %d ended", i+1, maxPageSessions)
		}
	}
	latest := signIn(carolToken)
	if signedIn(carol[0]) {
		t.Errorf("carol's oldest sign-in still works beside %d newer ones", maxPageSessions)
	}
	for i, b := range append(carol[1:], latest) {
		if !signedIn(b) {
			t.Errorf("carol's sign-in %d ended; only the oldest should", i+2)
		}
	}
	if !signedIn(dave) {
		t.Error("dave's sign-in ended when carol's were capped")
	}
}

// A new sign-in lets every expired one go, whoever's it was: expired
// sign-ins are not kept until someone presents their cookie.
func TestPageSessionsExpiredLetGo(t *testing.T) {
	now := time.Now()
	a := &admin{sessions: map[string]*pageSession{
		"old-carol": {approver: "carol", expires: now.Add(-time.Second)},
		"old-dave":  {approver: "dave", expires: now},
		"dave":      {approver: "dave", expires: now.Add(time.Hour)},
	}}
	a.endSessionsLocked(now, "erin")
	if _, ok := a.sessions["dave"]; !ok || len(a.sessions) != 1 {
		t.Errorf("sign-ins kept: %v; want only dave's unexpired one", slices.Sorted(maps.Keys(a.sessions)))
	}
}
