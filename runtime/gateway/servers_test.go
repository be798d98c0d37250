package gateway

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A principal's server with no session is let go once it has been idle
// for serverIdle, when another principal's server is made: the gateway
// keeps the servers of the principals of the last minutes, not one for
// every principal it ever served (with an identity provider, every
// subject and group set is a principal of its own). A principal that
// comes back gets a new server, its listings taken afresh, and is told
// of changes as before.
func TestIdleServersLetGo(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tg := startGateway(t, nil)
		state := func(p string) (server, session, shown bool) {
			tg.mu.Lock()
			ps := tg.servers[p]
			if ps != nil {
				server, session = true, hasSession(ps.s)
			}
			tg.mu.Unlock()
			tg.shownMu.Lock()
			_, shown = tg.shown[p]
			tg.shownMu.Unlock()
			return server, session, shown
		}
		alice := tg.client(t, "alice", legacyVersion, nil)
		toolNames(t, alice)
		alice.Close()
		eventually(t, 5*time.Second, "alice's session to end", func() bool { _, session, _ := state("alice"); return !session })
		tg.client(t, "bob", legacyVersion, nil) // stays open

		time.Sleep(serverIdle - time.Minute)
		tg.client(t, "carol", legacyVersion, nil)
		if server, _, shown := state("alice"); !server || !shown {
			t.Fatalf("alice's server was let go %s after her session ended, before serverIdle (%s)", serverIdle-time.Minute, serverIdle)
		}

		time.Sleep(2 * time.Minute)
		tg.client(t, "dave", legacyVersion, nil)
		if server, _, shown := state("alice"); server || shown {
			t.Errorf("alice's server (kept: %v) or listing digests (kept: %v) outlived %s idle", server, shown, serverIdle)
		}
		for _, p := range []string{"bob", "carol", "dave"} {
			if server, session, shown := state(p); !server || !session || !shown {
				t.Errorf("%s, with a session open: server %v, session %v, digests %v; want all kept", p, server, session, shown)
			}
		}

		changed := make(chan struct{}, 10)
		alice = tg.client(t, "alice", legacyVersion, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		})
		if names := toolNames(t, alice); !slices.Contains(names, "github__echo") {
			t.Fatalf("alice's tools after she came back: %v", names)
		}
		toldOfNewTool(t, tg, alice, changed, "alice, back on a new server,")
	})
}

// When listsChanged holds the listing digests' lock as idle servers are
// dropped, their digests go at a later drop, not while every new server
// waits; a principal whose server is back by then keeps the digests its
// new server took.
func TestIdleServersDigestsLater(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tg := startGateway(t, nil)
		shown := func(p string) bool {
			tg.shownMu.Lock()
			defer tg.shownMu.Unlock()
			_, ok := tg.shown[p]
			return ok
		}
		server := func(p string) bool {
			tg.mu.Lock()
			defer tg.mu.Unlock()
			return tg.servers[p] != nil
		}
		for _, p := range []string{"alice", "dave"} {
			cs := tg.client(t, p, legacyVersion, nil)
			cs.Close()
		}
		synctest.Wait() // the sessions have ended
		time.Sleep(serverIdle + time.Minute)

		tg.shownMu.Lock() // as listsChanged does while it lists
		tg.serverFor("bob")
		tg.shownMu.Unlock()
		for _, p := range []string{"alice", "dave"} {
			if server(p) || !shown(p) {
				t.Fatalf("%s: server kept %v, digests kept %v; want the server gone, the digests left for later", p, server(p), shown(p))
			}
		}

		tg.client(t, "alice", legacyVersion, nil) // back, with digests of her new server
		time.Sleep(time.Minute)
		tg.serverFor("carol")
		if !shown("alice") {
			t.Error("alice's new server lost its digests at the later drop")
		}
		if shown("dave") {
			t.Error("dave's digests outlived his server")
		}
	})
}
