package approval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/policyc/policyc/internal/authlimit"
)

func hashOf(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// Tokens of the admin tests: carol and dave approve; alice is an MCP
// client, and also has an approver token of her own (so she can try to
// approve her own requests).
const (
	carolToken  = "carol-approver-token"
	daveToken   = "dave-approver-token"
	aliceAdmin  = "alice-approver-token"
	aliceClient = "alice-mcp-token"
)

func adminServer(t testing.TB, g *Gate) *httptest.Server {
	t.Helper()
	h, err := g.AdminHandler(AdminOptions{
		Approvers:    map[string]string{hashOf(carolToken): "carol", hashOf(daveToken): "dave", hashOf(aliceAdmin): "alice"},
		ClientTokens: map[string]string{hashOf(aliceClient): "alice"},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// apiCall calls the admin API and decodes the answer into out.
func apiCall(t *testing.T, srv *httptest.Server, token, method, path, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

func TestAdminAPI(t *testing.T) {
	g := openGate(t, "", func(c *Config) { c.Servers = map[string]ServerOptions{"github": {MaxDuration: ForWorkday}} })
	srv := adminServer(t, g)
	ch := hold(context.Background(), g, call("alice", "merge_pull_request", `{"number":7}`))
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)

	var list struct{ Requests []RequestView }
	if st := apiCall(t, srv, carolToken, "GET", "/api/v1/requests?status=pending", "", &list); st != 200 || len(list.Requests) != 1 {
		t.Fatalf("list: %d %+v", st, list)
	}
	v := list.Requests[0]
	if v.ID != r.ID || v.Waiting != 1 || v.Client != "test-agent 1.0" || v.Origin != "policy.cue:7" || strings.Join(v.Durations, ",") != "once,1h,8h" || v.URL == "" {
		t.Fatalf("list entry %+v", v)
	}
	var show RequestView
	if st := apiCall(t, srv, carolToken, "GET", "/api/v1/requests/"+r.ID, "", &show); st != 200 || show.ID != r.ID || show.Preview == nil {
		t.Fatalf("show: %d %+v", st, show)
	}

	var e ErrorBody
	for _, tc := range []struct {
		token, method, path, body string
		status                    int
		want                      string
	}{
		{"", "GET", "/api/v1/requests", "", 401, "no token"},
		{"nonsense", "GET", "/api/v1/requests", "", 401, "unknown token"},
		{aliceClient, "GET", "/api/v1/requests", "", 401, "MCP client token"},
		{aliceClient, "POST", "/api/v1/requests/" + r.ID + "/approve", `{}`, 401, "MCP client token"},
		{carolToken, "GET", "/api/v1/requests/apr-aaaaaaaaaaaaaaaa", "", 404, "no approval request"},
		{carolToken, "POST", "/api/v1/requests/apr-aaaaaaaaaaaaaaaa/approve", `{}`, 404, "no approval request"},
		{carolToken, "GET", "/api/v1/requests?status=weird", "", 400, "use pending"},
		{carolToken, "POST", "/api/v1/requests/" + r.ID + "/approve", `{"for":"7d"}`, 400, "at most 8h"},
		{carolToken, "POST", "/api/v1/requests/" + r.ID + "/approve", `{"for":"once","extra":1}`, 400, `unknown key "extra": the keys are "for" and "reason"`},
		{carolToken, "POST", "/api/v1/requests/" + r.ID + "/approve", `[1]`, 400, "not a decision"},
		{carolToken, "POST", "/api/v1/requests/" + r.ID + "/deny", `{"for":"1h"}`, 400, "no duration"},
		{aliceAdmin, "POST", "/api/v1/requests/" + r.ID + "/approve", `{"for":"once"}`, 403, "cannot decide it"},
		{carolToken, "POST", "/api/v1/requests/" + r.ID + "/revoke", ``, 409, "is pending"},
		{carolToken, "GET", "/api/v1/nothing", "", 404, "no such admin API endpoint"},
	} {
		e = ErrorBody{}
		st := apiCall(t, srv, tc.token, tc.method, tc.path, tc.body, &e)
		if st != tc.status || e.Status != tc.status || !strings.Contains(e.Error, tc.want) {
			t.Errorf("%s %s (%s): %d %q, want %d %q", tc.method, tc.path, tc.body, st, e.Error, tc.status, tc.want)
		}
	}
	still(t, g, r.ID, ch)

	var decided RequestView
	if st := apiCall(t, srv, carolToken, "POST", "/api/v1/requests/"+r.ID+"/approve", `{"for":"8h","reason":"release day"}`, &decided); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	if decided.Status != Approved || decided.Decision.By != "carol" || !strings.HasPrefix(decided.Decision.From, "api 127.0.0.1:") || !decided.Active {
		t.Fatalf("approved: %+v %+v", decided, decided.Decision)
	}
	if h := recv(t, ch); h.o.Answer != AnswerRun {
		t.Fatal(h.o.Answer)
	}
	e = ErrorBody{}
	if st := apiCall(t, srv, daveToken, "POST", "/api/v1/requests/"+r.ID+"/deny", `{}`, &e); st != 409 || !strings.Contains(e.Error, "already approved (8h) by carol") {
		t.Fatalf("deny after approve: %d %q", st, e.Error)
	}
	var active struct{ Requests []RequestView }
	apiCall(t, srv, carolToken, "GET", "/api/v1/requests?active=true", "", &active)
	if len(active.Requests) != 1 || active.Requests[0].ID != r.ID {
		t.Fatalf("active: %+v", active)
	}
	var revoked RequestView
	if st := apiCall(t, srv, daveToken, "POST", "/api/v1/requests/"+r.ID+"/revoke", "", &revoked); st != 200 || revoked.Decision.Revoked.By != "dave" || revoked.Active {
		t.Fatalf("revoke: %d %+v", st, revoked.Decision)
	}
	e = ErrorBody{}
	if st := apiCall(t, srv, daveToken, "POST", "/api/v1/requests/"+r.ID+"/revoke", "", &e); st != 409 {
		t.Fatalf("second revoke: %d %q", st, e.Error)
	}

	// Expired: 409. The call left long before; the request outlived it
	// until its own time was up.
	clk := newClock()
	g2 := openGate(t, "", func(c *Config) { c.Now = clk.Now })
	srv2 := adminServer(t, g2)
	ctx, cancel := context.WithCancel(context.Background())
	gone := hold(ctx, g2, call("alice", "delete_branch", `{}`))
	r2 := pendingFor(t, g2, "alice", "delete_branch", 1)
	cancel()
	if h := recv(t, gone); h.o.Answer != AnswerPending {
		t.Fatalf("the call that left: %v", h.o.Answer)
	}
	clk.Add(11 * time.Second)
	e = ErrorBody{}
	if st := apiCall(t, srv2, carolToken, "POST", "/api/v1/requests/"+r2.ID+"/approve", `{}`, &e); st != 409 || !strings.Contains(e.Error, "expired") {
		t.Fatalf("approve expired: %d %q", st, e.Error)
	}
}

// A body is a decision only when it is sent as JSON: without a
// Content-Type, or with another one, it is refused (415). No body needs none.
func TestAdminAPIContentType(t *testing.T) {
	g := openGate(t, "", nil)
	srv := adminServer(t, g)
	ch := hold(context.Background(), g, call("alice", "merge_pull_request", `{"number":7}`))
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)
	post := func(contentType, body string) (int, ErrorBody) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/api/v1/requests/"+r.ID+"/deny", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+carolToken)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e ErrorBody
		json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, e
	}
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/jsonx", "application/json-seq"} {
		if st, e := post(ct, `{"reason":"no"}`); st != http.StatusUnsupportedMediaType || e.Status != st || !strings.Contains(e.Error, "Content-Type: application/json") {
			t.Errorf("a body sent with Content-Type %q: %d %q, want 415", ct, st, e.Error)
		}
	}
	still(t, g, r.ID, ch)
	if st, e := post("application/json; charset=utf-8", `{"reason":"no"}`); st != 200 {
		t.Fatalf("a JSON body: %d %q", st, e.Error)
	}
	if h := recv(t, ch); h.o.Answer != AnswerDenied {
		t.Fatal(h.o.Answer)
	}
}

func TestAdminTokens(t *testing.T) {
	g := openGate(t, "", nil)
	if _, err := g.AdminHandler(AdminOptions{}); err == nil || !strings.Contains(err.Error(), "no approver tokens") {
		t.Fatalf("no approvers: %v", err)
	}
	if _, err := g.AdminHandler(AdminOptions{Approvers: map[string]string{"xyz": "carol"}}); err == nil || !strings.Contains(err.Error(), "not a hex SHA-256") {
		t.Fatalf("bad hash: %v", err)
	}
	_, err := g.AdminHandler(AdminOptions{Approvers: map[string]string{hashOf("t"): "carol"}, ClientTokens: map[string]string{hashOf("t"): "alice"}})
	if err == nil || !strings.Contains(err.Error(), "both an MCP client token and approver carol's") {
		t.Fatalf("shared token: %v", err)
	}
}

// browser is a cookie-keeping HTTP client that does not follow redirects.
type browser struct {
	t      *testing.T
	srv    *httptest.Server
	client *http.Client
}

func newBrowser(t *testing.T, srv *httptest.Server) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, srv: srv, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, path string, form url.Values, header map[string]string) (int, string, http.Header) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, b.srv.URL+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out), resp.Header
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func TestApprovalsPage(t *testing.T) {
	g := openGate(t, "", nil)
	srv := adminServer(t, g)
	ch := hold(context.Background(), g, call("alice", "merge_pull_request", `{"number":7,"title":"<script>alert(1)</script>"}`))
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)
	b := newBrowser(t, srv)

	// A link to one request, followed before signing in, lands on it
	// after.
	st, _, h := b.do("GET", "/approvals/"+r.ID, nil, nil)
	if st != http.StatusSeeOther || h.Get("Location") != "/login?next=%2Fapprovals%2F"+r.ID {
		t.Fatalf("unsigned: %d %s", st, h.Get("Location"))
	}
	st, body, _ := b.do("POST", "/login", url.Values{"token": {aliceClient}, "next": {"/approvals/" + r.ID}}, nil)
	if st != 401 || !strings.Contains(body, "MCP client token") {
		t.Fatalf("MCP token on the page: %d", st)
	}
	st, _, _ = b.do("POST", "/login", url.Values{"token": {carolToken}, "next": {"/approvals/" + r.ID}}, map[string]string{"Origin": "https://evil.example"})
	if st != 403 {
		t.Fatalf("cross-site sign-in: %d", st)
	}
	st, _, h = b.do("POST", "/login", url.Values{"token": {carolToken}, "next": {"/approvals/" + r.ID}}, nil)
	if st != http.StatusSeeOther || h.Get("Location") != "/approvals/"+r.ID {
		t.Fatalf("sign-in: %d %s", st, h.Get("Location"))
	}
	if c := h.Get("Set-Cookie"); !strings.Contains(c, "HttpOnly") || !strings.Contains(c, "SameSite=Lax") {
		t.Fatalf("cookie %q", c)
	}
	st, body, h = b.do("GET", "/approvals/"+r.ID, nil, nil)
	if st != 200 {
		t.Fatalf("request page: %d", st)
	}
	for _, want := range []string{`id="` + r.ID + `"`, "merge_pull_request", "alice", "test-agent 1.0", "policy.cue:7", "&lt;script&gt;", r.ID + "-once", r.ID + "-7d", r.ID + "-deny"} {
		if !strings.Contains(body, want) {
			t.Errorf("request page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>") {
		t.Fatal("the preview is not escaped")
	}
	if strings.Contains(body, "preview is incomplete") {
		t.Error("a whole preview is called incomplete")
	}
	if h.Get("X-Frame-Options") != "DENY" || !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("headers %v", h)
	}
	csrf := csrfField.FindStringSubmatch(body)[1]

	// Forms without the CSRF token, or from another site, are refused.
	for _, tc := range []struct {
		form   url.Values
		header map[string]string
	}{
		{url.Values{"decision": {"once"}}, nil},
		{url.Values{"decision": {"once"}, "csrf": {strings.Repeat("0", 64)}}, nil},
		{url.Values{"decision": {"once"}, "csrf": {csrf}}, map[string]string{"Origin": "https://evil.example"}},
		{url.Values{"decision": {"once"}, "csrf": {csrf}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
	} {
		if st, _, _ := b.do("POST", "/approvals/"+r.ID, tc.form, tc.header); st != 403 {
			t.Fatalf("forged form %v %v: %d", tc.form, tc.header, st)
		}
	}
	// A form that names no decision (no button's value) decides nothing.
	if st, body, _ := b.do("POST", "/approvals/"+r.ID, url.Values{"csrf": {csrf}, "reason": {"looks fine"}}, nil); st != 400 || !strings.Contains(body, "nothing was decided") {
		t.Fatalf("form without a decision: %d", st)
	}
	// The page's note says what a timed approval lets run.
	if !strings.Contains(body, "Approving every call for a time lets alice run merge_pull_request with any arguments") {
		t.Error("request page does not say a timed approval covers any arguments")
	}
	// Another browser, not signed in, cannot decide.
	if st, _, _ := newBrowser(t, srv).do("POST", "/approvals/"+r.ID, url.Values{"decision": {"once"}, "csrf": {csrf}}, nil); st != 401 {
		t.Fatalf("unsigned decision: %d", st)
	}
	still(t, g, r.ID, ch)

	// The list shows it with its buttons.
	st, body, _ = b.do("GET", "/approvals", nil, nil)
	if st != 200 || !strings.Contains(body, "Waiting for a decision (1)") || !strings.Contains(body, `href="/approvals/`+r.ID+`"`) {
		t.Fatalf("list page: %d\n%s", st, body)
	}

	st, _, h = b.do("POST", "/approvals/"+r.ID, url.Values{"decision": {"1h"}, "csrf": {csrf}}, map[string]string{"Origin": srv.URL})
	if st != http.StatusSeeOther || h.Get("Location") != "/approvals/"+r.ID {
		t.Fatalf("decide: %d %s", st, h.Get("Location"))
	}
	if h := recv(t, ch); h.o.Answer != AnswerRun || h.o.By != "carol" || h.o.For != "1h" {
		t.Fatalf("held call: %+v", h.o)
	}
	got, _ := g.Get(r.ID)
	if !strings.HasPrefix(got.Decision.From, "page 127.0.0.1:") {
		t.Fatalf("from %q", got.Decision.From)
	}
	// Deciding again: 409, shown on the page.
	st, body, _ = b.do("POST", "/approvals/"+r.ID, url.Values{"decision": {"deny"}, "csrf": {csrf}}, nil)
	if st != 409 || !strings.Contains(body, "already approved (1h) by carol") {
		t.Fatalf("decide twice: %d", st)
	}
	// Revoke from the page.
	if st, _, _ := b.do("POST", "/approvals/"+r.ID+"/revoke", url.Values{"csrf": {csrf}}, nil); st != http.StatusSeeOther {
		t.Fatalf("revoke: %d", st)
	}
	if got, _ := g.Get(r.ID); got.Decision.Revoked == nil || got.Decision.Revoked.By != "carol" {
		t.Fatalf("not revoked: %+v", got.Decision)
	}
	if st, body, _ := b.do("GET", "/approvals/apr-aaaaaaaaaaaaaaaa", nil, nil); st != 404 || !strings.Contains(body, "no approval request") && !strings.Contains(body, "There is no approval request") {
		t.Fatalf("unknown request page: %d", st)
	}
	// Alice, signed in as an approver, sees her own request without
	// buttons, and cannot decide it by posting the form anyway.
	ch2 := hold(context.Background(), g, call("alice", "delete_branch", `{}`))
	r2 := pendingFor(t, g, "alice", "delete_branch", 1)
	a := newBrowser(t, srv)
	a.do("POST", "/login", url.Values{"token": {aliceAdmin}}, nil)
	_, body, _ = a.do("GET", "/approvals/"+r2.ID, nil, nil)
	if strings.Contains(body, r2.ID+"-once") || !strings.Contains(body, "cannot decide it") {
		t.Fatal("own request offered for decision")
	}
	acsrf := csrfField.FindStringSubmatch(body)[1]
	if st, _, _ := a.do("POST", "/approvals/"+r2.ID, url.Values{"decision": {"once"}, "csrf": {acsrf}}, nil); st != 403 {
		t.Fatalf("self-approval on the page: %d", st)
	}
	still(t, g, r2.ID, ch2)
	// Signing out ends the session.
	a.do("POST", "/logout", url.Values{"csrf": {acsrf}}, nil)
	if st, _, _ := a.do("GET", "/approvals", nil, nil); st != http.StatusSeeOther {
		t.Fatalf("after sign-out: %d", st)
	}
	mustDecide(t, g, r2.ID, VerdictDeny, "")
	recv(t, ch2)
	// An open redirect through next is not possible.
	for _, next := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example", "/\t/evil.example/", "/\n/evil.example", "/\r\n/evil.example", " /approvals", "/approvals\x00", "/approvals/\u202e", "javascript:alert(1)", "", "/approvals?x=" + strings.Repeat("a", maxNext)} {
		_, _, h := newBrowser(t, srv).do("POST", "/login", url.Values{"token": {carolToken}, "next": {next}}, nil)
		if h.Get("Location") != "/approvals" {
			t.Fatalf("next %q redirected to %q", next, h.Get("Location"))
		}
		_, body, _ := newBrowser(t, srv).do("GET", "/login?next="+url.QueryEscape(next), nil, nil)
		if !strings.Contains(body, `name="next" value="/approvals"`) {
			t.Fatalf("the sign-in form for next %q does not go back to /approvals:\n%s", next, body)
		}
	}
	_, _, h = newBrowser(t, srv).do("POST", "/login", url.Values{"token": {carolToken}, "next": {"/approvals?after=abc%2F"}}, nil)
	if h.Get("Location") != "/approvals?after=abc%2F" {
		t.Fatalf("a local next redirected to %q", h.Get("Location"))
	}
	// The longest next that fits the sign-in cookie is kept.
	longest := "/approvals?x=" + strings.Repeat("a", maxNext-len("/approvals?x="))
	_, _, h = newBrowser(t, srv).do("POST", "/login", url.Values{"token": {carolToken}, "next": {longest}}, nil)
	if h.Get("Location") != longest {
		t.Fatalf("a next of %d bytes redirected to %q", len(longest), h.Get("Location"))
	}
}

// A preview that leaves keys or values out says so, on the page and in
// the request's JSON (Omitted, NotShown), so that the approver does not
// take it for the whole call.
func TestPageIncompletePreview(t *testing.T) {
	g := openGate(t, "", nil)
	srv := adminServer(t, g)
	args := map[string]string{"command": "rm -rf /srv"}
	for i := range 60 {
		args[fmt.Sprintf("a%02d", i)] = strings.Repeat("x", 80)
	}
	b, _ := json.Marshal(args)
	hold(context.Background(), g, call("alice", "merge_pull_request", string(b)))
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)
	if r.Preview == nil || !r.Preview.Incomplete() {
		t.Fatalf("preview %+v is not incomplete", r.Preview)
	}
	br := newBrowser(t, srv)
	if st, _, _ := br.do("POST", "/login", url.Values{"token": {carolToken}}, nil); st != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", st)
	}
	st, body, _ := br.do("GET", "/approvals/"+r.ID, nil, nil)
	if st != 200 || !strings.Contains(body, IncompleteNote) || !strings.Contains(body, NotShown) {
		t.Fatalf("request page (%d) does not say the preview is incomplete:\n%s", st, body)
	}
}

// Whatever body an approve call carries, a request is approved only by an
// answer of 200, and a body the API refuses changes nothing.
func FuzzAdminDecisionBody(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"for":"once"}`, `{"for":"7d","reason":"x"}`, `{"for":1}`, `[]`, `{"for":"once"} {}`, `{"extra":true}`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		// A gate of its own for each input: one shared would keep every
		// earlier input's request, each input slower than the last and
		// its outcome depending on them.
		g := openGate(t, "", nil)
		srv := adminServer(t, g)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := hold(ctx, g, call("alice", "fuzzed", `{"n":1}`))
		r := pendingFor(t, g, "alice", "fuzzed", 1)
		st := apiCall(t, srv, carolToken, "POST", "/api/v1/requests/"+r.ID+"/approve", body, nil)
		got, _ := g.Get(r.ID)
		switch {
		case st == 200 && got.Status != Approved:
			t.Fatalf("200 for %q but the request is %s", body, got.Status)
		case st != 200 && got.Status != Pending:
			t.Fatalf("%d for %q but the request is %s", st, body, got.Status)
		case st >= 500:
			t.Fatalf("%d for %q", st, body)
		}
		if st != 200 {
			cancel()
		}
		<-ch
	})
}

// A decision body is read strictly: a key in another case, a key given
// twice, an unknown key, a value of the wrong type and data after the
// object are each refused (400) with the key named, and the request stays
// pending; encoding/json would have taken {"FOR":"1h"} for an hour and
// {"for":"once","for":"7d"} for seven days.
func TestAdminDecisionBodyStrict(t *testing.T) {
	g := openGate(t, "", nil)
	srv := adminServer(t, g)
	ch := hold(context.Background(), g, call("alice", "merge_pull_request", `{"number":7}`))
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)
	const sendDecision = ` (send {"for": "once", "reason": "..."})`
	for _, tc := range []struct{ path, body, want string }{
		{"approve", `{"FOR":"1h"}`, `the body is not a decision: key "FOR": keys are case-sensitive; write "for"` + sendDecision},
		{"approve", `{"For":"1h","reason":"x"}`, `key "For": keys are case-sensitive; write "for"`},
		{"deny", `{"REASON":"x"}`, `key "REASON": keys are case-sensitive; write "reason"`},
		{"approve", `{"for":"once","for":"7d"}`, `the body is not a decision: key "for" is given twice: give each key once` + sendDecision},
		{"approve", `{"reason":"a","for":"1h","reason":"b"}`, `key "reason" is given twice`},
		{"approve", `{"for":"once"} {"for":"7d"}`, `there is data after the JSON object: send one object`},
		{"approve", `{"for":"once"}x`, `there is data after the JSON object`},
		{"approve", `{"for":"once","until":"never"}`, `unknown key "until": the keys are "for" and "reason"`},
		{"approve", `{"for":7}`, `key "for" must be a string`},
		{"approve", `{"for":"once"`, `the JSON ends early`},
		{"approve", `"once"`, `it is not a JSON object`},
		{"approve", `{"\u001b[2K":1}`, `unknown key "\x1b[2K"`},
		{"revoke", `{"for":"once"}`, `the body is not a revocation: unknown key "for": it takes no keys (send no body)`},
	} {
		var e ErrorBody
		st := apiCall(t, srv, carolToken, "POST", "/api/v1/requests/"+r.ID+"/"+tc.path, tc.body, &e)
		if st != 400 || e.Status != 400 || !strings.Contains(e.Error, tc.want) {
			t.Errorf("%s %s: %d %q, want 400 %q", tc.path, tc.body, st, e.Error, tc.want)
		}
		still(t, g, r.ID, ch)
	}
	var v RequestView
	if st := apiCall(t, srv, carolToken, "POST", "/api/v1/requests/"+r.ID+"/approve", `{"for": "once", "reason": "fine"}`, &v); st != 200 || v.Decision.For != ForOnce || v.Decision.Reason != "fine" {
		t.Fatalf("a good body: %d %+v", st, v.Decision)
	}
	recv(t, ch)
}

// holdMany holds one call for each of n principals and returns their
// requests, oldest first. Their creation times are distinct.
func holdMany(t *testing.T, g *Gate, n int) []Request {
	t.Helper()
	var out []Request
	for i := range n {
		p := fmt.Sprintf("agent%03d", i)
		hold(t.Context(), g, call(p, "merge_pull_request", `{"number":7}`))
		out = append(out, pendingFor(t, g, p, "merge_pull_request", 1))
	}
	return out
}

// The admin API answers a list a page at a time: 50 by default, limit up
// to 500, and a cursor for the next page; each request is on exactly one
// page, newest first, and total counts them all.
func TestAdminListPages(t *testing.T) {
	g := openGate(t, "", nil)
	srv := adminServer(t, g)
	reqs := holdMany(t, g, 53)
	var ids []string
	for _, r := range reqs {
		ids = append([]string{r.ID}, ids...) // newest first
	}

	var l ListView
	if st := apiCall(t, srv, carolToken, "GET", "/api/v1/requests?status=pending", "", &l); st != 200 || len(l.Requests) != DefaultPageSize || l.Total != 53 || l.Next == "" {
		t.Fatalf("the first page: %d, %d requests of %d, next %q", st, len(l.Requests), l.Total, l.Next)
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatal("the pages do not end")
		}
		path := "/api/v1/requests?status=pending&limit=10"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		l = ListView{}
		if st := apiCall(t, srv, carolToken, "GET", path, "", &l); st != 200 || l.Total != 53 {
			t.Fatalf("%s: %d, total %d", path, st, l.Total)
		}
		for _, v := range l.Requests {
			got = append(got, v.ID)
		}
		if l.Next == "" {
			if len(l.Requests) != 3 {
				t.Fatalf("the last page has %d requests, want 3", len(l.Requests))
			}
			break
		}
		cursor = l.Next
	}
	if strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Fatalf("the pages hold\n%v\nwant, newest first,\n%v", got, ids)
	}

	// A request that is decided meanwhile shifts no page: the cursor names
	// the last request shown, not a position.
	l = ListView{}
	apiCall(t, srv, carolToken, "GET", "/api/v1/requests?status=pending&limit=5", "", &l)
	mustDecide(t, g, l.Requests[1].ID, VerdictDeny, "")
	next := ListView{}
	apiCall(t, srv, carolToken, "GET", "/api/v1/requests?status=pending&limit=5&cursor="+url.QueryEscape(l.Next), "", &next)
	if next.Requests[0].ID != ids[5] || next.Total != 52 {
		t.Fatalf("after a decision the next page starts at %s (total %d), want %s", next.Requests[0].ID, next.Total, ids[5])
	}

	for _, tc := range []struct{ query, want string }{
		{"limit=0", "limit \"0\": use a number from 1 to 500"},
		{"limit=501", "limit \"501\": use a number from 1 to 500"},
		{"limit=ten", "limit \"ten\""},
		{"cursor=bm90LWEtY3Vyc29y", "cursor \"bm90LWEtY3Vyc29y\" is not one a list answered: start again without it"},
		{"cursor=%1B%5B2K", `cursor "\x1b[2K" is not one`},
		{"Status=pending", `unknown query parameter "Status": a list takes status, active, limit, cursor`},
		{"status=pending&status=all", `query parameter "status" is given 2 times: give it once`},
	} {
		var e ErrorBody
		if st := apiCall(t, srv, carolToken, "GET", "/api/v1/requests?"+tc.query, "", &e); st != 400 || !strings.Contains(e.Error, tc.want) {
			t.Errorf("?%s: %d %q, want 400 %q", tc.query, st, e.Error, tc.want)
		}
	}
}

// The approvals page shows 50 pending requests at a time, oldest first
// (the first to expire), with a link to the next 50: a flood of requests
// makes more pages, not a longer one.
func TestApprovalsPagePages(t *testing.T) {
	g := openGate(t, "", nil)
	srv := adminServer(t, g)
	reqs := holdMany(t, g, 55)
	b := newBrowser(t, srv)
	b.do("POST", "/login", url.Values{"token": {carolToken}}, nil)
	card := regexp.MustCompile(`<article class="request pending" id="(apr-[a-z0-9]+)"`)
	next := regexp.MustCompile(`<a href="/approvals\?after=([^"]+)" id="pending-next">Next 50 →</a>`)

	st, body, _ := b.do("GET", "/approvals", nil, nil)
	cards := card.FindAllStringSubmatch(body, -1)
	m := next.FindStringSubmatch(body)
	if st != 200 || len(cards) != 50 || m == nil || !strings.Contains(body, "Waiting for a decision (55)") || !strings.Contains(body, "Showing 1–50 of 55, oldest first") {
		t.Fatalf("the first page: %d, %d cards, next %v\n%s", st, len(cards), m, body)
	}
	if cards[0][1] != reqs[0].ID || cards[49][1] != reqs[49].ID {
		t.Fatalf("the first page runs from %s to %s, want %s to %s", cards[0][1], cards[49][1], reqs[0].ID, reqs[49].ID)
	}
	cursor, _ := url.QueryUnescape(m[1])
	st, body, _ = b.do("GET", "/approvals?after="+url.QueryEscape(cursor), nil, nil)
	cards = card.FindAllStringSubmatch(body, -1)
	if st != 200 || len(cards) != 5 || cards[0][1] != reqs[50].ID || next.MatchString(body) || !strings.Contains(body, "Showing 51–55 of 55, oldest first") {
		t.Fatalf("the second page: %d, %d cards\n%s", st, len(cards), body)
	}
	st, body, _ = b.do("GET", "/approvals?after=junk", nil, nil)
	if st != 400 || !strings.Contains(body, "The link&#39;s cursor is not one this page made. The list starts again at its first page.") || len(card.FindAllString(body, -1)) != 50 {
		t.Fatalf("a bad cursor: %d\n%s", st, body)
	}
}

// Failed token attempts are counted per source, on the admin API and the
// sign-in form together: past the limit the source is answered 429 with
// Retry-After before its token is looked at, a good token included, until
// the time has passed.
func TestAdminTokenGuessingLimited(t *testing.T) {
	g := openGate(t, "", nil)
	clk := newClock()
	h, err := g.AdminHandler(AdminOptions{
		Approvers: map[string]string{hashOf(carolToken): "carol"},
		AuthLimit: authlimit.New(authlimit.Options{Burst: 3, Every: 20 * time.Second, Now: clk.Now}),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	var e ErrorBody
	for _, tok := range []string{"guess-1", "guess-2"} {
		if st := apiCall(t, srv, tok, "GET", "/api/v1/requests", "", &e); st != 401 {
			t.Fatalf("%s: %d", tok, st)
		}
	}
	// No token at all is not a guess.
	if st := apiCall(t, srv, "", "GET", "/api/v1/requests", "", &e); st != 401 {
		t.Fatalf("no token: %d", st)
	}
	if st := apiCall(t, srv, carolToken, "GET", "/api/v1/requests", "", nil); st != 200 {
		t.Fatalf("a good token under the limit: %d", st)
	}
	b := newBrowser(t, srv)
	if st, body, _ := b.do("POST", "/login", url.Values{"token": {"guess-3"}}, nil); st != 401 || !strings.Contains(body, "unknown token") {
		t.Fatalf("a failed sign-in: %d", st)
	}

	for _, tok := range []string{"guess-4", carolToken} {
		req, _ := http.NewRequest("GET", srv.URL+"/api/v1/requests", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := "{\n  \"error\": \"too many refused tokens from 127.0.0.1: try again in 20 s\",\n  \"status\": 429\n}\n"
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "20" || string(b) != want {
			t.Fatalf("past the limit, %s: %d Retry-After %q\n%s", tok, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
	}
	st, body, hd := b.do("POST", "/login", url.Values{"token": {carolToken}}, nil)
	if st != 429 || hd.Get("Retry-After") != "20" || !strings.Contains(body, "Not signed in: too many refused tokens from 127.0.0.1: try again in 20 s.") || hd.Get("Set-Cookie") != "" {
		t.Fatalf("a sign-in past the limit: %d %v\n%s", st, hd, body)
	}

	clk.Add(15 * time.Second)
	if st := apiCall(t, srv, carolToken, "GET", "/api/v1/requests", "", &e); st != 429 || !strings.Contains(e.Error, "try again in 5 s") {
		t.Fatalf("5 s early: %d %q", st, e.Error)
	}
	clk.Add(5 * time.Second)
	if st := apiCall(t, srv, carolToken, "GET", "/api/v1/requests", "", nil); st != 200 {
		t.Fatalf("after the wait: %d", st)
	}
	if st, _, hd := b.do("POST", "/login", url.Values{"token": {carolToken}}, nil); st != http.StatusSeeOther || hd.Get("Set-Cookie") == "" {
		t.Fatalf("a sign-in after the wait: %d", st)
	}
}

// The approvals page shows an agent's control characters and BiDi
// overrides as visible escapes: html/template escapes markup, but a
// U+202E would still turn the text around, and an ESC or a CR would reach
// whatever copies the text to a terminal.
func TestApprovalsPageShowsInjectedText(t *testing.T) {
	g := openGate(t, "", nil)
	srv := adminServer(t, g)
	c := call("alice", "merge_pull_request\u2066", `{"path":"/srv/\u202etxt.exe"}`)
	c.Client = "agent 1.0\x1b[2K\r\u202e<b>tool: github / read_file (read-only)"
	ch := hold(context.Background(), g, c)
	r := pendingFor(t, g, "alice", "merge_pull_request\u2066", 1)
	b := newBrowser(t, srv)
	b.do("POST", "/login", url.Values{"token": {carolToken}}, nil)
	for _, path := range []string{"/approvals", "/approvals/" + r.ID} {
		st, body, _ := b.do("GET", path, nil, nil)
		if st != 200 {
			t.Fatalf("%s: %d", path, st)
		}
		for _, want := range []string{
			`<dt>Agent</dt><dd>agent 1.0\x1b[2K\x0d\u202e&lt;b&gt;tool: github / read_file (read-only), session`,
			`<code>merge_pull_request\u2066</code>`,
			`<code>&#34;/srv/\u202etxt.exe&#34;</code>`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("%s lacks %s", path, want)
			}
		}
		for _, bad := range []string{"\x1b", "\r", "\u202e", "\u2066"} {
			if strings.Contains(body, bad) {
				t.Errorf("%s holds %q", path, bad)
			}
		}
	}
	mustDecide(t, g, r.ID, VerdictDeny, "")
	recv(t, ch)
}

// A form's Origin is the page's when it is the request's Host or the
// public URL's: behind a proxy that passes on a Host of its own, the
// browser's Origin is the public URL's.
func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		host, origin, site, pageURL string
		ok                          bool
	}{
		{"127.0.0.1:8443", "", "", "", true},
		{"127.0.0.1:8443", "null", "", "", true},
		{"127.0.0.1:8443", "http://127.0.0.1:8443", "same-origin", "", true},
		{"127.0.0.1:8443", "https://approvals.example.com", "same-origin", "https://approvals.example.com", true},
		{"127.0.0.1:8443", "https://Approvals.Example.com", "", "https://approvals.example.com", true},
		{"127.0.0.1:8443", "https://approvals.example.com", "", "", false},
		{"127.0.0.1:8443", "http://approvals.example.com", "", "https://approvals.example.com", false},
		{"127.0.0.1:8443", "https://evil.example", "", "https://approvals.example.com", false},
		{"127.0.0.1:8443", "https://approvals.example.com.evil.example", "", "https://approvals.example.com", false},
		{"127.0.0.1:8443", "http://127.0.0.1:8443", "cross-site", "", false},
		{"127.0.0.1:8443", "https://approvals.example.com", "same-site", "https://approvals.example.com", false},
	} {
		r := httptest.NewRequest("POST", "/approvals/x", nil)
		r.Host = tc.host
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if tc.site != "" {
			r.Header.Set("Sec-Fetch-Site", tc.site)
		}
		if err := sameOrigin(r, tc.pageURL); (err == nil) != tc.ok {
			t.Errorf("Host %s, Origin %q, Sec-Fetch-Site %q, public URL %q: %v, want accepted %v", tc.host, tc.origin, tc.site, tc.pageURL, err, tc.ok)
		}
	}
}

// Behind a trusted proxy a decision on the page is recorded as from the
// client the proxy forwards for; from any other address the header is
// not believed.
func TestPageBehindTrustedProxy(t *testing.T) {
	g := openGate(t, "", pageOnly)
	h, err := g.AdminHandler(AdminOptions{
		Approvers:      map[string]string{hashOf(carolToken): "carol"},
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	via := map[string]string{"X-Forwarded-For": "198.51.100.1, 203.0.113.9"}
	b := newBrowser(t, srv)
	if st, _, _ := b.do("POST", "/login", url.Values{"token": {carolToken}}, via); st != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", st)
	}
	ch := hold(context.Background(), g, call("alice", "merge_pull_request", `{}`))
	r := pendingFor(t, g, "alice", "merge_pull_request", 1)
	_, body, _ := b.do("GET", "/approvals/"+r.ID, nil, via)
	csrf := csrfField.FindStringSubmatch(body)[1]
	if st, _, _ := b.do("POST", "/approvals/"+r.ID, url.Values{"decision": {"deny"}, "csrf": {csrf}}, via); st != http.StatusSeeOther {
		t.Fatalf("deny: %d", st)
	}
	recv(t, ch)
	if got, _ := g.Get(r.ID); got.Decision.From != "page 203.0.113.9:0" {
		t.Errorf("decided from %q, want the forwarded client's address", got.Decision.From)
	}

	// The same header from an address not trusted is its own claim.
	plain := adminServer(t, g)
	b = newBrowser(t, plain)
	b.do("POST", "/login", url.Values{"token": {carolToken}}, via)
	ch = hold(context.Background(), g, call("alice", "delete_branch", `{}`))
	r = pendingFor(t, g, "alice", "delete_branch", 1)
	_, body, _ = b.do("GET", "/approvals/"+r.ID, nil, via)
	csrf = csrfField.FindStringSubmatch(body)[1]
	b.do("POST", "/approvals/"+r.ID, url.Values{"decision": {"deny"}, "csrf": {csrf}}, via)
	recv(t, ch)
	if got, _ := g.Get(r.ID); !strings.HasPrefix(got.Decision.From, "page 127.0.0.1:") {
		t.Errorf("decided from %q, want the connection's address", got.Decision.From)
	}
}
