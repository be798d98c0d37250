package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests here hold a call for approval through each path of the HTTP
// front: the front's own answer, and the SDK's (a progress token in _meta
// sends a call there). holdingGateway holds github__merge_pull_request
// for up to 120 s.

// heldToolCall is a tools/call of the held tool under id 5, through the SDK
// when viaSDK.
func heldToolCall(viaSDK bool) string {
	params := `{"name":"github__merge_pull_request","arguments":{}}`
	if viaSDK {
		params = withProgressToken(params)
	}
	return `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":` + params + `}`
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

// paths runs test through each path of the HTTP front.
func paths(t *testing.T, test func(t *testing.T, viaSDK bool)) {
	for name, viaSDK := range map[string]bool{"front": false, "SDK": true} {
		t.Run(name, func(t *testing.T) { test(t, viaSDK) })
	}
}

// TestHTTPDeleteDuringHold: a DELETE ends the session's held call, and the
// client's POST gets the call's answer (the SDK, closing, would drop it),
// on both paths.
func TestHTTPDeleteDuringHold(t *testing.T) {
	paths(t, func(t *testing.T, viaSDK bool) {
		tg, holding, _ := holdingGateway(t)
		srv := aliceFront(t, tg)
		do := rawHTTP(t, srv.URL)
		session := rawHTTPSession(t, do, legacyVersion)
		out := postAsync(do, session, heldToolCall(viaSDK))
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
// reaches its hold after is ended at once, on both paths: the DELETE does
// not wait for the approval timeout.
func TestHTTPDeleteBeforeHold(t *testing.T) {
	paths(t, func(t *testing.T, viaSDK bool) {
		lg := &gatedLog{reached: make(chan struct{}), release: make(chan struct{})}
		tg, _, _ := holdingGateway(t, func(c *Config) { c.Log = lg })
		srv := aliceFront(t, tg)
		do := rawHTTP(t, srv.URL)
		session := rawHTTPSession(t, do, legacyVersion)
		out := postAsync(do, session, heldToolCall(viaSDK))
		<-lg.reached
		deleted := make(chan time.Time, 1)
		go func() {
			do(http.MethodDelete, "alice-token", session, legacyVersion, "")
			deleted <- time.Now()
		}()
		time.Sleep(100 * time.Millisecond) // the DELETE has ended the holds there are: none
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
// held leaves its session idle, on both paths, as in the SDK: after the
// idle timeout the session is closed, its hold ended, and a call in it is
// answered 404.
func TestHTTPDisconnectDuringHold(t *testing.T) {
	paths(t, func(t *testing.T, viaSDK bool) {
		tg, holding, _ := holdingGateway(t)
		const idle = 150 * time.Millisecond
		srv := aliceFrontWith(t, tg, HTTPOptions{IdleTimeout: idle})
		do := rawHTTP(t, srv.URL)
		session := rawHTTPSession(t, do, legacyVersion)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(heldToolCall(viaSDK)))
		req.Header.Set("Authorization", "Bearer alice-token")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(sessionIDHeader, session)
		req.Header.Set("Mcp-Protocol-Version", legacyVersion)
		go func() {
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		<-holding
		cancel() // the client goes away, with no notifications/cancelled
		eventually(t, 900*time.Millisecond, "the idle session to close", func() bool { return len(tg.sessionsOf(t, "alice")) == 0 })
		eventually(t, time.Second, "the hold to end", func() bool { return len(verdicts(tg)) == 1 })
		if v := verdicts(tg); v[0] != "ended" {
			t.Errorf("verdict %q; want ended", v[0])
		}
		if resp, out := do(http.MethodPost, "alice-token", session, legacyVersion, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"github__echo"}}`); resp.StatusCode != http.StatusNotFound {
			t.Errorf("a call in the closed session was answered %s %s", resp.Status, out)
		}
	})
}
