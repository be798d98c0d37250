package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	segjson "github.com/segmentio/encoding/json"

	"github.com/policyc/policyc/internal/authlimit"
	"github.com/policyc/policyc/runtime/gateway/identity"
	"github.com/policyc/policyc/runtime/principal"
	"github.com/policyc/policyc/runtime/table"
)

// HTTPOptions configure the streamable HTTP front.
type HTTPOptions struct {
	// Tokens maps the hex SHA-256 of each bearer token to the principal
	// that presents it. A request with no token or an unknown one is
	// answered 401 and reaches nothing.
	Tokens map[string]string
	// OAuth, when set, also admits the access tokens of identity
	// providers (OAuth, beside Tokens or instead of them).
	OAuth *OAuthOptions
	// AuthLimit counts refused tokens per source; a source past its limit
	// is answered 429 before its token is looked at. Default a limiter
	// with authlimit's defaults.
	AuthLimit *authlimit.Limiter
	// IdleTimeout closes a session after this long without a request.
	// Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxSessions is the most sessions one principal may have open at
	// once; a request that would open another is answered 429 Too Many
	// Requests. Default DefaultMaxSessions.
	MaxSessions int
	// TrustedProxies are the reverse proxies in front of the listener: a
	// request from one is counted against the client its X-Forwarded-For
	// names (authlimit.Behind). None: every request is its connection's.
	TrustedProxies []netip.Prefix
}

// Defaults of HTTPOptions.
const (
	DefaultIdleTimeout = 30 * time.Minute
	DefaultMaxSessions = 256
)

// WithDefaults returns o with its unset durations and bounds set to their
// defaults.
func (o HTTPOptions) WithDefaults() HTTPOptions {
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	return o
}

// OAuthOptions make the HTTP front an OAuth 2.1 resource server: it
// serves its protected resource metadata (RFC 9728) at
// MetadataPath, names it in the WWW-Authenticate header of every 401,
// and admits the access tokens Verifier accepts.
type OAuthOptions struct {
	Verifier *identity.Verifier
	// Scopes are the scopes every access token must carry; a token
	// without one of them is answered 403 with the scopes needed. Static
	// tokens carry them all.
	Scopes []string
}

// MetadataPath is where the HTTP front serves its protected resource
// metadata (RFC 9728) when it admits access tokens.
const MetadataPath = "/.well-known/oauth-protected-resource"

// sessionIDHeader is the streamable HTTP transport's session header.
const sessionIDHeader = "Mcp-Session-Id"

// HTTPPath is the one path the HTTP front serves MCP at (a client's
// endpoint is http://HOST:PORT/); any other path is answered 404.
const HTTPPath = "/"

// HTTPHandler returns the streamable HTTP front: the SDK's streamable
// handlers behind the gateway's bearer tokens. A client that negotiates a
// protocol version before 2026-07-28 has a session, which belongs to the
// principal whose token opened it (the SDK refuses its id under any other
// token) and is closed after IdleTimeout without a request. A request at
// 2026-07-28 or later carries no session and is served on its own, for the
// principal of its own token.
func (g *Gateway) HTTPHandler(opts HTTPOptions) (http.Handler, error) {
	tokens := map[[sha256.Size]byte]string{}
	for h, p := range opts.Tokens {
		b, err := hex.DecodeString(strings.ToLower(h))
		if err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("token hash %q is not a hex SHA-256 (64 hex digits; compute it with: printf %%s \"$TOKEN\" | sha256sum)", h)
		}
		if !table.ValidPrincipal(p) {
			return nil, fmt.Errorf("token hash %s: principal %q is not a valid principal name", h, p)
		}
		var k [sha256.Size]byte
		copy(k[:], b)
		if q, dup := tokens[k]; dup && q != p {
			return nil, fmt.Errorf("token hash %s is given to two principals, %q and %q", h, q, p)
		}
		tokens[k] = p
	}
	oauth := opts.OAuth
	if oauth != nil && oauth.Verifier == nil {
		return nil, errors.New("OAuth options without a verifier")
	}
	if len(tokens) == 0 && oauth == nil {
		return nil, errors.New("no bearer tokens: the HTTP front admits only clients with a configured token or an identity provider's access token")
	}
	limit := opts.AuthLimit
	if limit == nil {
		limit = authlimit.New(authlimit.Options{})
	}
	a := &authenticator{g: g, tokens: tokens, limit: limit}
	bearer := &auth.RequireBearerTokenOptions{AllowMissingExpiration: true}
	var metadata http.Handler
	var metadataPaths []string
	if oauth != nil {
		a.verifier = oauth.Verifier
		a.scopes = slices.Clone(oauth.Scopes)
		bearer.Scopes = a.scopes
		bearer.ClockSkew = oauth.Verifier.Skew()
		var metaURL string
		metaURL, metadataPaths = metadataLocation(oauth.Verifier.Resource())
		bearer.ResourceMetadataURL = metaURL
		metadata = auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:               oauth.Verifier.Resource(),
			AuthorizationServers:   oauth.Verifier.IssuerURLs(),
			ScopesSupported:        a.scopes,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "policyc gateway",
		})
	}
	opts = opts.WithDefaults()
	server := func(r *http.Request) *mcp.Server {
		ti := auth.TokenInfoFromContext(r.Context())
		if ti == nil || ti.UserID == "" {
			return nil // unreachable behind RequireBearerToken
		}
		return g.sessionServer(ti.UserID)
	}
	// A sessionless request other than a listen is told of nothing: once
	// its principal has a server (and so a listing baseline), it needs the
	// server, not a new baseline, which costs a dry listing of everything
	// (and the SDK asks for the server twice per request).
	sessionlessServer := func(r *http.Request) *mcp.Server {
		ti := auth.TokenInfoFromContext(r.Context())
		if ti == nil || ti.UserID == "" {
			return nil // unreachable behind RequireBearerToken
		}
		if m, _ := r.Context().Value(methodKey{}).(string); m != listenMethod {
			if s := g.serverOf(ti.UserID); s != nil {
				return s
			}
		}
		return g.sessionServer(ti.UserID)
	}
	versions := mcp.SupportedProtocolVersions()
	front := &httpFront{
		g:       g,
		opening: newOpenLocks(),
		sessions: mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{
			Logger:         g.sdkLogger,
			SessionTimeout: opts.IdleTimeout,
		}),
		sessionless: mcp.NewStreamableHTTPHandler(sessionlessServer, &mcp.StreamableHTTPOptions{
			Logger:    g.sdkLogger,
			Stateless: true,
			// A request's life is its POST: a client that goes away
			// cancels what it asked for, a held call among them.
			PropagateRequestCancellation: true,
		}),
		most:        opts.MaxSessions,
		versions:    versions,
		unsupported: fmt.Sprintf("Bad Request: Unsupported protocol version (supported versions: %s)", strings.Join(versions, ",")),
	}
	authed := auth.RequireBearerToken(a.verify, bearer)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Past the token check: the front writes to the connection
		// itself, not through the challenge.
		if c, ok := w.(*challenge); ok {
			w = c.ResponseWriter
		}
		front.ServeHTTP(w, r)
	}))
	return authlimit.Behind(opts.TrustedProxies, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if metadata != nil && slices.Contains(metadataPaths, r.URL.Path) {
			// Public, as RFC 9728 has it: how to get a token is no
			// secret.
			metadata.ServeHTTP(w, r)
			return
		}
		if r.URL.Path != HTTPPath {
			// Before the token is checked: where MCP is served is no
			// secret, and a mistyped path says so at once.
			http.Error(w, fmt.Sprintf("404 not found: the gateway serves MCP at %s, not %s", HTTPPath, r.URL.Path), http.StatusNotFound)
			return
		}
		src := authlimit.Source(r)
		if wait, ok := limit.Allow(src); !ok {
			// Before the token is looked at: a source that keeps
			// presenting refused tokens waits, good token or not.
			w.Header().Set("Retry-After", authlimit.Seconds(wait))
			http.Error(w, fmt.Sprintf("Too Many Requests: too many refused tokens from %s; retry in %s s", src, authlimit.Seconds(wait)), http.StatusTooManyRequests)
			return
		}
		c := &challenge{ResponseWriter: w, r: r, logger: g.logger}
		authed.ServeHTTP(c, r.WithContext(context.WithValue(r.Context(), challengeKey{}, c)))
	})), nil
}

// metadataLocation is where the protected resource metadata of resource
// is (RFC 9728, section 3.1: the well-known path inserted between the host
// and the resource's path), and the paths the front answers it at: that
// URL's path and, for a resource with a path of its own (behind a proxy),
// MetadataPath too.
func metadataLocation(resource string) (string, []string) {
	u, err := url.Parse(resource)
	if err != nil {
		return "", []string{MetadataPath}
	}
	path := strings.TrimSuffix(u.Path, "/")
	u.Path, u.RawPath, u.RawQuery, u.Fragment = MetadataPath+path, "", "", ""
	paths := []string{MetadataPath}
	if path != "" {
		paths = append(paths, MetadataPath+path)
	}
	return u.String(), paths
}

// authenticator decides whose a bearer token is: a static token's
// principal, or the identity an access token's claims give.
type authenticator struct {
	g        *Gateway
	tokens   map[[sha256.Size]byte]string
	verifier *identity.Verifier // nil: static tokens only
	scopes   []string           // what every access token must carry
	limit    *authlimit.Limiter
}

// verify is the SDK's TokenVerifier. A refusal is logged, with what the
// token says of itself but never the token, and counted against its
// source.
func (a *authenticator) verify(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
	if p, ok := a.tokens[sha256.Sum256([]byte(token))]; ok {
		// A static token carries every scope the front asks for.
		return &auth.TokenInfo{UserID: p, Scopes: a.scopes}, nil
	}
	if a.verifier == nil {
		a.refused(r, "unknown_token", "", "", "")
		return nil, auth.ErrInvalidToken
	}
	id, err := a.verifier.Verify(ctx, token)
	if err != nil {
		var ref *identity.Refusal
		if !errors.As(err, &ref) {
			// The verifier refuses with a Refusal; anything else is the
			// request's context ending.
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		reason := ref.Reason
		if reason == identity.Malformed && len(a.tokens) > 0 {
			reason = "unknown_token" // not a JWT: a static token mistyped, or a guess
		}
		a.refused(r, string(reason), ref.Issuer, ref.Subject, ref.Detail)
		return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, strings.TrimPrefix(ref.Error(), "token refused: "))
	}
	if c, ok := r.Context().Value(challengeKey{}).(*challenge); ok {
		c.who = id
	}
	// The principal the gateway decides for is the token's principal with
	// its groups, issuer and subject: its sessions are bound to all of
	// them (the SDK refuses a session's id under another UserID), and the
	// decision log names them.
	who := principal.Ref(principal.Parts{Name: id.Principal, Groups: id.Groups, Issuer: id.Issuer, Subject: id.Subject})
	return &auth.TokenInfo{UserID: who, Scopes: id.Scopes, Expiration: id.Expiry}, nil
}

// refused logs a refused token and counts it against its source.
func (a *authenticator) refused(r *http.Request, reason, issuer, subject, detail string) {
	src := authlimit.Source(r)
	a.limit.Failed(src)
	a.g.obs.tokenRefused(reason)
	attrs := []any{"reason", reason, "source", src}
	if issuer != "" {
		attrs = append(attrs, "issuer", issuer)
	}
	if subject != "" {
		attrs = append(attrs, "subject", subject)
	}
	if detail != "" {
		attrs = append(attrs, "detail", detail)
	}
	a.g.logger.Warn("token refused", attrs...)
}

type challengeKey struct{}

// challenge is the response to a request while its token is checked. The
// SDK's middleware answers a refused token with a WWW-Authenticate header
// naming the metadata and the scopes; challenge adds the error code RFC
// 6750 (section 3.1) asks for, invalid_token on a 401 to a request that
// had a token, insufficient_scope on a 403, and logs the latter.
type challenge struct {
	http.ResponseWriter
	r      *http.Request
	logger *slog.Logger
	who    *identity.Identity // the access token's identity, once verified
}

func (c *challenge) WriteHeader(code int) {
	h := c.Header()
	if v := h.Get("WWW-Authenticate"); strings.HasPrefix(v, "Bearer ") {
		switch {
		case code == http.StatusUnauthorized && c.r.Header.Get("Authorization") != "":
			h.Set("WWW-Authenticate", `Bearer error="invalid_token", `+strings.TrimPrefix(v, "Bearer "))
		case code == http.StatusForbidden:
			h.Set("WWW-Authenticate", `Bearer error="insufficient_scope", `+strings.TrimPrefix(v, "Bearer "))
			attrs := []any{"reason", "insufficient_scope", "source", authlimit.Source(c.r)}
			if c.who != nil {
				attrs = append(attrs, "principal", c.who.Principal, "issuer", c.who.Issuer, "subject", c.who.Subject,
					"scopes", strings.Join(c.who.Scopes, " "))
			}
			c.logger.Warn("token refused", attrs...)
		}
	}
	c.ResponseWriter.WriteHeader(code)
}

// httpFront routes each request to one of the SDK's two streamable
// handlers and adds what is the gateway's own: the per-principal session
// cap, the refusals the stdio front makes too (httpBodyError), and a
// DELETE that answers the session's calls before the SDK closes it.
type httpFront struct {
	g           *Gateway
	sessions    http.Handler // the SDK's handler of sessions (before 2026-07-28)
	sessionless http.Handler // the SDK's stateless handler (2026-07-28 and later)
	most        int          // sessions a principal may have open
	opening     *openLocks   // one session of a principal opened at a time
	versions    []string     // the protocol versions the SDK serves
	unsupported string       // the SDK's answer to another version
	posts       postsInFlight
}

func (f *httpFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The MCP Go SDK v1.8.0 refuses an MCP-Protocol-Version it does not
	// know only when it sorts before 2026-07-28
	// (TestSDKEchoesUnknownLaterProtocolVersion fails when that changes,
	// and this check can go); a later one ("2030-01-01", "zzz", a
	// megabyte of digits) it echoes in its answer and in a warning it
	// logs. It is refused here as the SDK refuses the others, in the
	// SDK's words.
	version := r.Header.Get("Mcp-Protocol-Version")
	if version != "" && !slices.Contains(f.versions, version) {
		http.Error(w, f.unsupported, http.StatusBadRequest)
		return
	}
	switch r.Method {
	case http.MethodPost:
		f.post(w, r, version)
	case http.MethodDelete:
		f.delete(w, r)
	default:
		f.sessions.ServeHTTP(w, r)
	}
}

func (f *httpFront) post(w http.ResponseWriter, r *http.Request, version string) {
	g := f.g
	ti := auth.TokenInfoFromContext(r.Context())
	if ti == nil {
		f.sessions.ServeHTTP(w, r) // unreachable behind RequireBearerToken
		return
	}
	id := r.Header.Get(sessionIDHeader)
	if id != "" {
		// Counted from when it arrives, so that a DELETE answers it
		// before the session is closed; under its principal, so that
		// another's POSTs naming the session (the SDK refuses them) keep
		// no DELETE waiting.
		defer f.posts.begin(postKey(ti.UserID, id))()
	}
	// The body is read here, before the SDK reads it, to refuse what the
	// stdio front refuses and the SDK would take (httpBodyError).
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcp.DefaultMaxRequestBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "failed to read body", http.StatusBadRequest)
		return
	}
	sessionVersion := func() string {
		if id != "" {
			return g.sessionVersion(ti.UserID, id)
		}
		return ""
	}
	if reply := httpBodyError(body, version, sessionVersion); reply != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write(reply)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	switch {
	case id != "":
		// A call held for approval is ended if the POST ends first: no
		// one could receive its answer (heldCalls).
		defer g.held.servingPost(r)()
		f.sessions.ServeHTTP(w, r)
		return
	}
	if meta, method := sessionlessOf(body); version >= firstSessionless || meta != "" {
		// A request of the sessionless protocol: the SDK's stateless
		// handler serves it, or says what is wrong with its version. Its
		// method tells the handler whether to take a listing baseline
		// (sessionlessServer).
		f.sessionless.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), methodKey{}, method)))
		return
	}
	// A POST without a session id opens a session: counted and opened
	// under the principal's lock, so the cap holds however many arrive at
	// once. The lock is held only while the session is opened: the body
	// is read before it is taken (a slow upload holds nothing), and it is
	// let go once the SDK answers anything, by which time the session is
	// connected or refused (the calls of a batch that opened it may take
	// as long as a hold).
	mu := f.opening.of(ti.UserID)
	mu.Lock()
	opened := sync.OnceFunc(mu.Unlock)
	defer opened()
	if n := g.sessionCount(ti.UserID); n >= f.most {
		g.logger.Warn("session refused: too many open", "principal", ti.UserID, "sessions", n, "max_sessions", f.most)
		http.Error(w, fmt.Sprintf("Too Many Requests: %d sessions of this principal are open, the most the gateway allows; close one (DELETE) or let one go idle", n), http.StatusTooManyRequests)
		return
	}
	f.sessions.ServeHTTP(&openingWriter{ResponseWriter: w, opened: opened}, r)
}

// sessionlessOf is the protocol version a request body names in its
// params' _meta (the sessionless protocol's per-request version) and its
// method; "" when it names none or the body is not one JSON object.
func sessionlessOf(body []byte) (version, method string) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Meta struct {
				Version string `json:"io.modelcontextprotocol/protocolVersion"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if _, err := segjson.Parse(body, &m, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return "", ""
	}
	return m.Params.Meta.Version, m.Method
}

// methodKey is the context key of a sessionless request's method.
type methodKey struct{}

// listenMethod is the sessionless protocol's request for change
// notifications: the one sessionless request that is told of listing
// changes, and so needs the principal's listing baseline.
const listenMethod = "subscriptions/listen"

// delete closes a session with its calls answered. The SDK answers a
// DELETE once it has closed the session, and drops the answers it has not
// written by then; a held call would also keep the session open as long as
// its hold. So the session's holds are ended first, those it makes from now
// on too, and the POSTs in flight are answered (for at most StopTimeout)
// before the SDK closes it. Only the session's principal can, as only it
// can delete the session, and only with a DELETE the SDK will carry out.
func (f *httpFront) delete(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(sessionIDHeader)
	ti := auth.TokenInfoFromContext(r.Context())
	if id == "" || ti == nil || !f.g.deleteCloses(r, id, ti.UserID) {
		f.sessions.ServeHTTP(w, r)
		return
	}
	f.g.held.end(id, ti.UserID)
	defer f.g.held.forget(id)
	f.posts.wait(r.Context(), postKey(ti.UserID, id), StopTimeout)
	f.sessions.ServeHTTP(w, r)
}

// postKey is what postsInFlight counts a POST under: its principal's and
// its session's id.
func postKey(principal, session string) string { return principal + "\x00" + session }

// postsInFlight counts the POSTs of each session that are not yet
// answered.
type postsInFlight struct {
	mu       sync.Mutex
	sessions map[string]*sessionPosts
}

type sessionPosts struct {
	n    int
	none chan struct{} // closed when n drops to 0
}

// begin counts a POST of session until the returned func is called.
func (p *postsInFlight) begin(session string) (end func()) {
	p.mu.Lock()
	if p.sessions == nil {
		p.sessions = map[string]*sessionPosts{}
	}
	sp := p.sessions[session]
	if sp == nil {
		sp = &sessionPosts{none: make(chan struct{})}
		p.sessions[session] = sp
	}
	sp.n++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if sp.n--; sp.n == 0 {
			close(sp.none)
			delete(p.sessions, session)
		}
	}
}

// wait returns once session has no POST in flight, ctx is done or timeout
// has passed.
func (p *postsInFlight) wait(ctx context.Context, session string, timeout time.Duration) {
	p.mu.Lock()
	sp := p.sessions[session]
	p.mu.Unlock()
	if sp == nil {
		return
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-sp.none:
	case <-ctx.Done():
	case <-t.C:
	}
}

// deleteCloses reports whether the SDK's handler will close session id of
// principal on DELETE request r, rather than refuse it before: the session
// is principal's and the request's Host passes the SDK's check against DNS
// rebinding (hostRefused). Its MCP-Protocol-Version header was checked
// before.
func (g *Gateway) deleteCloses(r *http.Request, id, principal string) bool {
	return !hostRefused(r) && g.session(principal, id) != nil
}

// hostRefused reports whether the SDK refuses r for its Host: a server
// listening on a loopback address takes only a loopback Host, against DNS
// rebinding.
func hostRefused(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && isLoopback(local.String()) && !isLoopback(r.Host)
}

// session is principal's open session id, nil when it has none of that id.
func (g *Gateway) session(principal, id string) *mcp.ServerSession {
	srv := g.serverOf(principal)
	if srv == nil || id == "" {
		return nil
	}
	for ss := range srv.Sessions() {
		if ss.ID() == id {
			return ss
		}
	}
	return nil
}

// sessionVersion is the protocol version principal's session id
// negotiated, as the SDK negotiates it: the version the client asked for
// when the SDK supports it and it has a handshake, else the latest that
// has one. It is "" when there is no such session or it is not
// initialized.
func (g *Gateway) sessionVersion(principal, id string) string {
	return sessionVersionOf(g.session(principal, id))
}

// sessionVersionOf is the protocol version session ss negotiated, as
// sessionVersion; "" for a nil ss.
func sessionVersionOf(ss *mcp.ServerSession) string {
	if ss == nil {
		return ""
	}
	p := ss.InitializeParams()
	if p == nil {
		return ""
	}
	versions := mcp.SupportedProtocolVersions()
	if slices.Contains(versions, p.ProtocolVersion) && p.ProtocolVersion < firstSessionless {
		return p.ProtocolVersion
	}
	for _, v := range versions {
		if v < firstSessionless {
			return v
		}
	}
	return ""
}

// firstSessionless is the first protocol version without a handshake or
// sessions: a request of it is served on its own, by the SDK's stateless
// handler.
const firstSessionless = "2026-07-28"

// isLoopback reports whether addr, a host with or without a port, is
// localhost or a loopback IP address, as the SDK reads a Host header.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// openLocks are the locks sessions are opened under: a principal's are
// opened one at a time, so that its session cap holds. A fixed set, each
// principal's chosen by a hash of its name, not a lock per principal ever
// seen: two principals that share one wait for each other only while a
// session opens.
type openLocks struct {
	seed  maphash.Seed
	locks [1024]sync.Mutex
}

func newOpenLocks() *openLocks { return &openLocks{seed: maphash.MakeSeed()} }

// of is principal's lock.
func (o *openLocks) of(principal string) *sync.Mutex {
	return &o.locks[maphash.String(o.seed, principal)%uint64(len(o.locks))]
}

// openingWriter is the response to a POST that opens a session: the first
// thing written, or a flush, calls opened.
type openingWriter struct {
	http.ResponseWriter
	opened func()
}

func (o *openingWriter) WriteHeader(code int) {
	o.opened()
	o.ResponseWriter.WriteHeader(code)
}

func (o *openingWriter) Write(p []byte) (int, error) {
	o.opened()
	return o.ResponseWriter.Write(p)
}

func (o *openingWriter) FlushError() error {
	o.opened()
	return http.NewResponseController(o.ResponseWriter).Flush()
}

func (o *openingWriter) Flush() { _ = o.FlushError() }

// Unwrap lets http.ResponseController reach the connection's writer.
func (o *openingWriter) Unwrap() http.ResponseWriter { return o.ResponseWriter }

// sessionCount is the number of open sessions of principal. The
// sessionless protocol's requests, each served in a session of its own
// without an id while it runs, open none.
func (g *Gateway) sessionCount(principal string) int {
	n := 0
	if s := g.serverOf(principal); s != nil {
		for ss := range s.Sessions() {
			if ss.ID() != "" {
				n++
			}
		}
	}
	return n
}

// serverOf is the MCP server of principal's sessions, nil before its first
// (or once it was idle long enough to be let go). Looking it up counts as
// handing it out: a request of the principal's is under way.
func (g *Gateway) serverOf(principal string) *mcp.Server {
	g.mu.Lock()
	defer g.mu.Unlock()
	ps := g.servers[principal]
	if ps == nil {
		return nil
	}
	ps.handed = g.now()
	return ps.s
}
