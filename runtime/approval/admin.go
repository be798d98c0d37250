package approval

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/policyc/policyc/internal/authlimit"
	"github.com/policyc/policyc/internal/jsonerr"
	"github.com/policyc/policyc/internal/termsafe"
)

// AdminOptions configure the admin listener: the admin API and the
// approvals page. It is a listener of its own, with tokens of its own.
type AdminOptions struct {
	// Approvers maps the lowercase hex SHA-256 of each approver token to
	// the approver's name. An approver can never decide a request made by
	// a principal of the same name.
	Approvers map[string]string
	// OAuth, when set, admits an identity provider's access tokens of
	// approvers too (beside Approvers, or instead), and signs approvers in
	// on the page with the provider when it has a SignIn. Such an
	// approver decides as its name, issuer and subject, and can never
	// decide a request of the same issuer and subject, whatever the names.
	OAuth *AdminOAuth
	// ClientTokens holds the hex SHA-256 of every MCP client token of the
	// gateway's front: the admin side refuses them, saying why. A token
	// cannot be both.
	ClientTokens map[string]string
	// SessionTTL is how long a sign-in to the approvals page lasts.
	// Default 12h.
	SessionTTL time.Duration
	// TrustedProxies are the reverse proxies in front of the listener: a
	// request from one is counted against, and recorded as from, the
	// client its X-Forwarded-For names (authlimit.Behind).
	TrustedProxies []netip.Prefix
	// AuthLimit counts the admin API's refused tokens and the page's
	// failed sign-ins per source; a source past its limit is answered 429
	// before its token is looked at. Nil means authlimit's defaults (10
	// failures, then one every 10 s). The MCP front may share it.
	AuthLimit *authlimit.Limiter
	// Status, when set, answers the admin API's GET /status: the running
	// gateway's serving table, audit servers and drift (StatusOf). Without
	// it the status is answered 404.
	Status func() GatewayStatus
}

// APIPrefix is where the admin API lives on the admin listener.
const APIPrefix = "/api/v1"

// RequestView is a request as the admin API returns it.
type RequestView struct {
	Request
	// Waiting counts the calls held for the request now.
	Waiting int `json:"waiting"`
	// URL links to the request on the approvals page, when known.
	URL string `json:"url,omitempty"`
	// Durations are the approval durations the request may be given; empty
	// once it is decided.
	Durations []string `json:"durations,omitempty"`
	// Active is set for a remembered approval still in force.
	Active bool `json:"active,omitempty"`
	// HeldCalls, in the answer to an approve or deny, says what became of
	// the calls held for the request when it was decided: an approved call
	// may still not run (a reload denied it meanwhile, say). Calls not
	// answered within heldReportWait are counted as "pending".
	HeldCalls []HeldCall `json:"held_calls,omitempty"`
}

// DecisionBody is the body of an approve or deny call of the admin API.
type DecisionBody struct {
	// For is the duration of an approval: "once" (the default), "1h",
	// "8h" or "7d"; for consent, "remember" or empty.
	For    string `json:"for,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// ErrorBody is the body of every error the admin API answers.
type ErrorBody struct {
	Error  string `json:"error"`
	Status int    `json:"status"`
}

type admin struct {
	g          *Gate
	approvers  map[[sha256.Size]byte]string
	clients    map[[sha256.Size]byte]bool
	sessionTTL time.Duration
	limit      *authlimit.Limiter
	status     func() GatewayStatus

	oauth      *AdminOAuth
	signInSeal signInSeal

	mu       sync.Mutex
	sessions map[string]*pageSession
}

// AdminHandler returns the admin listener's handler: the admin API under
// APIPrefix (bearer approver tokens), and the approvals page (a sign-in
// with an approver token, then a session cookie and CSRF-checked forms).
func (g *Gate) AdminHandler(opts AdminOptions) (http.Handler, error) {
	a := &admin{g: g, approvers: map[[sha256.Size]byte]string{}, clients: map[[sha256.Size]byte]bool{},
		sessionTTL: opts.SessionTTL, sessions: map[string]*pageSession{}, limit: opts.AuthLimit, oauth: opts.OAuth,
		status: opts.Status, signInSeal: newSignInSeal()}
	if a.limit == nil {
		a.limit = authlimit.New(authlimit.Options{})
	}
	if a.sessionTTL <= 0 {
		a.sessionTTL = 12 * time.Hour
	}
	for h, name := range opts.Approvers {
		k, err := tokenHash(h)
		if err != nil {
			return nil, fmt.Errorf("approver %s: %v", name, err)
		}
		if name == "" {
			return nil, fmt.Errorf("approver token hash %s… has no name", h[:min(12, len(h))])
		}
		a.approvers[k] = name
	}
	if len(a.approvers) == 0 && a.oauth == nil {
		return nil, errors.New("no approver tokens and no identity provider: the admin listener admits approvers only, so configure at least one of them")
	}
	for h := range opts.ClientTokens {
		k, err := tokenHash(h)
		if err != nil {
			return nil, fmt.Errorf("client token: %v", err)
		}
		if name, dup := a.approvers[k]; dup {
			return nil, fmt.Errorf("token hash %s… is both an MCP client token and approver %s's token: give approvers tokens of their own", h[:12], name)
		}
		a.clients[k] = true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+APIPrefix+"/requests", a.api(a.stored(a.apiList)))
	mux.HandleFunc("GET "+APIPrefix+"/requests/{id}", a.api(a.stored(a.apiShow)))
	mux.HandleFunc("POST "+APIPrefix+"/requests/{id}/approve", a.api(a.stored(a.apiDecide(VerdictApprove))))
	mux.HandleFunc("POST "+APIPrefix+"/requests/{id}/deny", a.api(a.stored(a.apiDecide(VerdictDeny))))
	mux.HandleFunc("POST "+APIPrefix+"/requests/{id}/revoke", a.api(a.stored(a.apiRevoke)))
	mux.HandleFunc("GET "+APIPrefix+"/status", a.api(a.apiStatus))
	mux.HandleFunc(APIPrefix+"/", a.api(func(*http.Request, string) (any, error) {
		return nil, apiError(http.StatusNotFound, "no such admin API endpoint; see docs/approvals.md")
	}))
	a.pageRoutes(mux)
	return authlimit.Behind(opts.TrustedProxies, securityHeaders(mux)), nil
}

func tokenHash(h string) ([sha256.Size]byte, error) {
	var k [sha256.Size]byte
	b, err := hex.DecodeString(strings.ToLower(h))
	if err != nil || len(b) != sha256.Size {
		return k, fmt.Errorf("token hash %q is not a hex SHA-256 (64 hex digits; compute it with: printf %%s \"$TOKEN\" | sha256sum)", h)
	}
	copy(k[:], b)
	return k, nil
}

// approver returns the name of the approver whose token this is (for an
// identity provider's token, a principal reference with its issuer and
// subject, and the token's expiry), or why the token is refused: a
// *authRefusal, 401 for a token that is no one's known here, 403 for a
// provider's token of someone who is not an approver.
func (a *admin) approver(ctx context.Context, token string) (string, time.Time, error) {
	if token == "" {
		return "", time.Time{}, &authRefusal{http.StatusUnauthorized, "no token: the admin API needs an approver token (Authorization: Bearer TOKEN)"}
	}
	k := sha256.Sum256([]byte(token))
	if name, ok := a.approvers[k]; ok {
		return name, time.Time{}, nil
	}
	if a.clients[k] {
		return "", time.Time{}, &authRefusal{http.StatusUnauthorized, "this is an MCP client token; the admin side accepts approver tokens only"}
	}
	if a.oauth != nil && looksLikeJWT(token) {
		name, exp, err := a.oauth.approver(ctx, token)
		var na *errNotApprover
		switch {
		case err == nil:
			return name, exp, nil
		case errors.As(err, &na):
			return "", time.Time{}, &authRefusal{http.StatusForbidden, na.msg}
		}
		a.g.logger.Info("admin side: access token refused", "error", err)
		return "", time.Time{}, &authRefusal{http.StatusUnauthorized, err.Error() + " (the admin side accepts access tokens of " + a.oauth.Issuer() + " for audience " + a.oauth.Audience() + ")"}
	}
	return "", time.Time{}, &authRefusal{http.StatusUnauthorized, "unknown token: the admin side accepts approver tokens only"}
}

// authRefusal is a token the admin side refuses, with the status to
// answer.
type authRefusal struct {
	status int
	msg    string
}

func (e *authRefusal) Error() string { return e.msg }

type apiErr struct {
	status int
	msg    string
}

func (e *apiErr) Error() string { return e.msg }

func apiError(status int, format string, args ...any) error {
	return &apiErr{status, fmt.Sprintf(format, args...)}
}

// statusOf maps the gate's errors to HTTP statuses.
func statusOf(err error) int {
	var ae *apiErr
	switch {
	case errors.As(err, &ae):
		return ae.status
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrDecided), errors.Is(err, ErrExpired):
		return http.StatusConflict
	case errors.Is(err, ErrSelf):
		return http.StatusForbidden
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// limited reports whether r's source must wait before it may present a
// token again; if so it sets Retry-After and returns what to tell it.
func (a *admin) limited(w http.ResponseWriter, r *http.Request) (string, bool) {
	src := authlimit.Source(r)
	wait, ok := a.limit.Allow(src)
	if ok {
		return "", false
	}
	secs := authlimit.Seconds(wait)
	w.Header().Set("Retry-After", secs)
	return fmt.Sprintf("too many refused tokens from %s: try again in %s s", src, secs), true
}

// api wraps an admin API handler: bearer authentication, JSON answers.
// A source that presented too many refused tokens is answered 429 before
// its token is looked at.
func (a *admin) api(h func(r *http.Request, approver string) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if msg, limited := a.limited(w, r); limited {
			writeJSON(w, http.StatusTooManyRequests, ErrorBody{Error: msg, Status: http.StatusTooManyRequests})
			return
		}
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		token = strings.TrimSpace(token)
		name, _, err := a.approver(r.Context(), token)
		if err != nil {
			if token != "" {
				a.limit.Failed(authlimit.Source(r))
			}
			st := err.(*authRefusal).status
			switch {
			case st == http.StatusForbidden:
				w.Header().Set("WWW-Authenticate", `Bearer realm="policyc approvals", error="insufficient_scope"`)
			case token != "" && a.oauth != nil && looksLikeJWT(token):
				w.Header().Set("WWW-Authenticate", `Bearer realm="policyc approvals", error="invalid_token"`)
			default:
				w.Header().Set("WWW-Authenticate", `Bearer realm="policyc approvals"`)
			}
			writeJSON(w, st, ErrorBody{Error: err.Error(), Status: st})
			return
		}
		v, err := h(r, name)
		if err != nil {
			st := statusOf(err)
			writeJSON(w, st, ErrorBody{Error: err.Error(), Status: st})
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// stored wraps a handler of the requests. A replica that lost its shared
// store knows only the requests it had, not those made or decided since
// on other replicas: it answers 503 rather than a list that may be
// missing them, or a 404 for one it never heard of.
func (a *admin) stored(h func(r *http.Request, approver string) (any, error)) func(*http.Request, string) (any, error) {
	return func(r *http.Request, approver string) (any, error) {
		if a.storeLost() {
			return nil, apiError(http.StatusServiceUnavailable, "the state database is unavailable on this replica: ask another replica, or wait")
		}
		return h(r, approver)
	}
}

// storeLost reports whether this replica lost its shared store: what it
// knows of the requests may then miss those made or decided elsewhere.
func (a *admin) storeLost() bool { return a.g.pg != nil && a.g.pg.lost() != nil }

// writeJSON answers v as JSON. The values are as the gate keeps them,
// agent-supplied text included; characters that could steer a terminal
// (a curl in one, say) are written as \u escapes, which read back the same.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal error","status":500}`)
	}
	b = termsafe.JSON(b)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func (a *admin) view(r Request) RequestView {
	v := RequestView{Request: r, Waiting: a.g.Waiting(r.ID), URL: a.g.Link(r.ID), Active: r.Active(a.g.now())}
	if r.Status == Pending {
		if r.Kind == KindConsent {
			v.Durations = []string{ForRemember}
		} else {
			v.Durations = a.g.AllowedDurations(r.Server)
		}
	}
	return v
}

// Listing pages of the admin API and the approvals page.
const (
	// DefaultPageSize is how many requests a list answers without a limit.
	DefaultPageSize = 50
	// MaxPageSize is the largest limit a list accepts.
	MaxPageSize = 500
)

// ListView is the answer to a list of the admin API: one page.
type ListView struct {
	Requests []RequestView `json:"requests"`
	// Total counts the requests the filter keeps, on every page.
	Total int `json:"total"`
	// Next, when set, is the cursor of the next page.
	Next string `json:"next,omitempty"`
}

// listQuery is what a list of the admin API may be asked.
var listQuery = []string{"status", "active", "limit", "cursor"}

func (a *admin) apiList(r *http.Request, _ string) (any, error) {
	var f Filter
	q := r.URL.Query()
	for k, vs := range q {
		if !slices.Contains(listQuery, k) {
			return nil, apiError(http.StatusBadRequest, "unknown query parameter %q: a list takes %s", k, strings.Join(listQuery, ", "))
		}
		if len(vs) > 1 {
			return nil, apiError(http.StatusBadRequest, "query parameter %q is given %d times: give it once", k, len(vs))
		}
	}
	limit := DefaultPageSize
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxPageSize {
			return nil, apiError(http.StatusBadRequest, "limit %q: use a number from 1 to %d", l, MaxPageSize)
		}
		limit = n
	}
	switch s := Status(q.Get("status")); s {
	case "", "all":
	case Pending, Approved, Denied, Expired:
		f.Status = s
	default:
		return nil, apiError(http.StatusBadRequest, "status %q: use pending, approved, denied, expired or all", string(s))
	}
	switch q.Get("active") {
	case "", "false", "0":
	case "true", "1":
		f.Active = true
	default:
		return nil, apiError(http.StatusBadRequest, "active %q: use true or false", q.Get("active"))
	}
	all := a.g.List(f)
	page, _, next, err := paginate(all, q.Get("cursor"), limit, false)
	if err != nil {
		return nil, err
	}
	out := ListView{Requests: make([]RequestView, len(page)), Total: len(all), Next: next}
	for i, r := range page {
		out.Requests[i] = a.view(r)
	}
	return out, nil
}

// paginate returns up to limit requests of list that come after the
// cursor, the index in list of the first of them, and the cursor of the
// page after them ("" when there is none).
// list is in the gate's order, newest first; oldestFirst pages through it
// the other way. A cursor names the last request of a page by its
// creation time and id, so requests that come or go meanwhile shift no
// page.
func paginate(list []Request, cursor string, limit int, oldestFirst bool) (page []Request, first int, next string, err error) {
	if oldestFirst {
		list = slices.Clone(list)
		slices.Reverse(list)
	}
	if cursor != "" {
		at, id, err := decodeCursor(cursor)
		if err != nil {
			return nil, 0, "", err
		}
		after := func(r Request) bool {
			c := r.Created.Compare(at)
			if oldestFirst {
				return c > 0 || c == 0 && r.ID < id
			}
			return c < 0 || c == 0 && r.ID > id
		}
		first = slices.IndexFunc(list, after)
		if first < 0 {
			first = len(list)
		}
		list = list[first:]
	}
	if len(list) <= limit {
		return list, first, "", nil
	}
	return list[:limit], first, encodeCursor(list[limit-1]), nil
}

func encodeCursor(r Request) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(r.Created.UnixNano(), 10) + "." + r.ID))
}

func decodeCursor(s string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	ns, id, ok := strings.Cut(string(b), ".")
	n, nerr := strconv.ParseInt(ns, 10, 64)
	if err != nil || !ok || nerr != nil || !ValidID(id) {
		return time.Time{}, "", apiError(http.StatusBadRequest, "cursor %q is not one a list answered: start again without it", s)
	}
	return time.Unix(0, n), id, nil
}

func (a *admin) request(r *http.Request) (Request, error) {
	id := r.PathValue("id")
	q, ok := a.g.Get(id)
	if !ok {
		return Request{}, refuse(ErrNotFound, "no approval request %q", id)
	}
	return q, nil
}

func (a *admin) apiShow(r *http.Request, _ string) (any, error) {
	q, err := a.request(r)
	if err != nil {
		return nil, err
	}
	return a.view(q), nil
}

// maxBody bounds an admin API request body.
const maxBody = 16 << 10

// readBody reads the JSON object of an admin API call into v, a pointer
// to a struct, strictly: a key v does not have (in any case: keys match
// exactly), a key given twice, a value of the wrong type or data after
// the object is refused, naming the key. An empty body leaves v as it is.
func readBody(r *http.Request, v any, what, example string) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return apiError(http.StatusBadRequest, "reading the body: %v", err)
	}
	if len(b) > maxBody {
		return apiError(http.StatusRequestEntityTooLarge, "the body is longer than %d bytes", maxBody)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if ct := r.Header.Get("Content-Type"); ct == "" {
		return apiError(http.StatusUnsupportedMediaType, "the body must be JSON, sent with Content-Type: application/json")
	} else if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return apiError(http.StatusUnsupportedMediaType, "the body must be JSON (Content-Type: application/json), not %q", ct)
	}
	if err := decodeStrict(b, v); err != nil {
		return apiError(http.StatusBadRequest, "the body is not %s: %v (send %s)", what, err, example)
	}
	return nil
}

// decodeStrict decodes b, one JSON object, into v with
// github.com/go-json-experiment/json, whose defaults refuse duplicate keys
// and match keys exactly (encoding/json keeps the last of two keys and
// takes "FOR" for "for"); unknown keys are refused too.
func decodeStrict(b []byte, v any) error {
	keys := jsonKeys(reflect.TypeOf(v).Elem())
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	val, err := dec.ReadValue()
	if err != nil {
		var se *jsontext.SyntacticError
		if errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName) {
			return fmt.Errorf("key %q is given twice: give each key once", se.JSONPointer.LastToken())
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return errors.New("the JSON ends early")
		}
		return fmt.Errorf("not JSON: %s", strings.TrimPrefix(err.Error(), "jsontext: "))
	}
	val = val.Clone() // the decoder reuses its buffer
	if _, err := dec.ReadToken(); err != io.EOF {
		return errors.New("there is data after the JSON object: send one object")
	}
	if val.Kind() != '{' {
		return errors.New("it is not a JSON object")
	}
	err = jsonv2.Unmarshal(val, v, jsonv2.RejectUnknownMembers(true))
	var se *jsonv2.SemanticError
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &se):
		return err
	}
	key := se.JSONPointer.LastToken()
	if errors.Is(se.Err, jsonv2.ErrUnknownName) {
		for _, k := range keys {
			if strings.EqualFold(k, key) {
				return fmt.Errorf("key %q: keys are case-sensitive; write %q", key, k)
			}
		}
		if len(keys) == 0 {
			return fmt.Errorf("unknown key %q: it takes no keys", key)
		}
		return fmt.Errorf("unknown key %q: the keys are %s", key, quoteAll(keys))
	}
	return fmt.Errorf("key %q must be %s", key, jsonerr.KindOf(se.GoType))
}

// jsonKeys lists the JSON names of struct t's fields.
func jsonKeys(t reflect.Type) []string {
	var keys []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

func quoteAll(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = strconv.Quote(k)
	}
	return strings.Join(q, " and ")
}

func remote(kind string, r *http.Request) string {
	return kind + " " + r.RemoteAddr
}

func (a *admin) apiDecide(verdict string) func(*http.Request, string) (any, error) {
	return func(r *http.Request, approver string) (any, error) {
		var body DecisionBody
		if err := readBody(r, &body, "a decision", `{"for": "once", "reason": "..."}`); err != nil {
			return nil, err
		}
		if verdict == VerdictDeny && body.For != "" {
			return nil, apiError(http.StatusBadRequest, "a denial has no duration; leave out \"for\"")
		}
		ctx, cancel := context.WithTimeout(r.Context(), heldReportWait)
		defer cancel()
		q, calls, err := a.g.DecideAndReport(ctx, r.PathValue("id"), verdict, body.For, body.Reason, Approver{Name: approver, From: remote("api", r)})
		if err != nil {
			return nil, err
		}
		v := a.view(q)
		v.HeldCalls = calls
		return v, nil
	}
}

// heldReportWait bounds how long an approve or deny of the admin API waits
// to say what became of the calls held for the request. Each is answered
// as soon as the table is re-checked and its use recorded, so the bound
// matters only when the state directory stalls.
const heldReportWait = 10 * time.Second

func (a *admin) apiRevoke(r *http.Request, approver string) (any, error) {
	var body struct{}
	if err := readBody(r, &body, "a revocation", "no body"); err != nil {
		return nil, err
	}
	q, err := a.g.Revoke(r.PathValue("id"), Approver{Name: approver, From: remote("api", r)})
	if err != nil {
		return nil, err
	}
	return a.view(q), nil
}

// randomToken returns 32 random bytes, hex-encoded.
func randomToken() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func equalStrings(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// securityHeaders sets what every answer of the admin listener carries:
// nothing is cached, framed (approval buttons must not be clickjacked) or
// loaded from elsewhere.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Cache-Control", "no-store")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.ServeHTTP(w, r)
	})
}
