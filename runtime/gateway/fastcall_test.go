package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// withProgressToken is tools/call params with a progress token added to
// their _meta, which makes the front leave the call to the SDK.
func withProgressToken(params string) string {
	return `{"_meta":{"progressToken":"p"},` + strings.TrimPrefix(params, "{")
}

// TestHTTPFastCallAnswersAsTheSDK: a tools/call the front answers itself
// gets the answer the SDK gives the same call, byte for byte, headers and
// all: for an allowed tool, denied and absent ones, arguments that are not
// an object, and an upstream's error.
func TestHTTPFastCallAnswersAsTheSDK(t *testing.T) {
	tg := startGateway(t, nil)
	srv := aliceFront(t, tg)
	do := rawHTTP(t, srv.URL)
	session := rawHTTPSession(t, do, legacyVersion)
	for _, params := range []string{
		`{"name":"github__echo","arguments":{"b":1,"a":"<&>","u":"\u00e9"}}`,
		`{"name":"github__echo"}`,
		`{"name":"github__echo","arguments":null}`,
		`{"name":"github__delete_repo","arguments":{}}`,
		`{"name":"nosuch__echo"}`,
		`{"name":"list_everything"}`,
		`{"name":""}`,
		`{"name":"github__echo","arguments":[1]}`,
		`{"name":"github__echo","arguments":"x"}`,
		`{"name":"linear__pid"}`,
		`{"NAME":"github__echo"}`,
		`{"name":"github__create_issue","arguments":{"title":"t"},"_meta":{"trace":"x"}}`,
	} {
		for _, id := range []string{`7`, `"seven"`, `-3`} {
			body := func(p string) string {
				return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + p + `}`
			}
			before := tg.fastAnswered.Load()
			fast, fastOut := do(http.MethodPost, "alice-token", session, legacyVersion, body(params))
			if tg.fastAnswered.Load() != before+1 {
				t.Fatalf("the front did not answer %s itself", body(params))
			}
			sdk, sdkOut := do(http.MethodPost, "alice-token", session, legacyVersion, body(withProgressToken(params)))
			if tg.fastAnswered.Load() != before+1 {
				t.Fatalf("the front answered %s itself; want the SDK to", body(withProgressToken(params)))
			}
			if fastOut != sdkOut || fast.StatusCode != sdk.StatusCode {
				t.Errorf("%s:\nfront %s %s\nSDK   %s %s", body(params), fast.Status, fastOut, sdk.Status, sdkOut)
			}
			for _, h := range []string{"Content-Type", "Cache-Control", "Connection", sessionIDHeader} {
				if fast.Header.Get(h) != sdk.Header.Get(h) {
					t.Errorf("%s: header %s is %q from the front, %q from the SDK", body(params), h, fast.Header.Get(h), sdk.Header.Get(h))
				}
			}
			if !strings.HasPrefix(fastOut, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":"+id+",") {
				t.Errorf("%s was answered %s", body(params), fastOut)
			}
		}
	}
}

// TestHTTPFastCallLeavesTheRestToTheSDK: the front answers a tools/call
// itself only when the SDK would take it as it is; everything else is the
// SDK's to answer, or refuse.
func TestHTTPFastCallLeavesTheRestToTheSDK(t *testing.T) {
	tg := startGateway(t, nil)
	srv := aliceFront(t, tg)
	do := rawHTTP(t, srv.URL)
	session := rawHTTPSession(t, do, legacyVersion)
	old := rawHTTPSession(t, do, "2025-03-26")
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"github__echo"}}`
	send := func(session, version, body string, header map[string]string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer alice-token")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(sessionIDHeader, session)
		if version != "" {
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		for k, v := range header {
			if k == "Host" {
				req.Host = v
				continue
			}
			if v == "" {
				req.Header.Del(k)
			} else {
				req.Header.Set(k, v)
			}
		}
		before := tg.fastAnswered.Load()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if tg.fastAnswered.Load() != before {
			t.Errorf("the front answered %s (version %q, headers %v) itself", body, version, header)
		}
	}
	for name, c := range map[string]struct {
		session, version, body string
		header                 map[string]string
	}{
		"no version header":                            {session, "", call, nil},
		"another version than the session's":           {session, "2025-06-18", call, nil},
		"a 2025-03-26 session":                         {old, "2025-03-26", call, nil},
		"Accept without event streams":                 {session, legacyVersion, call, map[string]string{"Accept": "application/json"}},
		"Accept without JSON":                          {session, legacyVersion, call, map[string]string{"Accept": "text/event-stream"}},
		"a Content-Type not JSON":                      {session, legacyVersion, call, map[string]string{"Content-Type": "text/plain"}},
		"no Content-Type":                              {session, legacyVersion, call, map[string]string{"Content-Type": ""}},
		"a Host the SDK refuses on a loopback address": {session, legacyVersion, call, map[string]string{"Host": "evil.example"}},
		"a Last-Event-ID":                              {session, legacyVersion, call, map[string]string{"Last-Event-ID": "x_1"}},
		"a progress token":                             {session, legacyVersion, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"github__echo","_meta":{"progressToken":1}}}`, nil},
		"a per-request protocol version":               {session, legacyVersion, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"github__echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, nil},
		"no params":                                    {session, legacyVersion, `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, nil},
		"null params":                                  {session, legacyVersion, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`, nil},
		"params not an object":                         {session, legacyVersion, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`, nil},
		"a name not a string":                          {session, legacyVersion, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`, nil},
		"no id":                                        {session, legacyVersion, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"github__echo"}}`, nil},
		"a null id":                                    {session, legacyVersion, `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"github__echo"}}`, nil},
		"another JSON-RPC version":                     {session, legacyVersion, `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"github__echo"}}`, nil},
		"another method":                               {session, legacyVersion, `{"jsonrpc":"2.0","id":1,"method":"Tools/call","params":{"name":"github__echo"}}`, nil},
		"a result too":                                 {session, legacyVersion, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"github__echo"},"result":{}}`, nil},
		"something after the message":                  {session, legacyVersion, call + `{}`, nil},
		"a batch":                                      {session, legacyVersion, `[` + call + `]`, nil},
		"arguments nested past the SDK's depth":        {session, legacyVersion, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"github__echo","arguments":{"a":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}}}`, nil},
		"an unknown session":                           {"nosuch", legacyVersion, call, nil},
	} {
		t.Run(name, func(t *testing.T) { send(c.session, c.version, c.body, c.header) })
	}
}

// sessionsOf lists the ids of principal's open sessions.
func (tg *testGateway) sessionsOf(t *testing.T, principal string) []string {
	t.Helper()
	var ids []string
	if s := tg.serverOf(principal); s != nil {
		for ss := range s.Sessions() {
			ids = append(ids, ss.ID())
		}
	}
	return ids
}

// TestHTTPFastCallCancelled: a client's notifications/cancelled reaches a
// call the front answers: the upstream sees the cancellation and the call
// is answered.
func TestHTTPFastCallCancelled(t *testing.T) {
	tg := startGateway(t, nil)
	srv := aliceFront(t, tg)
	cs := httpClient(t, srv.URL, "alice-token")
	before := tg.fastAnswered.Load()
	ctx, cancel := context.WithCancel(context.Background())
	waiting := tg.github.Waiting()
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "github__wait"})
		errc <- err
	}()
	select {
	case <-waiting:
	case <-time.After(5 * time.Second):
		t.Fatal("the wait call did not reach the upstream")
	}
	if tg.fastAnswered.Load() != before+1 {
		t.Fatal("the front is not answering the call itself")
	}
	cancel()
	if err := <-errc; err == nil {
		t.Error("a cancelled call returned no error")
	}
	// Well before the gateway's call timeout (5 s), which would end the
	// call too.
	eventually(t, 2*time.Second, "the upstream to see the cancellation", func() bool { return tg.github.Cancelled.Load() == 1 })
	eventually(t, 2*time.Second, "the call to end", func() bool {
		return tg.fast.inFlight() == 0
	})
}

// TestHTTPIdleTimeoutCountsEveryCall: a session whose client only calls
// tools, which the front answers itself, is not idle; one without a
// request for the idle timeout is closed, and not before. In a synctest
// bubble, so the timeout passes in fake time, exactly.
func TestHTTPIdleTimeoutCountsEveryCall(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tg := startGateway(t, nil)
		const idle = 400 * time.Millisecond
		_, do := memFront(t, tg, HTTPOptions{IdleTimeout: idle})
		session := rawHTTPSession(t, do, legacyVersion)
		call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"github__echo"}}`
		before := tg.fastAnswered.Load()
		const calls = 12 // three idle timeouts' worth
		for i := range calls {
			if resp, out := do(http.MethodPost, "alice-token", session, legacyVersion, call); resp.StatusCode != http.StatusOK {
				t.Fatalf("call %d, %v after the session opened, was answered %s %s", i, time.Duration(i)*idle/4, resp.Status, out)
			}
			time.Sleep(idle / 4)
		}
		if n := tg.fastAnswered.Load() - before; n != calls {
			t.Fatalf("the front answered %d of %d calls itself; want them all", n, calls)
		}
		time.Sleep(idle - idle/4 - time.Millisecond)
		synctest.Wait()
		if len(tg.sessionsOf(t, "alice")) != 1 {
			t.Fatalf("the session was closed before it was idle for %v", idle)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := len(tg.sessionsOf(t, "alice")); n != 0 {
			t.Fatalf("%d session(s) open after %v idle", n, idle)
		}
		if resp, out := do(http.MethodPost, "alice-token", session, legacyVersion, call); resp.StatusCode != http.StatusNotFound {
			t.Errorf("a call in the closed session was answered %s %s; want 404", resp.Status, out)
		}
	})
}

// A message the front reads (to answer a tools/call, or to act on a
// cancellation) is one the SDK decodes alike: the SDK's message decoder
// accepts the body as a request or notification with the same id, method
// and params; and for a tools/call, its params decoder (the same library,
// with the same options, through a Decoder) gives the same params.
func FuzzParseToolCall(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"github__echo","arguments":{"a":1}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools\/call","params":{"NAME":"a","name":"b","_meta":{"k":[1,{"v":null}]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":"\"]}"}} `,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"id":2}`,
		`{"jsonrpc":"2.0","id":-7,"method":"tools/call","params":{"name":"a","inputResponses":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":[[[[]]]]}}`,
	} {
		f.Add([]byte(s))
	}
	// At the SDK's depth limit and one past it (the message, its params
	// and the arguments are three levels).
	for _, n := range []int{sdkMaxDepth - 3, sdkMaxDepth - 2} {
		f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"a":"[{","b":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}}`))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifi\u0063ations\/cancelled","params":{"requestId":"x"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if m, ok := parseMessage(body); ok {
			msg, err := jsonrpc.DecodeMessage(body)
			if err != nil {
				t.Fatalf("read %q as a message; the SDK refuses it: %v", body, err)
			}
			if r, isReq := msg.(*jsonrpc.Request); !isReq || r.ID != m.ID || r.Method != m.Method || !bytes.Equal(r.Params, m.Params) {
				t.Fatalf("read %q as %+v; the SDK reads %+v", body, m, msg)
			}
		}
		req, params, ok := parseToolCall(body)
		if !ok {
			return
		}
		msg, err := jsonrpc.DecodeMessage(body)
		if err != nil {
			t.Fatalf("taken %q; the SDK refuses it: %v", body, err)
		}
		sdkReq, isReq := msg.(*jsonrpc.Request)
		if !isReq || sdkReq.ID != req.ID || sdkReq.Method != req.Method || !bytes.Equal(sdkReq.Params, req.Params) {
			t.Fatalf("taken %q as %+v; the SDK reads %+v", body, req, msg)
		}
		var sdkParams *mcp.CallToolParamsRaw
		dec := segjson.NewDecoder(bytes.NewReader(sdkReq.Params))
		dec.DontMatchCaseInsensitiveStructFields()
		if err := dec.Decode(&sdkParams); err != nil {
			t.Fatalf("taken %q; the SDK refuses its params: %v", body, err)
		}
		if !reflect.DeepEqual(params, sdkParams) {
			t.Fatalf("taken %q with params %+v; the SDK reads %+v", body, params, sdkParams)
		}
	})
}

// The front takes a call nested as deep as the SDK decodes, and leaves
// one level deeper to the SDK, which refuses it.
func TestParseToolCallDepth(t *testing.T) {
	body := func(n int) []byte {
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"s":"[[{","b":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}}`)
	}
	if _, _, ok := parseToolCall(body(sdkMaxDepth - 3)); !ok {
		t.Errorf("a call %d levels deep was left to the SDK", sdkMaxDepth)
	}
	if _, err := jsonrpc.DecodeMessage(body(sdkMaxDepth - 3)); err != nil {
		t.Errorf("the SDK refuses a call %d levels deep: %v", sdkMaxDepth, err)
	}
	if _, _, ok := parseToolCall(body(sdkMaxDepth - 2)); ok {
		t.Errorf("a call %d levels deep was taken", sdkMaxDepth+1)
	}
	if _, err := jsonrpc.DecodeMessage(body(sdkMaxDepth - 2)); err == nil {
		t.Errorf("the SDK takes a call %d levels deep", sdkMaxDepth+1)
	}
}

// TestHTTPDuplicateInFlightID: a call under the id of one in flight in its
// session is refused as the SDK refuses it, whichever path has the first,
// and the first call is answered. The one exception: a call the SDK takes
// under the id of one the front answers is not refused (the SDK does not
// know of the front's calls); it is answered on its own stream.
func TestHTTPDuplicateInFlightID(t *testing.T) {
	tg := startGateway(t, nil)
	srv := aliceFront(t, tg)
	do := rawHTTP(t, srv.URL)
	session := rawHTTPSession(t, do, legacyVersion)
	post := func(body string) (*http.Response, string) {
		t.Helper()
		return do(http.MethodPost, "alice-token", session, legacyVersion, body)
	}
	wait := func(id, params string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
	}
	// Each case has an id of its own: the SDK handles a notification
	// after it has answered its POST, so the last case's cancellation
	// could still be on its way.
	for _, first := range []struct{ path, params, id string }{
		{"the front", `{"name":"github__wait"}`, "9"},
		{"the SDK", withProgressToken(`{"name":"github__wait"}`), "19"},
	} {
		id := first.id
		waiting := tg.github.Waiting()
		answered := make(chan string, 1)
		go func() { _, out := post(wait(id, first.params)); answered <- out }()
		select {
		case <-waiting:
		case <-time.After(5 * time.Second):
			t.Fatalf("the call through %s did not reach the upstream", first.path)
		}
		for _, again := range []string{`{"name":"github__echo"}`, withProgressToken(`{"name":"github__echo"}`)} {
			resp, out := post(wait(id, again))
			if first.path == "the front" && again != `{"name":"github__echo"}` {
				if resp.StatusCode != http.StatusOK || !strings.Contains(out, `"id":`+id+`,"result"`) {
					t.Errorf("with id %s in flight through the front, %s was answered %s %s; want the SDK's answer", id, again, resp.Status, out)
				}
				continue
			}
			want := `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32600,"message":"duplicate in-flight request ID ` + id + `"}}`
			if resp.StatusCode != http.StatusBadRequest || out != want {
				t.Errorf("with id %s in flight through %s, %s was answered %s %s; want 400 %s", id, first.path, again, resp.Status, out, want)
			}
			for h, v := range map[string]string{"Content-Type": "application/json", "Cache-Control": "no-cache, no-transform", "Connection": "keep-alive"} {
				if resp.Header.Get(h) != v {
					t.Errorf("with id %s in flight through %s, %s was answered with %s %q; want %q as from the SDK", id, first.path, again, h, resp.Header.Get(h), v)
				}
			}
		}
		// Another id is taken.
		if resp, out := post(wait(strconv.Quote(id), `{"name":"github__echo"}`)); resp.StatusCode != http.StatusOK {
			t.Errorf("id %q was answered %s %s", id, resp.Status, out)
		}
		if resp, out := post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `}}`); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("the cancellation was answered %s %s", resp.Status, out)
		}
		select {
		case out := <-answered:
			if !strings.Contains(out, `"id":`+id+`,`) {
				t.Errorf("the first call through %s was answered %s", first.path, out)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("the first call through %s was not answered after its cancellation", first.path)
		}
		eventually(t, 2*time.Second, "no call in flight", func() bool {
			return tg.fast.inFlight() == 0
		})
	}
}

// postWith sends a POST in alice's session at legacyVersion, with header
// changed (an empty value deletes one; "Host" sets the request's host).
func postWith(t *testing.T, url, session, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	return postVia(t, http.DefaultClient, url, session, body, header)
}

// postVia is postWith through client.
func postVia(t *testing.T, client *http.Client, url, session, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer alice-token")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(sessionIDHeader, session)
	req.Header.Set("Mcp-Protocol-Version", legacyVersion)
	for k, v := range header {
		switch {
		case k == "Host":
			req.Host = v
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, strings.TrimSpace(string(b))
}

// startWait starts a call of github__wait under id in session, through the
// SDK when viaSDK, and returns once the upstream has it; the call's answer
// arrives on the channel.
func startWait(t *testing.T, tg *testGateway, url, session, id string, viaSDK bool) <-chan string {
	t.Helper()
	return startWaitVia(t, tg, http.DefaultClient, url, session, id, viaSDK)
}

// startWaitVia is startWait through client.
func startWaitVia(t *testing.T, tg *testGateway, client *http.Client, url, session, id string, viaSDK bool) <-chan string {
	t.Helper()
	params := `{"name":"github__wait"}`
	if viaSDK {
		params = withProgressToken(params)
	}
	waiting := tg.github.Waiting()
	out := make(chan string, 1)
	go func() {
		_, o := rawHTTPWith(t, client, url)(http.MethodPost, "alice-token", session, legacyVersion, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":`+params+`}`)
		out <- o
	}()
	select {
	case <-waiting:
	case <-time.After(5 * time.Second):
		t.Fatal("the wait call did not reach the upstream")
	}
	return out
}

// TestHTTPInFlightIDLeavesTheSDKsChecks: with a call of id 9 in flight, a
// request under id 9 that the SDK refuses for another reason first is
// answered as one under a free id is.
func TestHTTPInFlightIDLeavesTheSDKsChecks(t *testing.T) {
	tg := startGateway(t, nil)
	srv := aliceFront(t, tg)
	session := rawHTTPSession(t, rawHTTP(t, srv.URL), legacyVersion)
	answered := startWait(t, tg, srv.URL, session, `9`, false)
	defer func() {
		postWith(t, srv.URL, session, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`, nil)
		<-answered
	}()
	for name, c := range map[string]struct {
		body   string
		header map[string]string
	}{
		"Content-Type text/plain": {`{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"github__echo"}}`, map[string]string{"Content-Type": "text/plain"}},
		"a refused Host":          {`{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"github__echo"}}`, map[string]string{"Host": "evil.example"}},
		"no params":               {`{"jsonrpc":"2.0","id":ID,"method":"tools/call"}`, nil},
		"an unknown method":       {`{"jsonrpc":"2.0","id":ID,"method":"nosuch"}`, nil},
		"JSON-RPC 1.0":            {`{"jsonrpc":"1.0","id":ID,"method":"tools/call","params":{"name":"github__echo"}}`, nil},
	} {
		free, freeOut := postWith(t, srv.URL, session, strings.Replace(c.body, "ID", "10", 1), c.header)
		busy, busyOut := postWith(t, srv.URL, session, strings.Replace(c.body, "ID", "9", 1), c.header)
		if busy.StatusCode != free.StatusCode || strings.Replace(freeOut, "10", "9", 1) != busyOut {
			t.Errorf("%s: under a free id %s %q; under id 9, in flight, %s %q", name, free.Status, freeOut, busy.Status, busyOut)
		}
	}
}

// TestHTTPCancelsWhatTheSDKWould: a notifications/cancelled cancels a call
// the front answers only when the SDK would take the message, and then
// however its method is escaped. In a synctest bubble over in-memory
// connections: once synctest.Wait returns, every goroutine is blocked, so
// a cancellation the notification caused has reached the upstream, and
// "nothing was cancelled" is checked at that moment, not after a sleep.
func TestHTTPCancelsWhatTheSDKWould(t *testing.T) {
	for name, c := range map[string]struct {
		body   string
		header map[string]string
		cancel bool
	}{
		"JSON-RPC 1.0":      {`{"jsonrpc":"1.0","method":"notifications/cancelled","params":{"requestId":9}}`, nil, false},
		"with an id":        {`{"jsonrpc":"2.0","id":77,"method":"notifications/cancelled","params":{"requestId":9}}`, nil, false},
		"a refused Host":    {`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`, map[string]string{"Host": "evil.example"}, false},
		"Content-Type text": {`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`, map[string]string{"Content-Type": "text/plain"}, false},
		"another id":        {`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"9"}}`, nil, false},
		"as sent":           {`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`, nil, true},
		"an escaped method": {`{"jsonrpc":"2.0","method":"notifications\/cancelled","params":{"requestId":9}}`, nil, true},
		"a \\u escape":      {`{"jsonrpc":"2.0","method":"notifi\u0063ations/cancelled","params":{"requestId":9}}`, nil, true},
		"with a reason":     {`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9,"reason":"x"}}`, nil, true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				tg := startGateway(t, nil)
				client, do := memFront(t, tg, HTTPOptions{})
				session := rawHTTPSession(t, do, legacyVersion)
				answered := startWaitVia(t, tg, client, memURL, session, `9`, false)
				resp, out := postVia(t, client, memURL, session, c.body, c.header)
				synctest.Wait()
				if got := tg.github.Cancelled.Load(); got != map[bool]int64{false: 0, true: 1}[c.cancel] {
					t.Errorf("answered %s %q, and the upstream saw %d cancellations; want %v", resp.Status, out, got, c.cancel)
				}
				if !c.cancel {
					// End it, so that the test need not wait for the call timeout.
					postVia(t, client, memURL, session, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`, nil)
				}
				<-answered
			})
		})
	}
}

// TestHTTPDeleteWaitsForTheSessionsCalls: a DELETE is answered once the
// session's calls are, through either path, and while it waits no new
// call of the session is taken: it is answered 404, as once the session is
// closed. The client may still cancel its call.
func TestHTTPDeleteWaitsForTheSessionsCalls(t *testing.T) {
	paths(t, testDeleteWaits)
}

func testDeleteWaits(t *testing.T, viaSDK bool) {
	tg := startGateway(t, nil)
	srv := aliceFront(t, tg)
	do := rawHTTP(t, srv.URL)
	session := rawHTTPSession(t, do, legacyVersion)
	answered := startWait(t, tg, srv.URL, session, `1`, viaSDK)
	deleted := make(chan *http.Response, 1)
	go func() {
		resp, _ := do(http.MethodDelete, "alice-token", session, legacyVersion, "")
		deleted <- resp
	}()
	eventually(t, 2*time.Second, "the session to be closing", func() bool {
		tg.fast.mu.Lock()
		defer tg.fast.mu.Unlock()
		sc := tg.fast.sessions[session]
		return sc != nil && sc.closing
	})
	select {
	case resp := <-deleted:
		t.Fatalf("the DELETE was answered %s with a call in flight", resp.Status)
	case <-time.After(200 * time.Millisecond):
	}
	logged := len(tg.log.all())
	before := tg.fastAnswered.Load()
	resp, out := postWith(t, srv.URL, session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"github__echo"}}`, nil)
	if resp.StatusCode != http.StatusNotFound || tg.fastAnswered.Load() != before || len(tg.log.all()) != logged {
		t.Errorf("a call in the closing session was answered %s %q (decisions logged: %d)", resp.Status, out, len(tg.log.all())-logged)
	}
	// The client may still cancel the call it made.
	postWith(t, srv.URL, session, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, nil)
	select {
	case resp := <-deleted:
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("the DELETE was answered %s", resp.Status)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the DELETE was not answered after the call ended")
	}
	if out := <-answered; !strings.Contains(out, `"id":1,`) {
		t.Errorf("the call was answered %q", out)
	}
	eventually(t, time.Second, "the session's calls to be forgotten", func() bool { return tg.fast.inFlight() == 0 && len(tg.fast.sessions) == 0 })
}

// TestHTTPRefusedPostsDoNotKeepSessionsOpen: a POST the SDK refuses before
// it reads it (415 for a Content-Type) does not count against a session's
// idle time, as in the SDK. In a synctest bubble, over fake time.
func TestHTTPRefusedPostsDoNotKeepSessionsOpen(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tg := startGateway(t, nil)
		const idle = 400 * time.Millisecond
		client, do := memFront(t, tg, HTTPOptions{IdleTimeout: idle})
		session := rawHTTPSession(t, do, legacyVersion)
		for range 16 { // four idle timeouts' worth
			if resp, out := postVia(t, client, memURL, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Content-Type": "text/plain"}); resp.StatusCode != http.StatusUnsupportedMediaType && resp.StatusCode != http.StatusNotFound {
				t.Fatalf("answered %s %s", resp.Status, out)
			}
			time.Sleep(idle / 4)
		}
		synctest.Wait()
		if n := len(tg.sessionsOf(t, "alice")); n != 0 {
			t.Errorf("after %v of POSTs the SDK refuses, %d session(s) open; want it closed after %v idle", 4*idle, n, idle)
		}
	})
}

// TestHTTPIdleClockCountsAnUpload: a POST counts against its session's
// idle time from when it arrives, as in the SDK, not once its body is
// read: a call whose body takes longer to arrive than the idle time left
// is answered. In a synctest bubble, over fake time.
func TestHTTPIdleClockCountsAnUpload(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tg := startGateway(t, nil)
		const idle = 500 * time.Millisecond
		client, do := memFront(t, tg, HTTPOptions{IdleTimeout: idle})
		session := rawHTTPSession(t, do, legacyVersion)
		time.Sleep(idle / 2)
		pr, pw := io.Pipe()
		go func() {
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"github__echo"}}`
			for i, part := range []string{body[:10], body[10:40], body[40:]} {
				if i > 0 {
					time.Sleep(idle)
				}
				pw.Write([]byte(part))
			}
			pw.Close()
		}()
		req, _ := http.NewRequest(http.MethodPost, memURL, pr)
		req.Header.Set("Authorization", "Bearer alice-token")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(sessionIDHeader, session)
		req.Header.Set("Mcp-Protocol-Version", legacyVersion)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "github echo {}") {
			t.Errorf("a call whose body took %v to arrive was answered %s %s", 2*idle, resp.Status, b)
		}
	})
}

// TestFastCallsOfAClosedSession: a call that reaches the registry after
// its session was closed (it raced the DELETE) is left to the SDK, which
// answers 404, and leaves no entry behind; so does a call handed to the
// SDK.
func TestFastCallsOfAClosedSession(t *testing.T) {
	tg := startGateway(t, nil)
	srv := aliceFront(t, tg)
	do := rawHTTP(t, srv.URL)
	session := rawHTTPSession(t, do, legacyVersion)
	if resp, out := do(http.MethodDelete, "alice-token", session, legacyVersion, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %s %s", resp.Status, out)
	}
	if _, outcome := tg.fast.takeFast(tg.serverOf("alice"), session, "alice", "1", func() {}); outcome != declined {
		t.Errorf("a call of the closed session was taken (outcome %d)", outcome)
	}
	tg.fast.takeSDK(tg.serverOf("alice"), session, "alice", "2")()
	tg.fast.mu.Lock()
	defer tg.fast.mu.Unlock()
	if n := len(tg.fast.sessions); n != 0 {
		t.Errorf("%d sessions have entries after the only one was closed", n)
	}
}

// TestHTTPFrontChurn: calls on both paths, cancellations, DELETEs and idle
// closes at once, many sessions over (run it with the race detector);
// afterwards every session is closed and the front keeps no entry for any.
// It runs in a synctest bubble over in-memory connections, so the idle
// clock follows fake time: a session is closed for idleness only while
// every goroutine waits, never because the machine was slow.
func TestHTTPFrontChurn(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tg := startGateway(t, nil)
		const idle = 80 * time.Millisecond
		_, do := memFront(t, tg, HTTPOptions{IdleTimeout: idle})
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := range 15 {
					// An idle close may come between the handshake's two
					// messages; the calls below then meet a closed session.
					session, _ := tryHTTPSession(do, legacyVersion)
					if session == "" {
						t.Errorf("worker %d could not open session %d", w, i)
						return
					}
					var calls sync.WaitGroup
					for c := range 4 {
						calls.Go(func() {
							params := `{"name":"github__echo"}`
							if c%2 == 1 {
								params = withProgressToken(params)
							}
							do(http.MethodPost, "alice-token", session, legacyVersion, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, c%3, params))
							do(http.MethodPost, "alice-token", session, legacyVersion, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, c%3))
						})
					}
					switch (w + i) % 3 {
					case 0:
						do(http.MethodDelete, "alice-token", session, legacyVersion, "")
					case 1:
						time.Sleep(time.Duration(10*(w+i)%120) * time.Millisecond)
					}
					calls.Wait()
				}
			})
		}
		wg.Wait()
		// Every session left open is idle now; past the timeout, all are
		// closed and forgotten once the closes have run.
		time.Sleep(2 * idle)
		synctest.Wait()
		if n := len(tg.sessionsOf(t, "alice")); n != 0 {
			t.Errorf("%d sessions open after the idle timeout", n)
		}
		tg.fast.mu.Lock()
		defer tg.fast.mu.Unlock()
		if n := len(tg.fast.sessions); n != 0 {
			t.Errorf("the front keeps entries for %d sessions after all were closed", n)
		}
	})
}
