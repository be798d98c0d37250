package approval

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
)

// AdminOptions configure the admin listener: the admin API and the
// approvals page. It is a listener of its own, with tokens of its own.
type AdminOptions struct {
	// Approvers maps the lowercase hex SHA-256 of each approver token to
	// the approver's name. An approver can never decide a request made by
	// a principal of the same name.
	Approvers map[string]string
	// ClientTokens holds the hex SHA-256 of every MCP client token of the
	// gateway's front: the admin side refuses them, saying why. A token
	// cannot be both.
	ClientTokens map[string]string
	// SessionTTL is how long a sign-in to the approvals page lasts.
	// Default 12h.
	SessionTTL time.Duration
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

	mu       sync.Mutex
	sessions map[string]*pageSession
}

// AdminHandler returns the admin listener's handler: the admin API under
// APIPrefix (bearer approver tokens), and the approvals page (a sign-in
// with an approver token, then a session cookie and CSRF-checked forms).
func (g *Gate) AdminHandler(opts AdminOptions) (http.Handler, error) {
	a := &admin{g: g, approvers: map[[sha256.Size]byte]string{}, clients: map[[sha256.Size]byte]bool{},
		sessionTTL: opts.SessionTTL, sessions: map[string]*pageSession{}}
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
	if len(a.approvers) == 0 {
		return nil, errors.New("no approver tokens: the admin listener admits approvers only, so configure at least one")
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
	mux.HandleFunc("GET "+APIPrefix+"/requests", a.api(a.apiList))
	mux.HandleFunc("GET "+APIPrefix+"/requests/{id}", a.api(a.apiShow))
	mux.HandleFunc("POST "+APIPrefix+"/requests/{id}/approve", a.api(a.apiDecide(VerdictApprove)))
	mux.HandleFunc("POST "+APIPrefix+"/requests/{id}/deny", a.api(a.apiDecide(VerdictDeny)))
	mux.HandleFunc("POST "+APIPrefix+"/requests/{id}/revoke", a.api(a.apiRevoke))
	mux.HandleFunc(APIPrefix+"/", a.api(func(*http.Request, string) (any, error) {
		return nil, apiError(http.StatusNotFound, "no such admin API endpoint; see docs/approvals.md")
	}))
	a.pageRoutes(mux)
	return securityHeaders(mux), nil
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

// approver returns the name of the approver whose token this is, or why
// the token is refused.
func (a *admin) approver(token string) (string, error) {
	if token == "" {
		return "", errors.New("no token: the admin API needs an approver token (Authorization: Bearer TOKEN)")
	}
	k := sha256.Sum256([]byte(token))
	if name, ok := a.approvers[k]; ok {
		return name, nil
	}
	if a.clients[k] {
		return "", errors.New("this is an MCP client token; the admin side accepts approver tokens only")
	}
	return "", errors.New("unknown token: the admin side accepts approver tokens only")
}

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

// api wraps an admin API handler: bearer authentication, JSON answers.
func (a *admin) api(h func(r *http.Request, approver string) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		name, err := a.approver(strings.TrimSpace(token))
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="policyc approvals"`)
			writeJSON(w, http.StatusUnauthorized, ErrorBody{Error: err.Error(), Status: http.StatusUnauthorized})
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal error","status":500}`)
	}
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

func (a *admin) apiList(r *http.Request, _ string) (any, error) {
	var f Filter
	q := r.URL.Query()
	switch s := Status(q.Get("status")); s {
	case "", "all":
	case Pending, Approved, Denied, Expired:
		f.Status = s
	default:
		return nil, apiError(http.StatusBadRequest, "status %q: use pending, approved, denied, expired or all", s)
	}
	switch q.Get("active") {
	case "", "false", "0":
	case "true", "1":
		f.Active = true
	default:
		return nil, apiError(http.StatusBadRequest, "active %q: use true or false", q.Get("active"))
	}
	list := a.g.List(f)
	out := make([]RequestView, len(list))
	for i, r := range list {
		out[i] = a.view(r)
	}
	return struct {
		Requests []RequestView `json:"requests"`
	}{out}, nil
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

func readBody(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return apiError(http.StatusBadRequest, "reading the body: %v", err)
	}
	if len(b) > maxBody {
		return apiError(http.StatusRequestEntityTooLarge, "the body is longer than %d bytes", maxBody)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if ct := r.Header.Get("Content-Type"); ct == "" {
		return apiError(http.StatusUnsupportedMediaType, "the body must be JSON, sent with Content-Type: application/json")
	} else if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return apiError(http.StatusUnsupportedMediaType, "the body must be JSON (Content-Type: application/json), not %s", ct)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apiError(http.StatusBadRequest, "the body is not a decision: %v (send {\"for\": \"once\", \"reason\": \"...\"})", err)
	}
	if dec.More() {
		return apiError(http.StatusBadRequest, "the body holds more than one JSON value")
	}
	return nil
}

func remote(kind string, r *http.Request) string {
	return kind + " " + r.RemoteAddr
}

func (a *admin) apiDecide(verdict string) func(*http.Request, string) (any, error) {
	return func(r *http.Request, approver string) (any, error) {
		var body DecisionBody
		if err := readBody(r, &body); err != nil {
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
	if err := readBody(r, &body); err != nil {
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
