package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/policyc/policyc/internal/authlimit"
	"github.com/policyc/policyc/internal/testop"
	"github.com/policyc/policyc/runtime/gateway/identity"
	"github.com/policyc/policyc/runtime/principal"
	"github.com/policyc/policyc/runtime/table"
)

// oauthFront is a gateway's HTTP front admitting the access tokens of a
// real OpenID provider (op) beside alice's static token. Its resource URL
// is the front's own address.
type oauthFront struct {
	tg       *testGateway
	op       *testop.Provider
	url      string // the front's URL, which is its resource identifier
	verifier *identity.Verifier
	oplog    *syncBuffer
	// front is a second front of the same gateway (startGroupsFront):
	// its verifier maps groups.
	front string
}

func startOAuthFront(t *testing.T, opts HTTPOptions, configure ...func(*Config)) *oauthFront {
	t.Helper()
	op, err := testop.Start(jose.RS256)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { op.Close() })
	oplog := &syncBuffer{}
	tg := startGateway(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(oplog, nil))
		for _, f := range configure {
			f(c)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/"
	// Keys are refetched for an unknown kid as soon as one comes: the
	// rotation test rotates right after the front starts (the identity
	// package tests the rate limit).
	v, err := identity.New(context.Background(), identity.Config{Resource: url, Issuers: []identity.Issuer{{Name: "corp", URL: op.Issuer}},
		MinRefetch: time.Nanosecond, Logger: slog.New(slog.NewTextHandler(oplog, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if opts.OAuth == nil {
		opts.OAuth = &OAuthOptions{Scopes: []string{"mcp"}}
	}
	opts.OAuth.Verifier = v
	opts.Tokens = map[string]string{tokenHash("alice-token"): "alice"}
	h, err := tg.HTTPHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return &oauthFront{tg: tg, op: op, url: url, verifier: v, oplog: oplog}
}

// agentClient is a client-credentials client of the provider whose tokens
// name the front as their audience.
func (f *oauthFront) agentClient(id, subject string) {
	f.op.SetClient(id, testop.Client{Secret: id + "-secret", Subject: subject, Audience: []string{f.url}})
}

func (f *oauthFront) token(t *testing.T, client string, scopes ...string) string {
	t.Helper()
	tok, err := f.op.Token(context.Background(), client, scopes...)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// post sends an initialize request with token ("" for none).
func (f *oauthFront) post(t *testing.T, token string) (*http.Response, string) {
	t.Helper()
	return f.postVia(t, token, "")
}

// postVia is post through a proxy that says it forwards for client
// (X-Forwarded-For), when client is set.
func (f *oauthFront) postVia(t *testing.T, token, client string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if client != "" {
		req.Header.Set("X-Forwarded-For", client)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// challenge is the resp's Bearer challenge, parsed as a client would.
func bearerChallenge(t *testing.T, resp *http.Response) map[string]string {
	t.Helper()
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil || len(cs) != 1 || cs[0].Scheme != "bearer" {
		t.Fatalf("WWW-Authenticate %q: %v %+v", resp.Header.Values("WWW-Authenticate"), err, cs)
	}
	return cs[0].Params
}

func TestHTTPProtectedResourceMetadata(t *testing.T) {
	f := startOAuthFront(t, HTTPOptions{})
	metaURL := strings.TrimSuffix(f.url, "/") + MetadataPath

	// What a client does: a request without a token, the challenge, the
	// metadata it names.
	resp, _ := f.post(t, "")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %s", resp.Status)
	}
	ch := bearerChallenge(t, resp)
	if ch["resource_metadata"] != metaURL || ch["scope"] != "mcp" || ch["error"] != "" {
		t.Errorf("challenge without a token: %v; want resource_metadata %s, scope mcp, no error code", ch, metaURL)
	}
	meta, err := oauthex.GetProtectedResourceMetadata(context.Background(), ch["resource_metadata"], f.url, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Resource != f.url || !slices.Equal(meta.AuthorizationServers, []string{f.op.Issuer}) ||
		!slices.Equal(meta.ScopesSupported, []string{"mcp"}) || !slices.Equal(meta.BearerMethodsSupported, []string{"header"}) {
		t.Errorf("metadata = %+v", meta)
	}
	// The metadata is public, and only GET.
	req, _ := http.NewRequest(http.MethodPost, metaURL, nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST to the metadata: %v %v", resp.Status, err)
	}
	// Any other path is still 404, MCP is still at / only.
	for _, path := range []string{MetadataPath + "/x", "/.well-known/oauth-authorization-server", "/mcp"} {
		resp, err := http.Get(strings.TrimSuffix(f.url, "/") + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", path, resp.Status)
		}
	}
}

func TestHTTPMetadataLocation(t *testing.T) {
	for _, tc := range []struct {
		resource, url string
		paths         []string
	}{
		{"https://gw.example.com/", "https://gw.example.com" + MetadataPath, []string{MetadataPath}},
		{"https://gw.example.com", "https://gw.example.com" + MetadataPath, []string{MetadataPath}},
		{"https://example.com:8443/mcp/", "https://example.com:8443" + MetadataPath + "/mcp", []string{MetadataPath, MetadataPath + "/mcp"}},
	} {
		u, paths := metadataLocation(tc.resource)
		if u != tc.url || !slices.Equal(paths, tc.paths) {
			t.Errorf("%s: %s %q, want %s %q", tc.resource, u, paths, tc.url, tc.paths)
		}
	}
}

func TestHTTPAccessTokens(t *testing.T) {
	f := startOAuthFront(t, HTTPOptions{})
	f.agentClient("bob-agent", "bob")
	bob := httpClient(t, f.url, f.token(t, "bob-agent", "mcp"))
	// bob from a token is bob: the policy's principal scope applies.
	if names := toolNames(t, bob); slices.Contains(names, "github__create_issue") || !slices.Contains(names, "github__echo") {
		t.Errorf("bob over an access token: %v", names)
	}
	// alice's static token works beside the provider's.
	alice := httpClient(t, f.url, "alice-token")
	if names := toolNames(t, alice); !slices.Contains(names, "github__create_issue") {
		t.Errorf("alice over her static token: %v", names)
	}
	// A token without the scope the front needs: 403 naming it.
	resp, body := f.post(t, f.token(t, "bob-agent", "other"))
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a token without scope mcp: %s %s", resp.Status, body)
	}
	if ch := bearerChallenge(t, resp); ch["error"] != "insufficient_scope" || ch["scope"] != "mcp" || ch["resource_metadata"] == "" {
		t.Errorf("insufficient scope challenge: %v", ch)
	}
	if log := f.oplog.String(); !strings.Contains(log, `msg="token refused" reason=insufficient_scope`) || !strings.Contains(log, "principal=bob") || !strings.Contains(log, "subject=bob") {
		t.Errorf("the log does not say the token lacked a scope, and whose it was:\n%s", log)
	}
}

// Each way a token can be wrong is refused 401, with invalid_token in the
// challenge, and logged as a refusal of its own kind; the token itself is
// in neither the answer nor the log.
func TestHTTPTokenRefusals(t *testing.T) {
	f := startOAuthFront(t, HTTPOptions{AuthLimit: authlimit.New(authlimit.Options{Burst: 100})})
	f.agentClient("agent", "agent-7")
	good := f.token(t, "agent", "mcp")

	f.op.SetClient("expired", testop.Client{Secret: "expired-secret", Audience: []string{f.url}, Lifetime: -2 * time.Minute})
	f.op.SetClient("elsewhere", testop.Client{Secret: "elsewhere-secret", Audience: []string{"https://other.example.com/"}})
	stranger, err := testop.Start(jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	stranger.SetClient("agent", testop.Client{Secret: "agent-secret", Audience: []string{f.url}})
	foreign, err := stranger.Token(context.Background(), "agent", "mcp")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + parts[1] + "."

	for _, tc := range []struct {
		name, token, reason string
	}{
		{"expired", f.token(t, "expired", "mcp"), "expired"},
		{"another audience", f.token(t, "elsewhere", "mcp"), "wrong_audience"},
		{"unknown issuer", foreign, "unknown_issuer"},
		{"alg none", none, "alg_not_allowed"},
		{"bad signature", parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-4] + "AAAA", "bad_signature"},
		{"neither static nor a JWT", "wrong-token", "unknown_token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := f.post(t, tc.token)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s %s", resp.Status, body)
			}
			if ch := bearerChallenge(t, resp); ch["error"] != "invalid_token" || ch["resource_metadata"] == "" {
				t.Errorf("challenge %v", ch)
			}
			if tc.reason != "unknown_token" && !strings.Contains(body, tc.reason) {
				t.Errorf("answer %q does not say %s", body, tc.reason)
			}
			log := f.oplog.String()
			if !strings.Contains(log, `msg="token refused" reason=`+tc.reason+" ") {
				t.Errorf("no refusal for %s logged:\n%s", tc.reason, log)
			}
			if strings.Contains(log, tc.token) || strings.Contains(body, tc.token) {
				t.Error("the token was logged or echoed")
			}
		})
	}
	if log := f.oplog.String(); !strings.Contains(log, "issuer="+stranger.Issuer) {
		t.Errorf("the unknown issuer is not named in the log:\n%s", log)
	}
	// After all that, the good token is fine.
	if resp, body := f.post(t, good); resp.StatusCode != http.StatusOK {
		t.Errorf("a good token: %s %s", resp.Status, body)
	}
}

// Refused tokens count against their source; past the limit, every
// request from it is answered 429 with Retry-After, good token or not,
// and nothing is verified.
func TestHTTPRefusedTokensLimited(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := startOAuthFront(t, HTTPOptions{AuthLimit: authlimit.New(authlimit.Options{Burst: 3, Every: 10 * time.Second, Now: clock})})
	f.agentClient("agent", "agent-7")
	good := f.token(t, "agent", "mcp")
	// Requests without a token (a client discovering the metadata) do not
	// count.
	for range 5 {
		if resp, _ := f.post(t, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("no token: %s", resp.Status)
		}
	}
	for i := range 3 {
		if resp, _ := f.post(t, "guess-"+strconvItoa(i)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: %s", i, resp.Status)
		}
	}
	for _, tok := range []string{"guess-x", good, "alice-token"} {
		resp, body := f.post(t, tok)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "10" {
			t.Fatalf("past the limit: %s (Retry-After %q) %s", resp.Status, resp.Header.Get("Retry-After"), body)
		}
	}
	mu.Lock()
	now = now.Add(10 * time.Second)
	mu.Unlock()
	if resp, body := f.post(t, good); resp.StatusCode != http.StatusOK {
		t.Errorf("after the wait: %s %s", resp.Status, body)
	}
	// The metadata is not limited.
	resp, err := http.Get(strings.TrimSuffix(f.url, "/") + MetadataPath)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("metadata: %v %v", resp.Status, err)
	}
}

// Behind a trusted proxy each client has its own limit: a guesser's
// refused tokens make it wait, not the clients the proxy forwards beside
// it. The address a client's proxy forwards for is believed only from a
// trusted proxy.
func TestHTTPBehindTrustedProxy(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := startOAuthFront(t, HTTPOptions{AuthLimit: authlimit.New(authlimit.Options{Burst: 3, Every: 10 * time.Second, Now: clock}),
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
	f.agentClient("agent", "agent-7")
	good := f.token(t, "agent", "mcp")
	for i := range 3 {
		if resp, _ := f.postVia(t, "guess-"+strconvItoa(i), "198.51.100.1, 203.0.113.9"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: %s", i, resp.Status)
		}
	}
	if resp, body := f.postVia(t, good, "203.0.113.9"); resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "from 203.0.113.9") {
		t.Fatalf("the guesser past its limit: %s %s", resp.Status, body)
	}
	// What the guesser writes to the left of the proxy's entry is its own
	// claim: it is still the guesser.
	if resp, _ := f.postVia(t, good, "198.51.100.7, 203.0.113.9"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the guesser naming another client: %s", resp.Status)
	}
	for _, client := range []string{"198.51.100.7", "2001:db8::1", ""} {
		if resp, body := f.postVia(t, good, client); resp.StatusCode != http.StatusOK {
			t.Errorf("a client forwarded for %q beside the guesser: %s %s", client, resp.Status, body)
		}
	}
}

// A client's token never reaches an upstream: the gateway calls upstreams
// with credentials of its own, and the headers an HTTP upstream sees hold
// nothing of the client's.
func TestHTTPClientTokenNeverUpstream(t *testing.T) {
	up := newMemUpstream("github")
	var mu sync.Mutex
	var seen []http.Header
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.Server }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}).ServeHTTP(w, r)
	}))
	t.Cleanup(upstream.Close)
	f := startOAuthFront(t, HTTPOptions{}, func(c *Config) {
		c.Upstreams[0] = Upstream{Name: "github", URL: upstream.URL, Header: http.Header{"Authorization": {"Bearer upstream-secret"}}}
	})
	f.agentClient("agent", "agent-7")
	tok := f.token(t, "agent", "mcp")
	for _, version := range []string{legacyVersion, newVersion} {
		cs := httpClientVersion(t, f.url, tok, version)
		if msg, isErr := callText(t, cs, "github__echo"); isErr || !strings.HasPrefix(msg, "github echo") {
			t.Fatalf("%s: github__echo: %q", version, msg)
		}
	}
	if msg, isErr := callText(t, httpClient(t, f.url, "alice-token"), "github__echo"); isErr {
		t.Fatalf("alice: %q", msg)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the upstream saw no request")
	}
	sig := tok[strings.LastIndexByte(tok, '.')+1:]
	for _, h := range seen {
		if got := h.Get("Authorization"); got != "Bearer upstream-secret" {
			t.Errorf("the upstream saw Authorization %q, want the gateway's own", got)
		}
		b, _ := json.Marshal(h)
		if strings.Contains(string(b), sig) || strings.Contains(string(b), "alice-token") {
			t.Errorf("a client's token reached the upstream: %s", b)
		}
	}
}

// httpClientVersion is httpClient at protocol version.
func httpClientVersion(t *testing.T, url, token, version string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-client", Version: "1"}, nil).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect at %s: %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// The provider rotates its key while a client is connected: the session
// goes on while the old key is published, tokens of the new key are
// admitted without a restart, and once the old key is withdrawn the
// tokens it signed are refused.
func TestHTTPKeyRotationDuringService(t *testing.T) {
	f := startOAuthFront(t, HTTPOptions{})
	f.agentClient("bob-agent", "bob")
	before := httpClient(t, f.url, f.token(t, "bob-agent", "mcp"))
	if err := f.op.Rotate(jose.EdDSA, true); err != nil {
		t.Fatal(err)
	}
	after := httpClient(t, f.url, f.token(t, "bob-agent", "mcp"))
	for _, cs := range []*mcp.ClientSession{before, after} {
		if msg, isErr := callText(t, cs, "github__echo"); isErr {
			t.Errorf("github__echo: %q", msg)
		}
	}
	if log := f.oplog.String(); !strings.Contains(log, `msg="issuer keys changed"`) {
		t.Errorf("the new key was not logged:\n%s", log)
	}
	if err := f.op.Rotate(jose.ES256, false); err != nil {
		t.Fatal(err)
	}
	latest := httpClient(t, f.url, f.token(t, "bob-agent", "mcp"))
	if msg, isErr := callText(t, latest, "github__echo"); isErr {
		t.Errorf("github__echo with the newest key: %q", msg)
	}
	if _, err := before.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__echo"}); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("a token of a withdrawn key: %v, want Unauthorized", err)
	}
	if log := f.oplog.String(); !strings.Contains(log, `msg="token refused" reason=unknown_key`) {
		t.Errorf("the withdrawn key's token was not logged as refused:\n%s", log)
	}
}

func TestHTTPOAuthConfig(t *testing.T) {
	tg := startGateway(t, nil)
	if _, err := tg.HTTPHandler(HTTPOptions{OAuth: &OAuthOptions{}}); err == nil {
		t.Error("OAuth options without a verifier were taken")
	}
}

// groupsPolicy is testPolicy with a group that may not create issues and
// a group that may not echo on linear.
const groupsPolicy = testPolicy + `
groups: contractors: {
	members: ["carol"]
	mcp_servers: github: access: tool: deny_list: ["create_issue"]
}
groups: quiet: {
	members: []
	mcp_servers: linear: access: tool: deny_list: ["echo"]
}
`

// startGroupsFront is startOAuthFront over groupsPolicy, the provider's
// groups claim mapped to the policy's groups.
func startGroupsFront(t *testing.T) *oauthFront {
	t.Helper()
	f := startOAuthFront(t, HTTPOptions{}, func(c *Config) { c.Tables = fixed(loadTable(t, groupsPolicy, 1)) })
	v, err := identity.New(context.Background(), identity.Config{Resource: f.url, MinRefetch: time.Nanosecond, Issuers: []identity.Issuer{{
		Name: "corp", URL: f.op.Issuer, GroupsClaim: "groups",
		Groups: map[string]string{"idp-contractors": "contractors", "idp-quiet": "quiet"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := f.tg.HTTPHandler(HTTPOptions{Tokens: map[string]string{tokenHash("alice-token"): "alice"}, OAuth: &OAuthOptions{Verifier: v, Scopes: []string{"mcp"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// The provider's tokens name the first front's URL as their audience;
	// this front is that resource too.
	f.verifier = v
	f.front = srv.URL
	return f
}

func (f *oauthFront) groupsClient(id, subject string, groups ...string) {
	g := make([]any, len(groups))
	for i, s := range groups {
		g[i] = s
	}
	f.op.SetClient(id, testop.Client{Secret: id + "-secret", Subject: subject, Audience: []string{f.url}, Claims: map[string]any{"groups": g}})
}

// A token's groups pick the policy's narrowing layers as listed
// membership does, and the decision log names the token's groups, issuer
// and subject.
func TestHTTPGroupsFromClaims(t *testing.T) {
	f := startGroupsFront(t)
	f.groupsClient("dave-agent", "dave", "idp-contractors", "idp-unmapped")
	dave := httpClient(t, f.front, f.token(t, "dave-agent", "mcp"))
	if names := toolNames(t, dave); slices.Contains(names, "github__create_issue") || !slices.Contains(names, "github__echo") || !slices.Contains(names, "linear__echo") {
		t.Errorf("dave, a contractor by his token: %v", names)
	}
	// carol is a contractor by the policy's list; her token adds quiet.
	f.groupsClient("carol-agent", "carol", "idp-quiet")
	carol := httpClient(t, f.front, f.token(t, "carol-agent", "mcp"))
	if names := toolNames(t, carol); slices.Contains(names, "github__create_issue") || slices.Contains(names, "linear__echo") {
		t.Errorf("carol, a listed contractor and quiet by her token: %v", names)
	}
	var rec *Record
	for _, r := range f.tg.log.all() {
		if r.Op == OpList && r.Name == "create_issue" && principal.Name(r.Principal) == "dave" {
			rec = &r
			break
		}
	}
	if rec == nil {
		t.Fatal("no record of dave's listing")
	}
	if rec.Decision.Effect != table.Deny || rec.Decision.Scope != "group:contractors" {
		t.Errorf("dave's create_issue: %+v", rec.Decision)
	}
	line := string(AppendRecord(nil, rec))
	if !strings.Contains(line, `"principal":"dave","groups":["contractors"],"issuer":"`+f.op.Issuer+`","subject":"dave","server":"github"`) {
		t.Errorf("the decision log line: %s", line)
	}
	if strings.Contains(line, "eyJ") {
		t.Errorf("a token in the decision log: %s", line)
	}
}

// One subject's groups change between two tokens: each token is decided
// with its own groups, and a session opened under the first cannot be
// used with the second (it was listed for other groups).
func TestHTTPGroupsChangeBetweenTokens(t *testing.T) {
	f := startGroupsFront(t)
	f.groupsClient("dave-agent", "dave", "idp-contractors")
	first := f.token(t, "dave-agent", "mcp")
	f.groupsClient("dave-agent", "dave")
	second := f.token(t, "dave-agent", "mcp")

	before := httpClient(t, f.front, first)
	if names := toolNames(t, before); slices.Contains(names, "github__create_issue") {
		t.Errorf("dave as a contractor: %v", names)
	}
	after := httpClient(t, f.front, second)
	if names := toolNames(t, after); !slices.Contains(names, "github__create_issue") {
		t.Errorf("dave no longer a contractor: %v", names)
	}
	for _, version := range []string{newVersion} {
		cs := httpClientVersion(t, f.front, second, version)
		if msg, isErr := callText(t, cs, "github__create_issue"); isErr {
			t.Errorf("%s, dave without groups: create_issue %q", version, msg)
		}
		// Denied, it is absent: an unknown tool.
		cs = httpClientVersion(t, f.front, first, version)
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__create_issue"}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
			t.Errorf("%s, dave as a contractor: create_issue answered %v, want an unknown tool", version, err)
		}
	}

	// The first session's id under the second token: refused.
	resp, _ := f.postTo(t, f.front, second, f.session(t, first), `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a session of dave-as-contractor with dave's new token: %s, want 403", resp.Status)
	}
}

// session opens a session with token and returns its id.
func (f *oauthFront) session(t *testing.T, token string) string {
	t.Helper()
	resp, body := f.postTo(t, f.front, token, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	sid := resp.Header.Get(sessionIDHeader)
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	return sid
}

func (f *oauthFront) postTo(t *testing.T, url, token, session, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if session != "" {
		req.Header.Set(sessionIDHeader, session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}
