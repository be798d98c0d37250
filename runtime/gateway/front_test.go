package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/internal/httpheader"
)

func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func httpClient(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-client", Version: "1"}, nil).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: legacyVersion})
	if err != nil {
		t.Fatalf("connect with token %q: %v", token, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestHTTPFront(t *testing.T) {
	tg := startGateway(t, nil)
	h, err := tg.HTTPHandler(HTTPOptions{Tokens: map[string]string{
		tokenHash("alice-token"):  "alice",
		tokenHash("alice-laptop"): "alice",
		tokenHash("bob-token"):    "bob",
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close) // after the clients' cleanups, which end their streams

	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	post := func(token, session, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, token := range []string{"", "wrong-token", tokenHash("alice-token")} {
		if resp := post(token, "", initialize); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %q: status %d, want 401", token, resp.StatusCode)
		}
	}
	// MCP is served at HTTPPath, and nowhere else, with a token or without.
	for _, path := range []string{"/mcp", "/mcp/", "/sse", "//", "/favicon.ico"} {
		for _, token := range []string{"", "alice-token"} {
			for _, method := range []string{"POST", "GET", "DELETE"} {
				req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(initialize))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "the gateway serves MCP at /, not "+path) {
					t.Errorf("%s %s (token %q): %d %q; want 404 naming the MCP path", method, path, token, resp.StatusCode, body)
				}
			}
		}
	}

	alice := httpClient(t, srv.URL, "alice-token")
	if names := toolNames(t, alice); !slices.Contains(names, "github__create_issue") {
		t.Errorf("alice over HTTP: %v", names)
	}
	laptop := httpClient(t, srv.URL, "alice-laptop")
	if names := toolNames(t, laptop); !slices.Contains(names, "github__create_issue") {
		t.Errorf("alice's second token over HTTP: %v", names)
	}
	bob := httpClient(t, srv.URL, "bob-token")
	if names := toolNames(t, bob); slices.Contains(names, "github__create_issue") || !slices.Contains(names, "github__echo") {
		t.Errorf("bob over HTTP: %v", names)
	}
	res, err := bob.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__create_issue"})
	if err == nil {
		t.Errorf("bob called create_issue over HTTP: %v", text(res))
	}

	// A session opened with alice's token cannot be used with bob's.
	resp := post("alice-token", "", initialize)
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("no session id (status %d)", resp.StatusCode)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if resp := post("bob-token", sid, list); resp.StatusCode != http.StatusForbidden {
		t.Errorf("bob's token on alice's session: status %d, want 403", resp.StatusCode)
	}
	if resp := post("", sid, list); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token on alice's session: status %d, want 401", resp.StatusCode)
	}
	if resp := post("alice-token", sid, `{"jsonrpc":"2.0","id":3,`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a malformed body: status %d, want 400", resp.StatusCode)
	}
}

func TestHTTPFrontConfig(t *testing.T) {
	tg := startGateway(t, nil)
	for _, tc := range []struct {
		tokens map[string]string
		want   string
	}{
		{nil, "no bearer tokens"},
		{map[string]string{"abc": "alice"}, "not a hex SHA-256"},
		{map[string]string{tokenHash("x"): "not a name"}, "not a valid principal name"},
	} {
		if _, err := tg.HTTPHandler(HTTPOptions{Tokens: tc.tokens}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.tokens, err, tc.want)
		}
	}
}

// An upstream reached over streamable HTTP, with the configured header.
func TestHTTPUpstream(t *testing.T) {
	up := newMemUpstream("github")
	var sawAuth atomic.Value
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		sawAuth.Store(r.Header.Get("Authorization"))
		return up.Server
	}, nil)
	srv := httptest.NewServer(h)
	tg := startGateway(t, func(c *Config) {
		c.Upstreams[0] = Upstream{Name: "github", URL: srv.URL, Header: http.Header{"Authorization": {"Bearer upstream-secret"}}}
	})
	eventually(t, 10*time.Second, "github over HTTP to connect", func() bool { ok, _ := tg.Upstream("github"); return ok })
	cs := tg.client(t, "alice", legacyVersion, nil)
	if names := toolNames(t, cs); !slices.Contains(names, "github__echo") || slices.Contains(names, "github__delete_repo") {
		t.Errorf("tools over an HTTP upstream: %v", names)
	}
	if msg, isErr := callText(t, cs, "github__echo"); isErr || !strings.HasPrefix(msg, "github echo") {
		t.Errorf("github__echo over HTTP: %q", msg)
	}
	if got, _ := sawAuth.Load().(string); got != "Bearer upstream-secret" {
		t.Errorf("the upstream saw Authorization %q", got)
	}
	// The upstream goes away: its calls fail clearly, the other upstream
	// keeps serving.
	srv.CloseClientConnections()
	srv.Close()
	msg, isErr := callText(t, cs, "github__echo")
	if !isErr || !strings.Contains(msg, `upstream "github"`) {
		t.Errorf("github__echo with the upstream gone: %q (isError %v)", msg, isErr)
	}
	if msg, isErr := callText(t, cs, "linear__echo"); isErr {
		t.Errorf("linear__echo: %q", msg)
	}
}

// An HTTP upstream that answers with a JSON body over httpheader.MaxBody
// is cut off there instead of read whole: the call fails, and the
// upstream is connected again and serves the next call.
func TestHTTPUpstreamBodyLimit(t *testing.T) {
	up := newMemUpstream("github")
	mcp.AddTool(up.Server, &mcp.Tool{Name: "list_everything"}, func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", httpheader.MaxBody)}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.Server }, &mcp.StreamableHTTPOptions{JSONResponse: true}))
	t.Cleanup(srv.Close) // after the gateway's, which ends its stream
	tg := startGateway(t, func(c *Config) { c.Upstreams[0] = Upstream{Name: "github", URL: srv.URL} })
	cs := tg.client(t, "alice", legacyVersion, nil)
	msg, isErr := callText(t, cs, "github__list_everything")
	if !isErr || !strings.Contains(msg, `upstream "github"`) {
		t.Errorf("a 16 MiB answer was passed on, or failed unclearly: isError %v, %.300q", isErr, msg)
	}
	t.Logf("the call was answered %.300q", msg)
	eventually(t, 30*time.Second, "github__echo to work again", func() bool {
		msg, isErr := callText(t, cs, "github__echo")
		return !isErr && strings.HasPrefix(msg, "github echo")
	})
}

// heldCallSession starts a gateway whose gate holds every call until
// release is closed (and then times it out), opens a stdio session for
// alice, and returns it once its call id 7 is held.
func heldCallSession(t *testing.T, release <-chan struct{}) *rawClient {
	t.Helper()
	held := make(chan struct{})
	tg := startGateway(t, func(c *Config) {
		c.Tables = fixed(loadTable(t, approvalPolicy, 1))
		c.Approvals = gateFunc(func(ctx context.Context, req *HoldRequest) (Verdict, error) {
			close(held)
			<-release
			return Verdict{Outcome: OutcomeTimedOut}, nil
		})
	})
	c := rawSession(t, tg.Gateway, "alice", legacyVersion)
	c.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"github__merge_pull_request","arguments":{"n":1}}}`)
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the call was not held")
	}
	return c
}

// TestServeIOStopAnswersCallsRead: when the stdio front is told to stop,
// a call it has read and not yet answered still gets its answer before the
// session ends. Here the call is held for approval, and the gate answers it
// when it is closed, as the command closes it on SIGINT or SIGTERM. In a
// synctest bubble (the front runs over pipes), so "within StopTimeout" is
// measured in fake time.
func TestServeIOStopAnswersCallsRead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		closed := make(chan struct{})
		c := heldCallSession(t, closed)
		stopped := time.Now()
		c.stop()
		close(closed)
		answer := c.next()
		var resp struct {
			ID     int `json:"id"`
			Result *struct {
				IsError bool `json:"isError"`
			} `json:"result"`
		}
		if err := json.Unmarshal(answer, &resp); err != nil || resp.ID != 7 || resp.Result == nil || !resp.Result.IsError {
			t.Fatalf("after the stop, got %s; want the held call 7 answered as not run", answer)
		}
		if err := <-c.served; !errors.Is(err, context.Canceled) {
			t.Errorf("ServeIO returned %v; want context.Canceled", err)
		}
		if d := time.Since(stopped); d > StopTimeout {
			t.Errorf("stopping took %s", d)
		}
	})
}

// TestLineConnStopTakesNoNewMessage: once told to stop, the stdio front
// reads no new message, even one already waiting to be handed over (in a
// synctest bubble, synctest.Wait is the moment it waits).
func TestLineConnStopTakesNoNewMessage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const line = `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"
		c := newLineConn(strings.NewReader(line+line), io.Discard)
		defer c.Close()
		if _, err := c.Read(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the second line waits to be handed over
		c.stop()
		if m, err := c.Read(context.Background()); err != io.EOF {
			t.Fatalf("Read after stop = %v, %v; want io.EOF", m, err)
		}
	})
}

// TestPrincipalNamesAsInThePolicy: a principal the policy can name (an
// e-mail address, say) can connect, over HTTP and in process, and its own
// scope decides for it.
func TestPrincipalNamesAsInThePolicy(t *testing.T) {
	tg := startGateway(t, func(c *Config) {
		c.Tables = fixed(loadTable(t, testPolicy+`
principals: "carol@example.com": mcp_servers: github: access: tool: deny_list: ["echo"]
`, 1))
	})
	if _, err := tg.HTTPHandler(HTTPOptions{Tokens: map[string]string{tokenHash("t"): "carol@example.com"}}); err != nil {
		t.Fatalf("HTTP front with an e-mail principal: %v", err)
	}
	carol := tg.client(t, "carol@example.com", legacyVersion, nil)
	// Denied answers as absent.
	if _, err := carol.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__echo"}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("carol's own deny_list did not apply: %v", err)
	}
	alice := tg.client(t, "alice", legacyVersion, nil)
	if msg, isErr := callText(t, alice, "github__echo"); isErr {
		t.Errorf("alice: %q", msg)
	}
	if _, err := tg.Connect(context.Background(), "carol example", nil); err == nil {
		t.Error("a principal name with a space was accepted")
	}
}

// holdingGateway serves approvalPolicy, with holds of up to 120 s, and a
// gate that holds every call until its context ends: held receives when a
// call is held, ended the context's error when the hold ends. configure
// changes the configuration further.
func holdingGateway(t *testing.T, configure ...func(*Config)) (tg *testGateway, held chan struct{}, ended chan error) {
	held, ended = make(chan struct{}, 1), make(chan error, 1)
	tg = startGateway(t, func(c *Config) {
		c.Tables = fixed(loadTable(t, strings.Replace(approvalPolicy, "approval_timeout_seconds: 1", "approval_timeout_seconds: 120", 1), 1))
		c.Approvals = gateFunc(func(ctx context.Context, req *HoldRequest) (Verdict, error) {
			held <- struct{}{}
			<-ctx.Done()
			ended <- ctx.Err()
			return Verdict{}, ctx.Err()
		})
		for _, f := range configure {
			f(c)
		}
	})
	return tg, held, ended
}

// An HTTP client that deletes its session while a call is held ends the
// hold: the DELETE is answered at once, not when the hold times out. A
// DELETE of that session by another principal ends nothing.
func TestHTTPDeleteEndsHolds(t *testing.T) {
	tg, held, ended := holdingGateway(t)
	h, err := tg.HTTPHandler(HTTPOptions{Tokens: map[string]string{tokenHash("alice-token"): "alice", tokenHash("bob-token"): "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{"alice-token", http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-client", Version: "1"}, nil).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: legacyVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close() // before srv.Close, which waits for the session's stream
	go cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: map[string]any{"n": 1}})
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the call was not held")
	}
	del := func(token string, change ...func(*http.Request)) *http.Response {
		req, _ := http.NewRequest(http.MethodDelete, srv.URL, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set(sessionIDHeader, cs.ID())
		req.Header.Set("Mcp-Protocol-Version", legacyVersion)
		for _, f := range change {
			f(req)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	// Bob's DELETE of alice's session is refused, and her call stays held;
	// so do her own DELETEs that the SDK refuses before it closes the
	// session: with a protocol version it does not support, or a Host
	// that is not a loopback one sent to a loopback address.
	refused := []struct {
		what, token string
		change      func(*http.Request)
	}{
		{"bob's DELETE", "bob-token", func(*http.Request) {}},
		{"a DELETE with an unsupported protocol version", "alice-token", func(r *http.Request) { r.Header.Set("Mcp-Protocol-Version", "1999-01-01") }},
		{"a DELETE with a foreign Host", "alice-token", func(r *http.Request) { r.Host = "rebound.example" }},
	}
	for _, rc := range refused {
		if resp := del(rc.token, rc.change); resp.StatusCode < 400 {
			t.Errorf("%s deleted alice's session: %s", rc.what, resp.Status)
		}
		select {
		case err := <-ended:
			t.Fatalf("%s ended alice's hold (%v)", rc.what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	start := time.Now()
	if resp := del("alice-token"); resp.StatusCode >= 400 {
		t.Errorf("DELETE of her own session: %s", resp.Status)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the DELETE waited %s", d)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the hold ended with %v, want cancelled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the DELETE did not end the hold")
	}
}

// A client over HTTP that keeps no standalone stream open is not told of
// listing changes (it chose not to be), and the gateway does not log a
// warning for each such session and change; other SDK warnings still
// reach the log.
func TestHTTPNoStreamNoNotificationWarning(t *testing.T) {
	oplog := &syncBuffer{}
	tg := startGateway(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(oplog, nil)) })
	srv := aliceFront(t, tg)
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true, HTTPClient: &http.Client{Transport: bearer{"alice-token", http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "no-stream", Version: "1"}, nil).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: legacyVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	toolNames(t, cs)
	tg.github.AddTool("list_more") // alice may see it: her listing changes
	eventually(t, 5*time.Second, "alice's listing to show list_more", func() bool {
		return slices.Contains(toolNames(t, cs), "github__list_more")
	})
	// The notification is sent after the listing changes; the SDK warns
	// that no stream carries it, and the gateway leaves the warning out.
	eventually(t, 5*time.Second, "the undeliverable notification's warning", func() bool {
		return tg.undeliverable.Load() > 0
	})
	if log := oplog.String(); strings.Contains(log, "rejected by transport") {
		t.Errorf("the gateway logged an undeliverable notification:\n%s", log)
	}
	tg.sdkLogger.Warn("another SDK warning")
	if log := oplog.String(); !strings.Contains(log, "another SDK warning") {
		t.Errorf("other SDK warnings are dropped too:\n%s", log)
	}
}

// A principal may have at most MaxSessions sessions open over HTTP: one
// more is refused with 429, however many are opened at once; other
// principals are not counted against it, and a closed session frees its
// place.
func TestHTTPMaxSessions(t *testing.T) {
	tg := startGateway(t, nil)
	h, err := tg.HTTPHandler(HTTPOptions{Tokens: map[string]string{tokenHash("alice-token"): "alice", tokenHash("bob-token"): "bob"}, MaxSessions: 3})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	connect := func(token string) (*mcp.ClientSession, error) {
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
		return mcp.NewClient(&mcp.Implementation{Name: "many", Version: "1"}, nil).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: legacyVersion})
	}
	var mu sync.Mutex
	var opened []*mcp.ClientSession
	var refused []error
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			cs, err := connect("alice-token")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused = append(refused, err)
			} else {
				opened = append(opened, cs)
			}
		})
	}
	wg.Wait()
	defer func() {
		for _, cs := range opened {
			cs.Close()
		}
	}()
	if len(opened) != 3 || len(refused) != 7 {
		t.Fatalf("10 sessions opened at once under a cap of 3: %d opened, %d refused (%v)", len(opened), len(refused), refused)
	}
	for _, err := range refused {
		if !strings.Contains(err.Error(), "Too Many Requests") {
			t.Errorf("refused with %v, want 429 Too Many Requests", err)
		}
	}
	bob, err := connect("bob-token")
	if err != nil {
		t.Fatalf("bob could not open a session while alice has her most: %v", err)
	}
	defer bob.Close()
	opened[0].Close()
	opened = opened[1:]
	eventually(t, 5*time.Second, "alice's closed session to free its place", func() bool { return tg.sessionCount("alice") == 2 })
	cs, err := connect("alice-token")
	if err != nil {
		t.Fatalf("a session after one of alice's closed: %v", err)
	}
	opened = append(opened, cs)
	if msg, isErr := callText(t, cs, "github__echo"); isErr {
		t.Errorf("a call on the new session: %q", msg)
	}
}

// The session cap's lock is held only while a session is opened: a POST
// that opens a session and then holds a call (a batch of initialize and a
// tools/call, as 2025-03-26 allows), or one whose body is still arriving,
// does not keep the principal's other clients from opening sessions.
func TestHTTPOpeningDoesNotWaitForOthers(t *testing.T) {
	held := make(chan struct{}, 1)
	tg := startGateway(t, func(c *Config) {
		c.Tables = fixed(loadTable(t, strings.Replace(approvalPolicy, "approval_timeout_seconds: 1", "approval_timeout_seconds: 120", 1), 1))
		c.Approvals = gateFunc(func(ctx context.Context, req *HoldRequest) (Verdict, error) {
			held <- struct{}{}
			<-ctx.Done()
			return Verdict{}, ctx.Err()
		})
	})
	h, err := tg.HTTPHandler(HTTPOptions{Tokens: map[string]string{tokenHash("alice-token"): "alice"}, MaxSessions: 5})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	post := func(body io.Reader) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, body)
		req.Header.Set("Authorization", "Bearer alice-token")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	go post(strings.NewReader(`[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"batch","version":"1"}}},` +
		`{"jsonrpc":"2.0","method":"notifications/initialized"},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"github__merge_pull_request","arguments":{}}}]`))
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the batched call was not held")
	}
	slow, slowW := io.Pipe()
	defer slowW.Close()
	go post(slow)
	if _, err := slowW.Write([]byte(`{"jsonrpc":"2.0","id":1,`)); err != nil {
		t.Fatal(err)
	}
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer{"alice-token", http.DefaultTransport}}}
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "second", Version: "1"}, nil).Connect(cctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: legacyVersion})
	if err != nil {
		t.Fatalf("alice's second client could not open a session while her first holds a call and a third is still sending: %v", err)
	}
	cs.Close()
}

// A session whose client asked at initialize for a protocol version the
// SDK does not support (it was answered with one it does) keeps its held
// calls when a DELETE names that version: the SDK refuses the DELETE, and
// the session stays open. A DELETE naming any version the SDK supports
// ends them.
func TestHTTPRefusedDeleteKeepsHolds(t *testing.T) {
	tg, held, ended := holdingGateway(t)
	srv := aliceFront(t, tg)
	raw := rawHTTP(t, srv.URL)
	do := func(method, sid, version, body string) *http.Response {
		resp, _ := raw(method, "alice-token", sid, version, body)
		return resp
	}
	sid := do(http.MethodPost, "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}`).Header.Get(sessionIDHeader)
	if sid == "" {
		t.Fatal("no session")
	}
	do(http.MethodPost, sid, "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	go do(http.MethodPost, sid, "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"github__merge_pull_request","arguments":{}}}`)
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the call was not held")
	}
	if resp := do(http.MethodDelete, sid, "1999-01-01", ""); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a DELETE with an unsupported version: %s, want 400", resp.Status)
	}
	select {
	case err := <-ended:
		t.Errorf("a DELETE the SDK refused ended the held call (%v); the session is still open", err)
	case <-time.After(200 * time.Millisecond):
	}
	if n := tg.sessionCount("alice"); n != 1 {
		t.Errorf("%d sessions, want the one still open", n)
	}
	// A DELETE naming a version the SDK supports, though not the
	// session's, is carried out: it ends the held call at once.
	start := time.Now()
	if resp := do(http.MethodDelete, sid, "2025-06-18", ""); resp.StatusCode != http.StatusNoContent {
		t.Errorf("a DELETE with another supported version: %s, want 204", resp.Status)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("a DELETE the SDK carried out did not end the held call")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the DELETE waited %s for the held call", d)
	}
}

// TestServeIOIDs: a numeric id is answered as written, or refused when
// the answer could not carry it (a fraction, an exponent, an integer
// beyond 2^53), without an id that is not the client's; a call that
// reuses the id of a call not yet answered is refused, and the first
// call is still answered under its id.
func TestServeIOIDs(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{`1.5`, `null`}, {`1e30`, `null`}, {`1E2`, `null`}, {`1e400`, `null`}, {`-1e400`, `null`}, {`9007199254740993`, `null`}, {`-9007199254740992`, `null`},
	} {
		_, _, reply := parseLine([]byte(`{"jsonrpc":"2.0","id":`+tc.id+`,"method":"tools/list"}`), false)
		var resp struct {
			ID    json.RawMessage           `json:"id"`
			Error *struct{ Message string } `json:"error"`
		}
		if err := json.Unmarshal(reply, &resp); err != nil || resp.Error == nil || string(resp.ID) != tc.want ||
			!strings.Contains(resp.Error.Message, "the id "+tc.id+" is not an integer from -9007199254740991 to 9007199254740991; give a string id") {
			t.Errorf("id %s: answered %s; want a refusal with id %s", tc.id, reply, tc.want)
		}
	}
	for _, id := range []string{`9007199254740991`, `-9007199254740991`, `0`, `"1.5"`} {
		if msgs, _, reply := parseLine([]byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/list"}`), false); len(msgs) != 1 || reply != nil {
			t.Errorf("id %s refused: %s", id, reply)
		}
	}

	release := make(chan struct{})
	c := heldCallSession(t, release)
	c.send(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	if answer := string(c.next()); answer != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: id 7 is the id of a call not yet answered; give each call an id of its own"}}` {
		t.Fatalf("the repeated id was answered %s", answer)
	}
	close(release)
	var resp struct {
		ID     int             `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if answer := c.next(); json.Unmarshal(answer, &resp) != nil || resp.ID != 7 || resp.Result == nil {
		t.Fatalf("the held call was answered %s", answer)
	}
	// Answered, its id is free again.
	c.send(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	if answer := c.next(); json.Unmarshal(answer, &resp) != nil || resp.ID != 7 || resp.Result == nil {
		t.Fatalf("id 7 reused after its answer was answered %s", answer)
	}
}

// rawID reads the top-level "id" as the SDK does: the exact name, the last
// of repeated members, nothing nested.
func TestRawID(t *testing.T) {
	for in, want := range map[string]string{
		`{"id":1,"id":"x"}`:     `"x"`,
		`{"Id":1}`:              ``,
		`{"a":{"id":3},"id":7}`: `7`,
		`{"id":1.5e3}`:          `1.5e3`,
		`[1]`:                   ``,
		`{"id":`:                ``,
	} {
		if got := string(rawID([]byte(in))); got != want {
			t.Errorf("rawID(%s) = %q, want %q", in, got, want)
		}
	}
}

// The HTTP front refuses the numeric ids the stdio front refuses, in a
// message or in a batch, with a JSON-RPC error in a 400 answer; the SDK
// would answer 1.5 as 1 and 2^53+1 as 2^53.
func TestHTTPFrontIDs(t *testing.T) {
	tg := startGateway(t, nil)
	srv := aliceFront(t, tg)
	do := rawHTTP(t, srv.URL)
	session := rawHTTPSession(t, do, legacyVersion)
	post := func(session, body string) (*http.Response, string) {
		t.Helper()
		return do(http.MethodPost, "alice-token", session, legacyVersion, body)
	}
	for _, id := range []string{`1.5`, `1e30`, `1E2`, `2.0`, `1e400`, `-1e400`, `9007199254740993`, `-9007199254740992`} {
		for body, in := range map[string]string{
			`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}`: "",
			// A batch is answered as the stdio front answers its line.
			` [{"jsonrpc":"2.0","id":"a","method":"tools/list"},{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}]`: " in batch",
		} {
			resp, out := post(session, body)
			want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request` + in + `: the id ` + id + ` is not an integer from -9007199254740991 to 9007199254740991; give a string id, or an integer in that range"}}`
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" || out != want {
				t.Errorf("%s was answered %s (%s) %s; want 400 with %s", body, resp.Status, resp.Header.Get("Content-Type"), out, want)
			}
		}
	}
	for _, id := range []string{`9007199254740991`, `-9007199254740991`, `0`, `"1.5"`} {
		resp, out := post(session, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/list"}`)
		if resp.StatusCode != http.StatusOK || !strings.Contains(out, `"id":`+id+`,"result"`) {
			t.Errorf("id %s was answered %s %.200s; want its listing under that id", id, resp.Status, out)
		}
	}
	// What is not JSON is a parse error, whatever its id would have been.
	if resp, out := post(session, `{"jsonrpc":"2.0","id":1.5,`); resp.StatusCode != http.StatusBadRequest || !strings.Contains(out, `"code":-32700`) {
		t.Errorf("a truncated body was answered %s %s", resp.Status, out)
	}
}

// rawHTTP sends one request to an HTTP front as a client would, with
// token (and, when set, a session id and an MCP-Protocol-Version), and
// returns the answer with its body read.
func rawHTTP(t *testing.T, url string) func(method, token, session, version, body string) (*http.Response, string) {
	return rawHTTPWith(t, http.DefaultClient, url)
}

// aliceFront serves tg's HTTP front, with one token for alice, until the
// test ends.
func aliceFront(t *testing.T, tg *testGateway) *httptest.Server {
	t.Helper()
	return aliceFrontWith(t, tg, HTTPOptions{})
}

// aliceFrontWith is aliceFront with opts, its tokens set to alice's.
func aliceFrontWith(t *testing.T, tg *testGateway, opts HTTPOptions) *httptest.Server {
	t.Helper()
	opts.Tokens = map[string]string{tokenHash("alice-token"): "alice"}
	h, err := tg.HTTPHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// rawHTTPSession opens a session of alice's at protocol version and
// returns its id.
func rawHTTPSession(t *testing.T, do func(method, token, session, version, body string) (*http.Response, string), version string) string {
	t.Helper()
	sid, err := tryHTTPSession(do, version)
	if err != nil {
		t.Fatal(err)
	}
	return sid
}

// tryHTTPSession is rawHTTPSession for a goroutine other than the test's,
// or a session that may be closed as soon as it is opened: it returns what
// went wrong instead of failing the test.
func tryHTTPSession(do func(method, token, session, version, body string) (*http.Response, string), version string) (string, error) {
	resp, out := do(http.MethodPost, "alice-token", "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := resp.Header.Get(sessionIDHeader)
	if resp.StatusCode != http.StatusOK || sid == "" {
		return "", fmt.Errorf("initialize %s: %s %s", version, resp.Status, out)
	}
	if resp, out := do(http.MethodPost, "alice-token", sid, version, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		return sid, fmt.Errorf("initialized: %s %s", resp.Status, out)
	}
	return sid, nil
}

// TestHTTPFrontBadInput: what the stdio front refuses the HTTP front
// refuses too, with a JSON-RPC error in a 400 answer, where the SDK's
// transport would take it: a response with both or neither of result and
// error, a batch that is empty, malformed or repeats a call's id, and a
// batch in a session that negotiated 2025-06-18 or later whatever the
// request's MCP-Protocol-Version says.
func TestHTTPFrontBadInput(t *testing.T) {
	tg := startGateway(t, nil)
	srv := aliceFront(t, tg)
	do := rawHTTP(t, srv.URL)
	current, old := rawHTTPSession(t, do, legacyVersion), rawHTTPSession(t, do, oldVersion)
	refused := func(what string, resp *http.Response, out, want string) {
		t.Helper()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" || out != want {
			t.Errorf("%s was answered %s (%s) %.300s; want 400 with %s", what, resp.Status, resp.Header.Get("Content-Type"), out, want)
		}
	}
	invalid := func(id, message string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32600,"message":"invalid request` + message + `"}}`
	}

	// Responses that answer nothing: a well-formed one is taken (202) and
	// dropped, as over stdio; a malformed one is refused, as over stdio.
	for _, sid := range []string{current, ""} {
		if resp, out := do(http.MethodPost, "alice-token", sid, "", `{"jsonrpc":"2.0","id":5,"result":{}}`); resp.StatusCode != http.StatusAccepted || out != "" {
			t.Errorf("a response that answers nothing (session %q): %s %s, want 202", sid, resp.Status, out)
		}
		for _, body := range []string{`{"jsonrpc":"2.0","id":5,"result":{},"error":{"code":1,"message":"x"}}`, `{"jsonrpc":"2.0","id":5}`} {
			resp, out := do(http.MethodPost, "alice-token", sid, "", body)
			refused(body, resp, out, invalid("5", `: a message without a method must be a response, with exactly one of result and error`))
		}
		resp, out := do(http.MethodPost, "alice-token", sid, "", `null`)
		refused("null", resp, out, invalid("null", `: a JSON-RPC message is a JSON object, not null`))
	}

	// Batches in a session of 2025-11-25, whatever the header says.
	batch := `[{"jsonrpc":"2.0","id":"b1","method":"tools/list"},{"jsonrpc":"2.0","id":"b2","method":"ping"}]`
	for _, version := range []string{"", "2025-03-26", oldVersion, legacyVersion} {
		resp, out := do(http.MethodPost, "alice-token", current, version, batch)
		refused("a batch with MCP-Protocol-Version "+version, resp, out, invalid("null", `: JSON-RPC batching is not supported in 2025-06-18 and later (this session: 2025-11-25); send each message in a request of its own`))
	}
	// In a session of 2024-11-05, the header still counts.
	resp, out := do(http.MethodPost, "alice-token", old, legacyVersion, batch)
	refused("a batch under 2025-11-25 in a 2024-11-05 session", resp, out, invalid("null", `: JSON-RPC batching is not supported in 2025-06-18 and later (this request: 2025-11-25); send each message in a request of its own`))
	if resp, out := do(http.MethodPost, "alice-token", old, oldVersion, batch); resp.StatusCode != http.StatusOK || !strings.Contains(out, `"id":"b1","result"`) || !strings.Contains(out, `"id":"b2","result"`) {
		t.Errorf("a batch in a 2024-11-05 session: %s %.300s; want both answered", resp.Status, out)
	}
	calls := len(tg.log.all())
	parseError := `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: the request body is not valid JSON"}}`
	for _, c := range []struct{ body, want string }{
		{`[]`, invalid("null", `: an empty batch`)},
		{` [{"jsonrpc":"2.0","id":1,`, parseError},
		{`hello`, parseError},
		{``, parseError},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"`, parseError},
		{`"x"`, invalid("null", `: a JSON-RPC message is a JSON object, not a string`)},
		{`5`, invalid("null", `: a JSON-RPC message is a JSON object, not a number`)},
		{`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"github__echo","arguments":{"a":1}}},{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"github__echo","arguments":{"a":2}}}]`, invalid("null", `: a batch repeats a request id`)},
		{`[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"github__echo"}},{"jsonrpc":"2.0","id":5,"result":{},"error":{"code":1,"message":"x"}}]`, invalid("null", ` in batch: a message without a method must be a response, with exactly one of result and error`)},
		{`[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"github__echo"}},{"jsonrpc":"2.0","id":8,"method":""}]`, invalid("null", ` in batch: the method is empty`)},
	} {
		resp, out := do(http.MethodPost, "alice-token", old, oldVersion, c.body)
		refused(c.body, resp, out, c.want)
	}
	if n := len(tg.log.all()); n != calls {
		t.Errorf("%d calls of refused batches were decided; nothing in them may run", n-calls)
	}
}

// TestHTTPFrontProtocolVersions: an MCP-Protocol-Version the SDK does not
// know is refused in the SDK's words however it sorts, and is neither
// echoed nor logged; a later version asked for in _meta alone is refused
// by the SDK's stateless handler.
func TestHTTPFrontProtocolVersions(t *testing.T) {
	oplog := &syncBuffer{}
	tg := startGateway(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(oplog, nil)) })
	srv := aliceFront(t, tg)
	do := rawHTTP(t, srv.URL)
	resp, out := do(http.MethodPost, "alice-token", "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+legacyVersion+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	current := resp.Header.Get(sessionIDHeader)
	if current == "" {
		t.Fatalf("initialize: %s %s", resp.Status, out)
	}
	for _, version := range []string{"1999-01-01", "2030-01-01", "zzz", strings.Repeat("9", 64<<10)} {
		for _, sid := range []string{"", current} {
			resp, out := do(http.MethodPost, "alice-token", sid, version, `{"jsonrpc":"2.0","id":9,"method":"ping"}`)
			want := "Bad Request: Unsupported protocol version (supported versions: 2026-07-28,2025-11-25,2025-06-18,2025-03-26,2024-11-05)"
			if resp.StatusCode != http.StatusBadRequest || out != want {
				t.Errorf("MCP-Protocol-Version %.20s (session %q): %s %.200s; want 400 %s", version, sid, resp.Status, out, want)
			}
		}
	}
	// A request of the sessionless protocol goes to the SDK's stateless
	// handler, which says what is wrong with it, and opens no session.
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2030-01-01","io.modelcontextprotocol/clientCapabilities":{}}`
	resp, out = do(http.MethodPost, "alice-token", "", "", `{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{`+meta+`}}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(out, `"code":-32020`) || resp.Header.Get(sessionIDHeader) != "" {
		t.Errorf("a request for 2030-01-01 in _meta alone was answered %s %s; want the SDK's -32020, and no session", resp.Status, out)
	}
	if log := oplog.String(); strings.Contains(log, "Stateless") || strings.Contains(log, "9999") || strings.Contains(log, "zzz") {
		t.Errorf("the log holds what a client sent or the SDK's advice:\n%.2000s", log)
	}
}

// TestHTTPDenialLooksLikeAbsence: over HTTP, a denied tool and a tool that
// does not exist are answered with the same bytes, the name aside, for
// arguments of every kind.
func TestHTTPDenialLooksLikeAbsence(t *testing.T) {
	tg := startGateway(t, nil)
	srv := aliceFront(t, tg)
	do := rawHTTP(t, srv.URL)
	sid := rawHTTPSession(t, do, legacyVersion)
	call := func(name, args string) string {
		t.Helper()
		resp, out := do(http.MethodPost, "alice-token", sid, legacyVersion, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"`+name+`"`+args+`}}`)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s %s", name, resp.Status, out)
		}
		return strings.ReplaceAll(out, name, "NAME")
	}
	for _, args := range []string{``, `,"arguments":{}`, `,"arguments":null`, `,"arguments":[1]`, `,"arguments":"x"`, `,"arguments":5`} {
		denied, missing := call("github__delete_repo", args), call("github__list_nothing", args)
		if denied != missing || !strings.Contains(denied, `"code":-32602`) {
			t.Errorf("arguments %q: denied %s, missing %s; want the same -32602", args, denied, missing)
		}
	}
}
