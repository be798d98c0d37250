package approval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/internal/policytest"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/gateway"
)

// e2ePolicy holds merge_pull_request for approval on the approvals page and
// allows echo.
const e2ePolicy = `package policy

defaults: {tool: "deny", prompt: "deny", resource: "deny"}

approval_channels: page: approvals_page: {}

mcp_servers: github: {
	access: {
		tool: {
			allow_list: ["echo"]
			approval_list: ["merge_pull_request", "delete_branch"]
			approval_timeout_seconds: 30
			approval_channel: "page"
		}
		resource: allow_list: ["ui://github/*"]
	}
	ui: {
		allow_list: ["ui://github/app.html"]
		consent_channel: "page"
	}
}
`

func compileTable(t testing.TB, src string, serial uint64) *decide.Table {
	t.Helper()
	rt, err := decide.Load(policytest.Compile(t, src, serial))
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// upstream is an in-process MCP server whose tools count their
// invocations.
type upstream struct {
	server *mcp.Server
	calls  sync.Map // tool name → *atomic.Int64
}

func newUpstream() *upstream {
	u := &upstream{server: mcp.NewServer(&mcp.Implementation{Name: "github", Version: "1"}, nil)}
	for _, name := range []string{"echo", "merge_pull_request", "delete_branch"} {
		u.server.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, r *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n, _ := u.calls.LoadOrStore(name, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " ran with " + string(r.Params.Arguments)}}}, nil
		})
	}
	for _, uri := range []string{"ui://github/app.html", "ui://github/other.html"} {
		u.server.AddResource(&mcp.Resource{URI: uri, Name: uri, MIMEType: "text/html;profile=mcp-app"}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, MIMEType: "text/html;profile=mcp-app", Text: "<p>app</p>"}}}, nil
		})
	}
	return u
}

func (u *upstream) count(tool string) int64 {
	n, ok := u.calls.Load(tool)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

func (u *upstream) dial(ctx context.Context) (mcp.Transport, error) {
	st, ct := mcp.NewInMemoryTransports()
	if _, err := u.server.Connect(ctx, st, nil); err != nil {
		return nil, err
	}
	return ct, nil
}

// decisions is the decision log of the tests: it counts records (and
// keeps none, so benchmarks do not grow it).
type decisions struct {
	n atomic.Int64

	mu       sync.Mutex
	verdicts []string // of approval records
}

func (d *decisions) Log(r *gateway.Record) error {
	d.n.Add(1)
	if r.Op == gateway.OpApproval {
		d.mu.Lock()
		d.verdicts = append(d.verdicts, r.Verdict)
		d.mu.Unlock()
	}
	return nil
}

func (d *decisions) approvalVerdicts() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.verdicts...)
}

// stack is a gateway in front of a counting upstream, with a gate.
type stack struct {
	gw    *gateway.Gateway
	gate  *Gate
	up    *upstream
	log   *decisions
	table atomic.Pointer[decide.Table]
}

func newStack(t testing.TB, gate *Gate, policy string, configure ...func(*gateway.Config)) *stack {
	t.Helper()
	s := &stack{gate: gate, up: newUpstream(), log: &decisions{}}
	s.table.Store(compileTable(t, policy, 1))
	cfg := gateway.Config{
		Upstreams:   []gateway.Upstream{{Name: "github", Dial: s.up.dial}},
		Tables:      func(func(*decide.Table) error) (*decide.Table, error) { return s.table.Load(), nil },
		Log:         s.log,
		CallTimeout: 10 * time.Second,
	}
	for _, f := range configure {
		f(&cfg)
	}
	if gate != nil {
		cfg.Approvals = gate.Approvals()
		cfg.Consent = gate.Consents()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gw, err := gateway.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	s.gw = gw
	return s
}

func (s *stack) client(t testing.TB, principal string) *mcp.ClientSession {
	t.Helper()
	return s.clientWith(t, principal, nil)
}

func (s *stack) clientWith(t testing.TB, principal string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := s.gw.Connect(context.Background(), principal, st); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "2.1"}, opts).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// pageOnly resolves the one channel the e2e policy names.
func pageOnly(c *Config) {
	c.Channels = func(name string) (Channel, bool) {
		return Channel{Name: name, Kind: ChannelPage}, name == "page"
	}
}

func resultText(r *mcp.CallToolResult) string {
	if r == nil || len(r.Content) == 0 {
		return ""
	}
	if tc, ok := r.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// 100 concurrent identical calls, from ten sessions of one principal, and
// one approval once: exactly one upstream invocation.
func TestGatewayHundredCallsOneRun(t *testing.T) {
	gate := openGate(t, "", pageOnly)
	s := newStack(t, gate, e2ePolicy)
	const sessions, perSession = 10, 10
	type out struct {
		res *mcp.CallToolResult
		err error
	}
	results := make(chan out, sessions*perSession)
	for i := 0; i < sessions; i++ {
		cs := s.client(t, "alice")
		for j := 0; j < perSession; j++ {
			go func() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: map[string]any{"number": 7, "repo": "acme/web"}})
				results <- out{res, err}
			}()
		}
	}
	r := pendingFor(t, gate, "alice", "merge_pull_request", sessions*perSession)
	if n := len(gate.List(Filter{})); n != 1 {
		t.Fatalf("%d requests for 100 identical calls", n)
	}
	if s.up.count("merge_pull_request") != 0 {
		t.Fatal("a held call ran before the decision")
	}
	mustDecide(t, gate, r.ID, VerdictApprove, ForOnce)
	ran, refused := 0, 0
	for i := 0; i < sessions*perSession; i++ {
		o := <-results
		switch {
		case o.err != nil:
			t.Fatalf("protocol error: %v", o.err)
		case !o.res.IsError:
			ran++
		default:
			refused++
			if !strings.Contains(resultText(o.res), r.ID) || !strings.Contains(resultText(o.res), "identical to another call") {
				t.Fatalf("a folded call's answer does not name the request: %s", resultText(o.res))
			}
		}
	}
	if got := s.up.count("merge_pull_request"); got != 1 || ran != 1 || refused != 99 {
		t.Fatalf("upstream ran %d times; %d results ran, %d refused", got, ran, refused)
	}
}

// A denial reaches the agent as a tool execution error naming the request
// and telling it not to route around it.
func TestGatewayDenyText(t *testing.T) {
	gate := openGate(t, "", pageOnly)
	s := newStack(t, gate, e2ePolicy)
	cs := s.client(t, "alice")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__delete_branch", Arguments: map[string]any{"branch": "main"}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	r := pendingFor(t, gate, "alice", "delete_branch", 1)
	if _, err := gate.Decide(r.ID, VerdictDeny, "", "main is protected", Approver{Name: "carol", From: "test"}); err != nil {
		t.Fatal(err)
	}
	res := <-done
	text := resultText(res)
	if res == nil || !res.IsError {
		t.Fatalf("denial is not a tool error: %+v", res)
	}
	for _, want := range []string{r.ID, "carol denied it, saying: main is protected", "Do not retry it, not with other arguments either, and do not try to reach the same effect another way"} {
		if !strings.Contains(text, want) {
			t.Errorf("denial text lacks %q: %s", want, text)
		}
	}
	if s.up.count("delete_branch") != 0 {
		t.Fatal("a denied call ran")
	}
	// Allowed tools never touch the gate.
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__echo", Arguments: map[string]any{"x": 1}}); err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
	if n := len(gate.List(Filter{})); n != 1 {
		t.Fatalf("%d requests; allowed calls make none", n)
	}
}

// Reading an allowlisted ui:// resource asks for the principal's consent,
// through the gate; consent is remembered, per principal and resource.
func TestGatewayConsent(t *testing.T) {
	gate := openGate(t, "", func(c *Config) { pageOnly(c); c.ConsentWait = 5 * time.Second })
	s := newStack(t, gate, e2ePolicy)
	alice := s.client(t, "alice")
	read := func(cs *mcp.ClientSession, uri string) <-chan error {
		ch := make(chan error, 1)
		go func() {
			_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
			ch <- err
		}()
		return ch
	}
	consentFor := func(principal string) Request {
		t.Helper()
		return pendingWhere(t, gate, func(r Request) bool { return r.Kind == KindConsent && r.Principal == principal })
	}
	// Denied: the read answers as for a resource that does not exist.
	ch := read(alice, "ui://github/app.html")
	r := consentFor("alice")
	if r.Client != "e2e-agent 2.1" || r.TableSerial != 1 {
		t.Fatalf("consent request: client %q, table serial %d", r.Client, r.TableSerial)
	}
	mustDecide(t, gate, r.ID, VerdictDeny, "")
	err := <-ch
	_, absentErr := alice.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "ui://github/nothing-here.html"})
	if err == nil || absentErr == nil || strings.Replace(err.Error(), "app.html", "X", 1) != strings.Replace(absentErr.Error(), "nothing-here.html", "X", 1) {
		t.Fatalf("a refused consent answers %v; a missing resource %v", err, absentErr)
	}
	// Granted: served, and remembered.
	ch = read(alice, "ui://github/app.html")
	r = consentFor("alice")
	mustDecide(t, gate, r.ID, VerdictApprove, "")
	if err := <-ch; err != nil {
		t.Fatalf("read with consent: %v", err)
	}
	if _, err := alice.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "ui://github/app.html"}); err != nil {
		t.Fatalf("remembered consent: %v", err)
	}
	// Another principal is asked on its own.
	bob := s.client(t, "bob")
	ch = read(bob, "ui://github/app.html")
	rb := consentFor("bob")
	if rb.ID == r.ID {
		t.Fatal("alice's consent covered bob")
	}
	mustDecide(t, gate, rb.ID, VerdictDeny, "")
	if err := <-ch; err == nil {
		t.Fatal("bob read without consent")
	}
	// Prompts and other resources are never held; a ui:// resource off the
	// allowlist is denied without asking.
	before := len(gate.List(Filter{}))
	if _, err := alice.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "ui://github/other.html"}); err == nil {
		t.Fatal("a ui:// resource off the allowlist was read")
	}
	if len(gate.List(Filter{})) != before {
		t.Fatal("a resource off the allowlist asked for consent")
	}
}

// While a call is held, a client that sent a progress token hears at a
// steady interval that it waits, with the request id; the approver sees
// which agent asked (the session id is empty over in-memory transports).
func TestGatewayProgressAndAgent(t *testing.T) {
	gate := openGate(t, "", func(c *Config) { pageOnly(c); c.ProgressInterval = 20 * time.Millisecond })
	s := newStack(t, gate, e2ePolicy)
	progress := make(chan string, 100)
	cs := s.clientWith(t, "alice", &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		if r.Params.ProgressToken == "tok-1" {
			select {
			case progress <- r.Params.Message:
			default:
			}
		}
	}})
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: map[string]any{"number": 9}}
		p.SetProgressToken("tok-1")
		res, _ := cs.CallTool(context.Background(), p)
		done <- res
	}()
	r := pendingFor(t, gate, "alice", "merge_pull_request", 1)
	if r.Client != "e2e-agent 2.1" {
		t.Fatalf("the request does not say which agent asked: client %q", r.Client)
	}
	for i := 0; i < 3; i++ {
		select {
		case m := <-progress:
			if !strings.Contains(m, r.ID) {
				t.Fatalf("progress message %q does not name the request", m)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d progress notifications, want 3", i)
		}
	}
	mustDecide(t, gate, r.ID, VerdictApprove, ForOnce)
	if res := <-done; res == nil || res.IsError {
		t.Fatalf("approved call: %+v", res)
	}
}

// A table reloaded while the call is held that now denies the tool stops
// it, approved or not.
func TestGatewayRecheck(t *testing.T) {
	gate := openGate(t, "", pageOnly)
	s := newStack(t, gate, e2ePolicy)
	cs := s.client(t, "alice")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: map[string]any{"number": 9}})
		done <- res
	}()
	r := pendingFor(t, gate, "alice", "merge_pull_request", 1)
	s.table.Store(compileTable(t, strings.Replace(e2ePolicy, `approval_list: ["merge_pull_request", "delete_branch"]`, `approval_list: ["delete_branch"]
			deny_list: ["merge_pull_request"]`, 1), 2))
	if err := s.gw.Reload(); err != nil {
		t.Fatal(err)
	}
	mustDecide(t, gate, r.ID, VerdictApprove, ForOnce)
	res := <-done
	if res == nil || !res.IsError || !strings.Contains(resultText(res), "denies") {
		t.Fatalf("a call the reloaded table denies: %+v %q", res, resultText(res))
	}
	if n := s.up.count("merge_pull_request"); n != 0 {
		t.Fatalf("upstream ran %d times", n)
	}
	if got, _ := gate.Get(r.ID); !strings.HasPrefix(got.Ran, "not run: ") {
		t.Fatalf("ran %q", got.Ran)
	}
}

// No decision in time: a tool error naming the request and its link, and
// the request expires.
func TestGatewayTimeout(t *testing.T) {
	gate := openGate(t, "", pageOnly)
	s := newStack(t, gate, strings.Replace(e2ePolicy, "approval_timeout_seconds: 30", "approval_timeout_seconds: 1", 1))
	cs := s.client(t, "alice")
	start := time.Now()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: map[string]any{"number": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second || d > 5*time.Second {
		t.Fatalf("held for %s, want about 1s", d)
	}
	list := gate.List(Filter{})
	if len(list) != 1 || list[0].Status != Expired {
		t.Fatalf("requests %+v", list)
	}
	text := resultText(res)
	for _, want := range []string{"no one decided before the request expired, 1s after it was made", "approval request " + list[0].ID, "http://approvals.test/approvals/" + list[0].ID, "not with other arguments either"} {
		if !res.IsError || !strings.Contains(text, want) {
			t.Errorf("timeout text lacks %q: %s", want, text)
		}
	}
	if s.up.count("merge_pull_request") != 0 {
		t.Fatal("a call nobody approved ran")
	}
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// An approver token opens nothing on the MCP front, and an MCP token
// nothing on the admin side, with both served over HTTP as in a
// deployment.
func TestCrossSideTokens(t *testing.T) {
	gate := openGate(t, "", pageOnly)
	s := newStack(t, gate, e2ePolicy)
	front, err := s.gw.HTTPHandler(gateway.HTTPOptions{Tokens: map[string]string{hashOf(aliceClient): "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	mcpSrv := httptest.NewServer(front)
	defer mcpSrv.Close()
	adminSrv := adminServer(t, gate)

	connect := func(token string) error {
		tr := &mcp.StreamableClientTransport{Endpoint: mcpSrv.URL, HTTPClient: &http.Client{Transport: bearerTransport{token, http.DefaultTransport}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), tr, nil)
		if err == nil {
			cs.Close()
		}
		return err
	}
	if err := connect(aliceClient); err != nil {
		t.Fatalf("the MCP token on the MCP front: %v", err)
	}
	for _, tok := range []string{carolToken, aliceAdmin} {
		if err := connect(tok); err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
			t.Errorf("approver token %q on the MCP front: %v, want 401", tok, err)
		}
	}
	var e ErrorBody
	if st := apiCall(t, adminSrv, aliceClient, "GET", "/api/v1/requests", "", &e); st != 401 || !strings.Contains(e.Error, "MCP client token") {
		t.Errorf("MCP token on the admin side: %d %q", st, e.Error)
	}
	b := newBrowser(t, adminSrv)
	if st, body, _ := b.do("POST", "/login", url.Values{"token": {aliceClient}}, nil); st != 401 || !strings.Contains(body, "MCP client token") {
		t.Errorf("MCP token on the approvals page: %d", st)
	}
}

// A gateway that stops while a call is held tells the agent so, not that
// no one decided in time.
func TestGatewayStopEndsHold(t *testing.T) {
	gate := openGate(t, "", pageOnly)
	s := newStack(t, gate, e2ePolicy)
	cs := s.client(t, "alice")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: map[string]any{"number": 1}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	pendingWhere(t, gate, func(Request) bool { return true }) // the call is held
	gate.Close()
	var res *mcp.CallToolResult
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the held call was not answered when the gate stopped")
	}
	text := resultText(res)
	if !res.IsError || !strings.Contains(text, "the hold ended before anyone decided: the gateway stopped") || strings.Contains(text, "no one decided within") {
		t.Errorf("answer to a call held when the gateway stopped: %s", text)
	}
}

// An HTTP client that deletes its session while a call is held: the DELETE
// is answered at once, the request ends with no call left waiting, and the
// decision log says the client ended the session (not a timeout).
func TestGatewaySessionDeleteEndsHold(t *testing.T) {
	gate := openGate(t, "", pageOnly)
	s := newStack(t, gate, e2ePolicy)
	sum := sha256.Sum256([]byte("alice-token"))
	h, err := s.gw.HTTPHandler(gateway.HTTPOptions{Tokens: map[string]string{hex.EncodeToString(sum[:]): "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearerTransport{"alice-token", http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "2.1"}, nil).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	go cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: map[string]any{"number": 1}})
	pendingWhere(t, gate, func(Request) bool { return true }) // the call is held
	req, _ := http.NewRequest(http.MethodDelete, srv.URL, nil)
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	start := time.Now()
	resp, err := (&http.Client{Transport: bearerTransport{"alice-token", http.DefaultTransport}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if d := time.Since(start); resp.StatusCode >= 400 || d > 10*time.Second {
		t.Fatalf("DELETE: %s after %s", resp.Status, d)
	}
	list := gate.List(Filter{})
	if len(list) != 1 || list[0].Status != Pending {
		t.Errorf("request after the DELETE: %+v; want it still pending (a request outlives its calls)", list)
	}
	if v := s.log.approvalVerdicts(); len(v) != 1 || v[0] != "ended" {
		t.Errorf("decision log verdicts %v, want [ended]", v)
	}
	if s.up.count("merge_pull_request") != 0 {
		t.Error("the held call ran")
	}
}
