package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests here serve protocol 2026-07-28 over the HTTP front: no
// handshake and no session, each request on its own, for the principal of
// its own token.

// newFront serves tg's HTTP front with a token for each principal (the
// token of p is "p-token") until the test ends.
func newFront(t *testing.T, tg *testGateway, principals ...string) *httptest.Server {
	t.Helper()
	tokens := map[string]string{}
	for _, p := range principals {
		tokens[tokenHash(p+"-token")] = p
	}
	h, err := tg.HTTPHandler(HTTPOptions{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// memFrontFor serves tg's HTTP front as newFront does, over memHTTP (for a
// synctest bubble), and returns the client that reaches it.
func memFrontFor(t *testing.T, tg *testGateway, principals ...string) *http.Client {
	t.Helper()
	tokens := map[string]string{}
	for _, p := range principals {
		tokens[tokenHash(p+"-token")] = p
	}
	h, err := tg.HTTPHandler(HTTPOptions{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	return memHTTP(t, h)
}

// sdkClient connects a Go SDK client to url with token, asking for version.
func sdkClient(t *testing.T, url, token, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return sdkClientVia(t, http.DefaultClient, url, token, version, opts)
}

// sdkClientVia is sdkClient through client.
func sdkClientVia(t *testing.T, client *http.Client, url, token, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	base := client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, base}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "new-client", Version: "1"}, opts).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect asking for %s: %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// sessionlessPost sends one 2026-07-28 request as a client of that version
// writes it: the version in the header and in _meta, the method (and the
// name of a call) in headers of their own.
func sessionlessPost(t *testing.T, url, token string, id int, method, name, params string) (*http.Response, string) {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	if params == "" || params == "{}" {
		params = "{" + meta + "}"
	} else {
		params = "{" + meta + "," + strings.TrimPrefix(params, "{")
	}
	body := `{"jsonrpc":"2.0","id":` + strconvItoa(id) + `,"method":"` + method + `","params":` + params + `}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", newVersion)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, strings.TrimSpace(string(b))
}

// sseData is the JSON of the last data line of an SSE body, or the body
// when it is plain JSON.
func sseData(body string) string {
	var last string
	for line := range strings.SplitSeq(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			last = d
		}
	}
	if last == "" {
		return body
	}
	return last
}

// TestHTTPSessionless: a Go SDK client asking for 2026-07-28 over HTTP is
// served at 2026-07-28, not downgraded, and opens no session: it is listed
// what a 2025-11-25 session of the same principal is, its calls run, and a
// denied tool, prompt or resource is answered as an absent one.
func TestHTTPSessionless(t *testing.T) {
	tg := startGateway(t, nil)
	srv := newFront(t, tg, "alice")
	cs := sdkClient(t, srv.URL, "alice-token", newVersion, nil)
	if v := cs.InitializeResult().ProtocolVersion; v != newVersion {
		t.Fatalf("negotiated %s, want %s", v, newVersion)
	}
	old := sdkClient(t, srv.URL, "alice-token", legacyVersion, nil)
	if got, want := toolNames(t, cs), toolNames(t, old); !slices.Equal(got, want) || !slices.Contains(got, "github__echo") {
		t.Errorf("tools at %s: %v; a %s session is listed %v", newVersion, got, legacyVersion, want)
	}
	if n := tg.sessionCount("alice"); n != 1 {
		t.Errorf("alice has %d sessions open; want 1, the %s client's", n, legacyVersion)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__echo", Arguments: map[string]any{"a": 1}})
	if err != nil || res.IsError || !strings.Contains(text(res), `"a":1`) {
		t.Fatalf("echo: %v %+v", err, res)
	}
	ctx := context.Background()
	same := func(what string, denied, absent error, deniedName, absentName string) {
		t.Helper()
		if denied == nil || absent == nil {
			t.Fatalf("%s: denied %v, absent %v; want both refused", what, denied, absent)
		}
		if d, a := strings.ReplaceAll(denied.Error(), deniedName, "NAME"), strings.ReplaceAll(absent.Error(), absentName, "NAME"); d != a {
			t.Errorf("%s: denied %q, absent %q; want the same answer", what, d, a)
		}
	}
	_, d := cs.CallTool(ctx, &mcp.CallToolParams{Name: "github__delete_repo"})
	_, a := cs.CallTool(ctx, &mcp.CallToolParams{Name: "github__no_such_tool"})
	same("tools/call", d, a, "github__delete_repo", "github__no_such_tool")
	_, d = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "github__secret_prompt"})
	_, a = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "github__no_such_prompt"})
	same("prompts/get", d, a, "github__secret_prompt", "github__no_such_prompt")
	_, d = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///srv/projects/x/.env"})
	_, a = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///nowhere/x/.env"})
	same("resources/read", d, a, "file:///srv/projects/x/.env", "file:///nowhere/x/.env")
}

// TestHTTPSessionlessWire: at 2026-07-28 every result says its resultType,
// a listing is marked private to its principal (listings differ per
// principal), no session id is given, and a denied tool's answer is the
// absent one's byte for byte. A Mcp-Method header that does not match the
// body is refused -32020.
func TestHTTPSessionlessWire(t *testing.T) {
	tg := startGateway(t, nil)
	srv := newFront(t, tg, "alice")
	resp, out := sessionlessPost(t, srv.URL, "alice-token", 1, "tools/list", "", "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get(sessionIDHeader) != "" {
		t.Fatalf("tools/list: %s (session %q) %.300s", resp.Status, resp.Header.Get(sessionIDHeader), out)
	}
	var list struct {
		Result struct {
			ResultType string `json:"resultType"`
			CacheScope string `json:"cacheScope"`
			Tools      []struct{ Name string }
		}
	}
	if err := json.Unmarshal([]byte(sseData(out)), &list); err != nil {
		t.Fatalf("tools/list: %v in %.300s", err, out)
	}
	if list.Result.ResultType != "complete" || list.Result.CacheScope != "private" || len(list.Result.Tools) == 0 {
		t.Errorf("tools/list result: resultType %q, cacheScope %q, %d tools; want complete, private, some", list.Result.ResultType, list.Result.CacheScope, len(list.Result.Tools))
	}
	for _, method := range []string{"prompts/list", "resources/list", "resources/templates/list"} {
		_, out := sessionlessPost(t, srv.URL, "alice-token", 2, method, "", "")
		if d := sseData(out); !strings.Contains(d, `"cacheScope":"private"`) || !strings.Contains(d, `"resultType":"complete"`) {
			t.Errorf("%s: %.300s; want a private, complete result", method, d)
		}
	}
	_, out = sessionlessPost(t, srv.URL, "alice-token", 3, "tools/call", "github__echo", `{"name":"github__echo","arguments":{"x":1}}`)
	if d := sseData(out); !strings.Contains(d, `"resultType":"complete"`) || !strings.Contains(d, `\"x\":1`) {
		t.Errorf("tools/call echo: %.300s", d)
	}
	for _, args := range []string{``, `,"arguments":{}`, `,"arguments":{"a":[1,2]}`} {
		call := func(name string) string {
			resp, out := sessionlessPost(t, srv.URL, "alice-token", 4, "tools/call", name, `{"name":"`+name+`"`+args+`}`)
			return resp.Status + " " + strings.ReplaceAll(sseData(out), name, "NAME")
		}
		if denied, absent := call("github__delete_repo"), call("github__no_such_tool"); denied != absent {
			t.Errorf("arguments %q: denied %s, absent %s; want the same bytes", args, denied, absent)
		}
	}
	for _, c := range []struct{ method, name, params string }{
		{"prompts/get", "github__summarize", `{"name":"github__summarize","arguments":{"topic":"x"}}`},
		{"resources/read", "repo://acme/widgets", `{"uri":"repo://acme/widgets"}`},
	} {
		_, out := sessionlessPost(t, srv.URL, "alice-token", 5, c.method, c.name, c.params)
		if d := sseData(out); !strings.Contains(d, `"resultType":"complete"`) || strings.Contains(d, `"error"`) {
			t.Errorf("%s: %.300s; want a complete result", c.method, d)
		}
	}
	// The method in the header must be the body's.
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
	req.Header.Set("Authorization", "Bearer alice-token")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", newVersion)
	req.Header.Set("Mcp-Method", "tools/call")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(b), `"code":-32020`) {
		t.Errorf("a mismatched Mcp-Method header was answered %s %.300s; want -32020", r.Status, b)
	}
}

// TestHTTPSessionlessHold: a 2026-07-28 call held for approval runs once
// approved; one whose client goes away is cancelled (its POST is the
// request's whole life); and another principal's request can neither
// cancel it nor hear of it.
func TestHTTPSessionlessHold(t *testing.T) {
	approve := make(chan Verdict, 1)
	held := make(chan *HoldRequest, 2)
	tg := startGateway(t, func(c *Config) {
		c.Tables = fixed(loadTable(t, strings.Replace(approvalPolicy, "approval_timeout_seconds: 1", "approval_timeout_seconds: 120", 1), 1))
		c.Approvals = gateFunc(func(ctx context.Context, req *HoldRequest) (Verdict, error) {
			held <- req
			select {
			case v := <-approve:
				return v, nil
			case <-ctx.Done():
				return Verdict{}, ctx.Err()
			}
		})
	})
	srv := newFront(t, tg, "alice", "bob")
	changed := make(chan string, 10)
	alice := sdkClient(t, srv.URL, "alice-token", newVersion, nil)
	bob := sdkClient(t, srv.URL, "bob-token", newVersion, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- "bob" },
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			changed <- "bob progress: " + r.Params.Message
		},
	})
	if _, err := bob.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}

	// Approved: the call runs.
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: map[string]any{"n": 1}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	h := <-held
	if h.Principal != "alice" || h.Session != "" {
		t.Errorf("held for principal %q in session %q; want alice, no session", h.Principal, h.Session)
	}
	// Bob cannot cancel alice's call, whatever id he names.
	for id := range 10 {
		sessionlessPost(t, srv.URL, "bob-token", 100+id, "notifications/cancelled", "", `{"requestId":`+strconvItoa(id)+`}`)
	}
	approve <- Verdict{Approved: true}
	select {
	case res := <-done:
		if res == nil || res.IsError || text(res) != "github merge_pull_request done" {
			t.Errorf("approved call: %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the approved call was not answered")
	}

	// The client goes away: the hold ends, cancelled.
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: map[string]any{"n": 2}})
		gone <- err
	}()
	<-held
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled call returned %v; want context.Canceled", err)
	}
	eventually(t, 5*time.Second, "the hold to end", func() bool { return len(verdicts(tg)) == 2 })
	if v := verdicts(tg); !slices.Equal(v, []string{"approved", "cancelled"}) {
		t.Errorf("verdicts %q; want [approved cancelled]", v)
	}
	select {
	case what := <-changed:
		t.Errorf("bob heard %q of alice's calls", what)
	default:
	}
}

// TestHTTPSessionlessListen: a 2026-07-28 client's subscriptions/listen
// hears of changes to its own principal's listing only. In a synctest
// bubble, so "not told" means not told once everything has run.
func TestHTTPSessionlessListen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := testPolicy + `principals: carol: mcp_servers: github: access: tool: deny_list: ["list_more"]` + "\n"
		tg := startGateway(t, func(c *Config) { c.Tables = fixed(loadTable(t, policy, 1)) })
		client := memFrontFor(t, tg, "alice", "carol")
		told := map[string]*atomic.Int32{"alice": new(atomic.Int32), "carol": new(atomic.Int32)}
		for p, n := range told {
			sdkClientVia(t, client, memURL, p+"-token", newVersion, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { n.Add(1) },
			})
		}
		synctest.Wait()
		tg.github.AddTool("list_more") // alice may see it, carol may not
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := told["alice"].Load(); n != 1 {
			t.Errorf("alice's listen was told %d times of a tool she may see; want once", n)
		}
		if n := told["carol"].Load(); n != 0 {
			t.Errorf("carol's listen was told %d times of a tool only alice may see", n)
		}
	})
}
