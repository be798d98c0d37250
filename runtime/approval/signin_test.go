package approval

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/policyc/policyc/internal/testop"
	"github.com/policyc/policyc/runtime/gateway/identity"
	"github.com/policyc/policyc/runtime/principal"
)

// adminAudience is the audience of the admin side's access tokens in the
// API tests.
const adminAudience = "https://approvals.example.com/"

// startProvider starts the test OpenID provider with the people of these
// tests: erin (an approver), frank (in no approver group) and, as
// client-credentials clients, tokens of each for the admin audience.
func startProvider(t testing.TB) *testop.Provider {
	t.Helper()
	p, err := testop.Start(jose.ES256)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	erin := map[string]any{"email": "erin@example.com", "groups": []any{"staff", "approvers"}}
	frank := map[string]any{"email": "frank@example.com", "groups": []any{"staff"}}
	p.SetClient("erin", testop.Client{Secret: "erin-secret", Subject: "sub-erin", Audience: []string{adminAudience}, Claims: erin})
	p.SetClient("frank", testop.Client{Secret: "frank-secret", Subject: "sub-frank", Audience: []string{adminAudience}, Claims: frank})
	p.SetClient("erin-expired", testop.Client{Secret: "s", Subject: "sub-erin", Audience: []string{adminAudience}, Claims: erin, Lifetime: -5 * time.Minute})
	p.SetClient("erin-mcp", testop.Client{Secret: "s", Subject: "sub-erin", Audience: []string{"https://mcp.example.com/"}, Claims: erin})
	p.SetUser("erin", testop.User{Password: "erin-password", Subject: "sub-erin", Claims: erin})
	p.SetUser("frank", testop.User{Password: "frank-password", Subject: "sub-frank", Claims: frank})
	return p
}

// adminOAuthConfig is the admin side's configuration for provider p:
// tokens for audience, approvers the members of the provider's group
// "approvers", named by their email.
func adminOAuthConfig(p *testop.Provider, audience string) AdminOAuthConfig {
	return AdminOAuthConfig{
		Identity: identity.Config{Resource: audience, Issuers: []identity.Issuer{{Name: "corp", URL: p.Issuer, PrincipalClaim: "email",
			GroupsClaim: "groups", Groups: map[string]string{"approvers": ApproverGroup}, GroupsOptional: true}}},
		ApproverGroups: []string{"approvers"}, GroupsClaim: "groups",
	}
}

// oauthAdminServer serves the admin listener of g with the static
// approvers of adminServer and provider p's approvers.
func oauthAdminServer(t testing.TB, g *Gate, p *testop.Provider) *httptest.Server {
	t.Helper()
	o, err := NewAdminOAuth(context.Background(), adminOAuthConfig(p, adminAudience))
	if err != nil {
		t.Fatal(err)
	}
	h, err := g.AdminHandler(AdminOptions{
		Approvers:    map[string]string{hashOf(carolToken): "carol"},
		ClientTokens: map[string]string{hashOf(aliceClient): "alice"},
		OAuth:        o,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func providerToken(t testing.TB, p *testop.Provider, client string) string {
	t.Helper()
	tok, err := p.Token(context.Background(), client)
	if err != nil {
		t.Fatalf("token for %s: %v", client, err)
	}
	return tok
}

// An approver's access token from the provider decides a request through
// the admin API, recorded with its name, issuer and subject; the static
// approver tokens keep working beside it.
func TestAdminAPIProviderApprover(t *testing.T) {
	p := startProvider(t)
	g := openGate(t, "", nil)
	srv := oauthAdminServer(t, g, p)
	ch := hold(context.Background(), g, call("alice", "merge_pull_request", `{"number":7}`))
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)

	erin := providerToken(t, p, "erin")
	var list ListView
	if st := apiCall(t, srv, erin, "GET", "/api/v1/requests?status=pending", "", &list); st != 200 || list.Total != 1 {
		t.Fatalf("list with erin's token: %d %+v", st, list)
	}
	var v RequestView
	if st := apiCall(t, srv, erin, "POST", "/api/v1/requests/"+r.ID+"/approve", `{"for":"once"}`, &v); st != 200 {
		t.Fatalf("approve with erin's token: %d %+v", st, v)
	}
	want := principal.Ref(principal.Parts{Name: "erin@example.com", Issuer: p.Issuer, Subject: "sub-erin"})
	if v.Decision == nil || v.Decision.By != want || !strings.HasPrefix(v.Decision.From, "api ") {
		t.Fatalf("decision %+v, want by %q", v.Decision, want)
	}
	if h := recv(t, ch); h.err != nil || h.o.Answer != AnswerRun {
		t.Fatalf("held call: %+v %v", h.o, h.err)
	}

	// The static approver, on the same listener.
	ch = hold(context.Background(), g, call("alice", "close_issue", `{}`))
	r = pendingFor(t, g, "alice", "close_issue", 1)
	if st := apiCall(t, srv, carolToken, "POST", "/api/v1/requests/"+r.ID+"/deny", `{"reason":"no"}`, &v); st != 200 || v.Decision.By != "carol" {
		t.Fatalf("deny with carol's static token: %d %+v", st, v.Decision)
	}
	recv(t, ch)
}

// A verified token of someone in no approver group is answered 403,
// saying who it is and which groups would do; a token for another
// audience, an expired one and one of another provider are answered 401
// with the check that refused them. None decides.
func TestAdminAPIProviderRefusals(t *testing.T) {
	p := startProvider(t)
	other, err := testop.Start(jose.RS256)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SetClient("erin", testop.Client{Secret: "erin-secret", Subject: "sub-erin", Audience: []string{adminAudience},
		Claims: map[string]any{"email": "erin@example.com", "groups": []any{"approvers"}}})
	otherTok, err := other.Token(context.Background(), "erin")
	if err != nil {
		t.Fatal(err)
	}
	g := openGate(t, "", nil)
	srv := oauthAdminServer(t, g, p)
	ch := hold(context.Background(), g, call("alice", "merge_pull_request", `{}`))
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)

	for _, tc := range []struct {
		name, token string
		status      int
		says        []string
		challenge   string
	}{
		{"no approver group", providerToken(t, p, "frank"), 403,
			[]string{"frank@example.com", "sub-frank", "is not an approver", "groups claim lists none of the approver groups (approvers)"}, `error="insufficient_scope"`},
		{"another audience", providerToken(t, p, "erin-mcp"), 401,
			[]string{"wrong_audience", "https://mcp.example.com/", "audience " + adminAudience}, `error="invalid_token"`},
		{"expired", providerToken(t, p, "erin-expired"), 401, []string{"expired"}, `error="invalid_token"`},
		{"another provider", otherTok, 401, []string{"unknown_issuer", other.Issuer}, `error="invalid_token"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/api/v1/requests/" + r.ID + "/approve", "/api/v1/requests"} {
				method := "POST"
				if path == "/api/v1/requests" {
					method = "GET"
				}
				req, _ := http.NewRequest(method, srv.URL+path, nil)
				req.Header.Set("Authorization", "Bearer "+tc.token)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.status {
					t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, tc.status)
				}
				for _, s := range tc.says {
					if !strings.Contains(string(b), s) {
						t.Errorf("%s %s: body %s does not say %q", method, path, b, s)
					}
				}
				if c := resp.Header.Get("WWW-Authenticate"); !strings.Contains(c, tc.challenge) {
					t.Errorf("WWW-Authenticate %q, want %s", c, tc.challenge)
				}
			}
		})
	}
	still(t, g, r.ID, ch)
}

// An approver identified by the provider's issuer and subject cannot
// decide a request its own subject made through the MCP front, whatever
// name either token gives it; another approver then can.
func TestAdminAPIProviderSelfBySubject(t *testing.T) {
	p := startProvider(t)
	g := openGate(t, "", nil)
	srv := oauthAdminServer(t, g, p)
	// The agent's token named its principal "deploy-bot"; its subject is
	// erin's.
	requester := principal.Ref(principal.Parts{Name: "deploy-bot", Groups: []string{"dev"}, Issuer: p.Issuer, Subject: "sub-erin"})
	ch := hold(context.Background(), g, call(requester, "merge_pull_request", `{}`))
	r := pendingFor(t, g, requester, "merge_pull_request", 1)
	var e ErrorBody
	if st := apiCall(t, srv, providerToken(t, p, "erin"), "POST", "/api/v1/requests/"+r.ID+"/approve", `{"for":"once"}`, &e); st != 403 || !strings.Contains(e.Error, "cannot decide it") {
		t.Fatalf("erin approving her own subject's request: %d %+v", st, e)
	}
	still(t, g, r.ID, ch)
	var v RequestView
	if st := apiCall(t, srv, carolToken, "POST", "/api/v1/requests/"+r.ID+"/approve", `{"for":"once"}`, &v); st != 200 {
		t.Fatalf("carol approving: %d %+v", st, v)
	}
	recv(t, ch)
}

// signInServer serves g's admin listener with provider p's sign-in for
// the page: the gate's page URL is the server's own, which the provider
// redirects to.
func signInServer(t testing.TB, p *testop.Provider, mutate func(*Config)) (*Gate, *httptest.Server) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	pageURL := "http://" + srv.Listener.Addr().String()
	g := openGate(t, "", func(c *Config) {
		c.PageURL = pageURL
		if mutate != nil {
			mutate(c)
		}
	})
	p.SetClient("approvals-page", testop.Client{RedirectURIs: []string{pageURL + SignInCallback}})
	cfg := adminOAuthConfig(p, pageURL+"/")
	cfg.SignIn = &SignInConfig{ClientID: "approvals-page", Scopes: []string{"email"}}
	o, err := NewAdminOAuth(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := g.AdminHandler(AdminOptions{OAuth: o})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)
	return g, srv
}

var hiddenID = regexp.MustCompile(`name="id" value="([^"]+)"`)

// browse is an HTTP client with a cookie jar that follows redirects, as
// a browser without JavaScript does.
func browse(t testing.TB) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar}
}

// providerLogin follows the page's sign-in to the provider's login form
// and submits user's password; it returns the final answer.
func providerLogin(t *testing.T, c *http.Client, startURL, user, password string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(startURL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := hiddenID.FindSubmatch(b)
	if m == nil {
		t.Fatalf("no login form at %s: %d %s", resp.Request.URL, resp.StatusCode, b)
	}
	resp, err = c.PostForm(resp.Request.URL.String(), url.Values{"id": {string(m[1])}, "username": {user}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// The page's sign-in with the provider: the login page offers it (and no
// token form without static approvers); an approver comes back signed
// in, at the page they asked for, with an HttpOnly SameSite=Lax session
// cookie; someone in no approver group is refused with 403 and why; and a
// callback whose state this browser did not start is refused.
func TestPageSignInFlow(t *testing.T) {
	p := startProvider(t)
	g, srv := signInServer(t, p, nil)
	ch := hold(context.Background(), g, call("alice", "merge_pull_request", `{}`))
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)

	c := browse(t)
	resp, err := c.Get(srv.URL + "/approvals/" + r.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `id="sign-in-provider"`) || strings.Contains(string(b), `id="token"`) {
		t.Fatalf("the sign-in page: %s", b)
	}

	resp, body := providerLogin(t, c, srv.URL+"/signin?next="+url.QueryEscape("/approvals/"+r.ID), "erin", "erin-password")
	if resp.StatusCode != 200 || resp.Request.URL.String() != srv.URL+"/approvals/"+r.ID || !strings.Contains(body, "Signed in as <strong>erin@example.com</strong>") {
		t.Fatalf("after signing in: %d at %s: %s", resp.StatusCode, resp.Request.URL, body)
	}
	// The page decides as erin: a CSRF-checked form post.
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token on the page: %s", body)
	}
	resp, err = c.PostForm(srv.URL+"/approvals/"+r.ID, url.Values{"csrf": {m[1]}, "decision": {"once"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "approved once by erin@example.com") {
		t.Fatalf("after approving: %d %s", resp.StatusCode, b)
	}
	recv(t, ch)
	if got, _ := g.Get(r.ID); got.Decision.By != principal.Ref(principal.Parts{Name: "erin@example.com", Issuer: p.Issuer, Subject: "sub-erin"}) {
		t.Fatalf("decided by %q", got.Decision.By)
	}

	// frank signs in at the provider, and is no approver.
	resp, body = providerLogin(t, browse(t), srv.URL+"/signin", "frank", "frank-password")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "frank@example.com") || !strings.Contains(body, "is not an approver") {
		t.Fatalf("frank's sign-in: %d %s", resp.StatusCode, body)
	}

	// A callback this browser did not start: another browser's state.
	resp, err = noRedirect(browse(t)).Get(srv.URL + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	auth, _ := url.Parse(resp.Header.Get("Location"))
	resp, err = browse(t).Get(srv.URL + SignInCallback + "?code=x&state=" + url.QueryEscape(auth.Query().Get("state")))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "not started in this browser") {
		t.Fatalf("a foreign state: %d %s", resp.StatusCode, b)
	}
}

// The request to the provider is the authorization-code flow with PKCE
// (S256), a state and a nonce, for the admin audience; the state cookie
// is HttpOnly and SameSite=Lax; after the sign-in the session cookie is
// too.
func TestPageSignInRequest(t *testing.T) {
	p := startProvider(t)
	_, srv := signInServer(t, p, nil)
	c := noRedirect(browse(t))
	resp, err := c.Get(srv.URL + "/signin?next=/approvals")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	q := loc.Query()
	if loc.Scheme+"://"+loc.Host != p.Issuer || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" ||
		len(q.Get("code_challenge")) != 43 || len(q.Get("state")) != 64 || len(q.Get("nonce")) != 64 ||
		q.Get("client_id") != "approvals-page" || q.Get("redirect_uri") != srv.URL+SignInCallback || q.Get("resource") != srv.URL+"/" ||
		!strings.Contains(q.Get("scope"), "openid") {
		t.Fatalf("authorization request %s", loc)
	}
	sc := resp.Header.Get("Set-Cookie")
	// The cookie holds the sign-in sealed: neither its state nor its
	// nonce can be read from it.
	if !strings.HasPrefix(sc, signInCookie+"=") || strings.Contains(sc, q.Get("state")) || strings.Contains(sc, q.Get("nonce")) ||
		!strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Lax") {
		t.Fatalf("state cookie %q", sc)
	}
	// Through the provider's login, up to the callback's answer.
	resp, err = c.Get(loc.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	login, _ := url.Parse(p.Issuer)
	login = login.ResolveReference(&url.URL{Path: "/login"})
	form, err := c.Get(p.Issuer + resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(form.Body)
	form.Body.Close()
	m := hiddenID.FindSubmatch(b)
	if m == nil {
		t.Fatalf("login form: %s", b)
	}
	resp, err = c.PostForm(login.String(), url.Values{"id": {string(m[1])}, "username": {"erin"}, "password": {"erin-password"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The provider's callback, then its redirect to the page with a code.
	for resp.StatusCode/100 == 3 && !strings.HasPrefix(resp.Header.Get("Location"), srv.URL) {
		next, _ := resp.Request.URL.Parse(resp.Header.Get("Location"))
		if resp, err = c.Get(next.String()); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	back, _ := url.Parse(resp.Header.Get("Location"))
	if back.Query().Get("state") != q.Get("state") || back.Query().Get("code") == "" {
		t.Fatalf("the provider sent the browser to %s", back)
	}
	resp, err = c.Get(back.String())
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/approvals" {
		t.Fatalf("callback: %d %s %s", resp.StatusCode, resp.Header.Get("Location"), b)
	}
	var session string
	for _, v := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(v, sessionCookie+"=") {
			session = v
		}
	}
	if !strings.Contains(session, "HttpOnly") || !strings.Contains(session, "SameSite=Lax") || strings.Contains(session, "Secure") {
		t.Fatalf("session cookie %q (over plain HTTP: not Secure)", session)
	}
	// The code and the state were for one use: the same callback again
	// signs no one in.
	resp, err = c.Get(back.String())
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a second use of the callback answered %d (want 400): %s %s", resp.StatusCode, resp.Header.Get("Set-Cookie"), b)
	}
}

func noRedirect(c *http.Client) *http.Client {
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// A code is bound to the sign-in that asked for it: a browser's own
// later sign-in cannot use the code of an earlier one (its PKCE verifier
// is not the code's), and nothing signs in.
func TestPageSignInCodeOfAnotherSignIn(t *testing.T) {
	p := startProvider(t)
	_, srv := signInServer(t, p, nil)
	c := noRedirect(browse(t))
	// The first sign-in, through the provider, up to its way back.
	follow := func(u string) *http.Response {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := follow(srv.URL + "/signin")
	resp = follow(resp.Header.Get("Location"))
	loc, _ := resp.Request.URL.Parse(resp.Header.Get("Location"))
	form, err := c.Get(loc.String())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(form.Body)
	form.Body.Close()
	m := hiddenID.FindSubmatch(b)
	if m == nil {
		t.Fatalf("login form: %s", b)
	}
	if resp, err = c.PostForm(p.Issuer+"/login", url.Values{"id": {string(m[1])}, "username": {"erin"}, "password": {"erin-password"}}); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for resp.StatusCode/100 == 3 && !strings.HasPrefix(resp.Header.Get("Location"), srv.URL) {
		next, _ := resp.Request.URL.Parse(resp.Header.Get("Location"))
		resp = follow(next.String())
	}
	first, _ := url.Parse(resp.Header.Get("Location"))
	code := first.Query().Get("code")
	if code == "" {
		t.Fatalf("no code in %s", first)
	}
	// A second sign-in in the same browser; its callback with the first
	// one's code.
	second, _ := url.Parse(follow(srv.URL + "/signin").Header.Get("Location"))
	resp, err = c.Get(srv.URL + SignInCallback + "?code=" + url.QueryEscape(code) + "&state=" + url.QueryEscape(second.Query().Get("state")))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "did not give tokens for the code") {
		t.Fatalf("the first sign-in's code in the second's callback: %d %s", resp.StatusCode, b)
	}
	for _, v := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(v, sessionCookie+"=") {
			t.Fatalf("a session was started: %s", v)
		}
	}
}

// The gateway keeps nothing of a sign-in in progress: any number may be
// started from one address (a proxy's, say) and the last still signs in.
// The browser's sealed cookie is the sign-in: one changed, sealed by
// another gateway process or past its ten minutes signs nothing in.
func TestPageSignInsKeptByTheBrowser(t *testing.T) {
	p := startProvider(t)
	clk := newClock()
	_, srv := signInServer(t, p, func(c *Config) { c.Now = clk.Now })
	for i := range 40 {
		resp, err := noRedirect(browse(t)).Get(srv.URL + "/signin")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in %d started from one address: %d", i+1, resp.StatusCode)
		}
	}
	if resp, body := providerLogin(t, browse(t), srv.URL+"/signin", "erin", "erin-password"); resp.StatusCode != 200 || resp.Request.URL.Path != "/approvals" {
		t.Fatalf("a sign-in after 40 others: %d at %s %s", resp.StatusCode, resp.Request.URL.Path, body)
	}

	// callback starts a sign-in in a browser of its own, then comes back
	// with its state and the cookie mangled.
	callback := func(mangle func(string) string, after time.Duration) (int, string) {
		t.Helper()
		resp, err := noRedirect(browse(t)).Get(srv.URL + "/signin")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		auth, _ := url.Parse(resp.Header.Get("Location"))
		var cookie string
		for _, c := range resp.Cookies() {
			if c.Name == signInCookie {
				cookie = c.Value
			}
		}
		if cookie == "" || strings.Contains(cookie, auth.Query().Get("state")) {
			t.Fatalf("sign-in cookie %q, state %q", cookie, auth.Query().Get("state"))
		}
		clk.Add(after)
		req, _ := http.NewRequest("GET", srv.URL+SignInCallback+"?code=x&state="+url.QueryEscape(auth.Query().Get("state")), nil)
		req.AddCookie(&http.Cookie{Name: signInCookie, Value: mangle(cookie)})
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	same := func(v string) string { return v }
	flipped := func(v string) string {
		b := []byte(v)
		b[len(b)/2] ^= 1
		return string(b)
	}
	other := newSignInSeal()
	foreign := func(string) string {
		return other.seal(&pendingSignIn{State: "x", Expires: clk.Now().Add(time.Hour)})
	}
	for name, mangle := range map[string]func(string) string{"changed": flipped, "another process's": foreign} {
		if st, body := callback(mangle, 0); st != http.StatusBadRequest || !strings.Contains(body, "not started in this browser") {
			t.Errorf("a %s cookie: %d %s", name, st, body)
		}
	}
	if st, body := callback(same, signInTTL); st != http.StatusBadRequest || !strings.Contains(body, "took too long") {
		t.Errorf("a sign-in past its time: %d %s", st, body)
	}
	// In time, the cookie as sealed reaches the code exchange, which the
	// provider refuses for the made-up code.
	if st, body := callback(same, signInTTL-time.Second); st != http.StatusBadGateway || !strings.Contains(body, "did not give tokens for the code") {
		t.Errorf("a sign-in in time: %d %s", st, body)
	}
}

// A session of the provider's sign-in ends when its access token does,
// well before the sign-in's 12 hours; and the page shows an approver the
// request its own subject made as theirs, without decision buttons.
func TestPageSignInSession(t *testing.T) {
	p := startProvider(t)
	p.SetUser("erin", testop.User{Password: "erin-password", Subject: "sub-erin", Lifetime: 10 * time.Minute,
		Claims: map[string]any{"email": "erin@example.com", "groups": []any{"approvers"}}})
	clk := newClock()
	g, srv := signInServer(t, p, func(c *Config) { c.Now = clk.Now })
	own := principal.Ref(principal.Parts{Name: "deploy-bot", Issuer: p.Issuer, Subject: "sub-erin"})
	ch := hold(context.Background(), g, call(own, "merge_pull_request", `{}`))
	r := pendingFor(t, g, own, "merge_pull_request", 1)

	c := browse(t)
	resp, body := providerLogin(t, c, srv.URL+"/signin?next="+url.QueryEscape("/approvals/"+r.ID), "erin", "erin-password")
	if resp.StatusCode != 200 || !strings.Contains(body, "You made this request") || strings.Contains(body, `id="`+r.ID+`-once"`) {
		t.Fatalf("erin's own subject's request: %d %s", resp.StatusCode, body)
	}
	page := func() string {
		t.Helper()
		resp, err := c.Get(srv.URL + "/approvals")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Request.URL.Path
	}
	clk.Add(9 * time.Minute)
	if at := page(); at != "/approvals" {
		t.Fatalf("signed out before the token expired: at %s", at)
	}
	clk.Add(2 * time.Minute)
	if at := page(); at != "/login" {
		t.Fatalf("still signed in after the token expired: at %s", at)
	}
	still(t, g, r.ID, ch)
}

// The sign-in cookie holds the page to return to: at its longest, and made
// of the characters that cost the most to encode, it stays within the
// 4 KiB a browser keeps of a cookie, and the sign-in ends there.
func TestSignInCookieFits(t *testing.T) {
	p := startProvider(t)
	_, srv := signInServer(t, p, nil)
	const prefix = "/approvals?q="
	for _, c := range []string{"&", "<", `"`, `\`, "%"} {
		next := prefix + strings.Repeat(c, maxNext-len(prefix))
		resp, err := noRedirect(browse(t)).Get(srv.URL + "/signin?next=" + url.QueryEscape(next))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var header string
		for _, h := range resp.Header.Values("Set-Cookie") {
			if strings.HasPrefix(h, signInCookie+"=") {
				header = h
			}
		}
		name, value, _ := strings.Cut(strings.SplitN(header, ";", 2)[0], "=")
		if resp.StatusCode != http.StatusSeeOther || value == "" || len(name)+len(value) > 4096 {
			t.Fatalf("next of %d %q: %d, cookie of %d bytes", len(next), c, resp.StatusCode, len(name)+len(value))
		}
	}
	next := prefix + strings.Repeat("&", maxNext-len(prefix))
	resp, body := providerLogin(t, browse(t), srv.URL+"/signin?next="+url.QueryEscape(next), "erin", "erin-password")
	if resp.StatusCode != 200 || resp.Request.URL.RequestURI() != next {
		t.Fatalf("signed in at %d %s, want %s: %s", resp.StatusCode, resp.Request.URL.RequestURI(), next, body)
	}
}
