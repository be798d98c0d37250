package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The tests here hold a call for approval in an HTTP session, with and
// without a progress token (a held call's progress goes on its request's
// stream). holdingGateway holds github__merge_pull_request for up to
// 120 s.

// heldToolCall is a tools/call of the held tool under id 5, with a
// progress token when progress.
func heldToolCall(progress bool) string {
	params := `{"name":"github__merge_pull_request","arguments":{}}`
	if progress {
		params = `{"_meta":{"progressToken":"p"},` + strings.TrimPrefix(params, "{")
	}
	return `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":` + params + `}`
}

// sessionsOf lists the ids of principal's open sessions.
func (tg *testGateway) sessionsOf(t *testing.T, principal string) []string {
	t.Helper()
	var ids []string
	if s := tg.serverOf(principal); s != nil {
		for ss := range s.Sessions() {
			if ss.ID() != "" {
				ids = append(ids, ss.ID())
			}
		}
	}
	return ids
}

// verdicts are the approval verdicts tg logged.
func verdicts(tg *testGateway) []string {
	var v []string
	for _, r := range tg.log.all() {
		if r.Op == OpApproval {
			v = append(v, r.Verdict)
		}
	}
	return v
}

// postAsync sends body in alice's session from a goroutine of its own;
// the answer's body arrives on the channel.
func postAsync(do func(method, token, session, version, body string) (*http.Response, string), session, body string) <-chan string {
	out := make(chan string, 1)
	go func() {
		_, o := do(http.MethodPost, "alice-token", session, legacyVersion, body)
		out <- o
	}()
	return out
}

// paths runs test for a held call without and with a progress token.
func paths(t *testing.T, test func(t *testing.T, progress bool)) {
	for name, progress := range map[string]bool{"plain": false, "progress": true} {
		t.Run(name, func(t *testing.T) { test(t, progress) })
	}
}

// TestHTTPDeleteDuringHold: a DELETE ends the session's held call, and the
// client's POST gets the call's answer (the SDK, closing, would drop it).
func TestHTTPDeleteDuringHold(t *testing.T) {
	paths(t, func(t *testing.T, progress bool) {
		tg, holding, _ := holdingGateway(t)
		srv := aliceFront(t, tg)
		do := rawHTTP(t, srv.URL)
		session := rawHTTPSession(t, do, legacyVersion)
		out := postAsync(do, session, heldToolCall(progress))
		<-holding
		if resp, body := do(http.MethodDelete, "alice-token", session, legacyVersion, ""); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE: %s %s", resp.Status, body)
		}
		select {
		case o := <-out:
			if !strings.Contains(o, `"id":5,"result"`) || !strings.Contains(o, `"isError":true`) {
				t.Errorf("the held call was answered %q; want its refusal", o)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("the held call was not answered")
		}
		if v := verdicts(tg); len(v) != 1 || v[0] != "ended" {
			t.Errorf("verdicts %q; want [ended]", v)
		}
	})
}

// gatedLog holds the decision record of the held tool until release is
// closed, so that a DELETE can come between a call's decision and its hold.
type gatedLog struct {
	memLog
	reached, release chan struct{}
	once             sync.Once
}

func (l *gatedLog) Log(r *Record) error {
	if r.Op == OpCall && r.Name == "merge_pull_request" {
		l.once.Do(func() { close(l.reached); <-l.release })
	}
	return l.memLog.Log(r)
}

// TestHTTPDeleteBeforeHold: a call taken before its session's DELETE that
// reaches its hold after is ended at once: the DELETE does not wait for
// the approval timeout.
func TestHTTPDeleteBeforeHold(t *testing.T) {
	paths(t, func(t *testing.T, progress bool) {
		lg := &gatedLog{reached: make(chan struct{}), release: make(chan struct{})}
		tg, _, _ := holdingGateway(t, func(c *Config) { c.Log = lg })
		srv := aliceFront(t, tg)
		do := rawHTTP(t, srv.URL)
		session := rawHTTPSession(t, do, legacyVersion)
		out := postAsync(do, session, heldToolCall(progress))
		<-lg.reached
		deleted := make(chan time.Time, 1)
		go func() {
			do(http.MethodDelete, "alice-token", session, legacyVersion, "")
			deleted <- time.Now()
		}()
		// The DELETE has ended the holds there are (none) and waits for
		// the call's POST.
		eventually(t, 10*time.Second, "the DELETE to end the session's holds", func() bool {
			tg.held.mu.Lock()
			defer tg.held.mu.Unlock()
			_, ok := tg.held.ended[session]
			return ok
		})
		released := time.Now()
		close(lg.release)
		select {
		case at := <-deleted:
			if took := at.Sub(released); took > 2*time.Second {
				t.Errorf("the DELETE was answered %v after the call reached its hold", took)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the DELETE was not answered 5 s after the call reached its hold")
		}
		<-out
		var v []string
		for _, r := range lg.all() {
			if r.Op == OpApproval {
				v = append(v, r.Verdict)
			}
		}
		if len(v) != 1 || v[0] != "ended" {
			t.Errorf("verdicts %q; want [ended]", v)
		}
	})
}

// TestHTTPDisconnectDuringHold: a client that goes away while its call is
// held ends the hold (no one can receive its answer: the gateway keeps no
// events to resume the stream with), so the session goes idle: after the
// SDK's idle timeout it is closed, and a call in it is answered 404. In a
// synctest bubble, over fake time.
func TestHTTPDisconnectDuringHold(t *testing.T) {
	paths(t, func(t *testing.T, progress bool) {
		synctest.Test(t, func(t *testing.T) {
			tg, holding, _ := holdingGateway(t)
			const idle = 150 * time.Millisecond
			client, do := memFront(t, tg, HTTPOptions{IdleTimeout: idle})
			session := rawHTTPSession(t, do, legacyVersion)
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, memURL, strings.NewReader(heldToolCall(progress)))
			req.Header.Set("Authorization", "Bearer alice-token")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set(sessionIDHeader, session)
			req.Header.Set("Mcp-Protocol-Version", legacyVersion)
			go func() {
				if resp, err := client.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
			<-holding
			cancel() // the client goes away, with no notifications/cancelled
			synctest.Wait()
			if v := verdicts(tg); len(v) != 1 || v[0] != "cancelled" {
				t.Fatalf("verdicts %q once the client went away; want [cancelled]", v)
			}
			time.Sleep(idle - time.Millisecond)
			synctest.Wait()
			if n := len(tg.sessionsOf(t, "alice")); n != 1 {
				t.Fatalf("%d session(s) open %v after the client went away; want it open until %v", n, idle-time.Millisecond, idle)
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			if n := len(tg.sessionsOf(t, "alice")); n != 0 {
				t.Fatalf("%d session(s) open %v after the client went away; want it closed idle", n, idle)
			}
			if resp, out := do(http.MethodPost, "alice-token", session, legacyVersion, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"github__echo"}}`); resp.StatusCode != http.StatusNotFound {
				t.Errorf("a call in the closed session was answered %s %s", resp.Status, out)
			}
		})
	})
}

// Another principal's POST naming a session keeps the session's DELETE
// waiting for nothing: bob sends a POST with alice's session id whose body
// never ends, and alice's DELETE is answered at once, not after
// StopTimeout (in a synctest bubble: fake time).
func TestHTTPDeleteNotHeldByAnothersPost(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tg := startGateway(t, nil)
		client := memFrontFor(t, tg, "alice", "bob")
		do := rawHTTPWith(t, client, memURL)
		session := rawHTTPSession(t, do, legacyVersion)

		body, trickle := io.Pipe()
		defer trickle.Close()
		go func() {
			req, _ := http.NewRequest(http.MethodPost, memURL, body)
			req.Header.Set("Authorization", "Bearer bob-token")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set(sessionIDHeader, session)
			req.Header.Set("Mcp-Protocol-Version", legacyVersion)
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		trickle.Write([]byte(`{"jsonrpc":"2.0",`))
		synctest.Wait() // bob's POST is read as far as it goes

		start := time.Now()
		if resp, out := do(http.MethodDelete, "alice-token", session, legacyVersion, ""); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE: %s %s", resp.Status, out)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("alice's DELETE waited %s for bob's POST", d)
		}
	})
}
