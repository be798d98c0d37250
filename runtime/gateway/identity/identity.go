// Package identity verifies the OAuth 2.1 access tokens the gateway's HTTP
// front is presented (JWTs, RFC 9068) and maps their claims to the
// principal and groups the policy names. The admin listener verifies
// approvers' tokens with a Verifier of its own, for its own audience
// (runtime/approval).
//
// A Verifier knows the configured issuers. Each has its keys from its JWKS,
// found by OpenID discovery or given as a URL, fetched when the Verifier is
// made (an issuer whose keys cannot be fetched then is an error: the
// gateway does not start half-blind) and kept: a token signed by a key id
// the cached set does not have refetches the set, at most once per
// MinRefetch, and the set is refetched in the background once it is older
// than Refresh, so keys rotate without a restart. Only RS256, ES256 and
// EdDSA signatures are accepted. A token must name a configured issuer
// (iss), the gateway's own resource URL among its audiences (aud, RFC
// 8707), and be within its exp and nbf give or take the configured skew.
//
// A verified token's identity is cached until it expires, so that a
// client presenting the same token again costs a map lookup and no
// signature check; the cache is emptied whenever an issuer's key set
// changes. No request waits on the network but one whose key id is not in
// the cached set.
//
// JWS parsing, signature checks and the registered claims' validation are
// go-jose's (github.com/go-jose/go-jose/v4); discovery is go-oidc's
// (github.com/coreos/go-oidc/v3). This package adds what they leave to the
// resource server: choosing the issuer, keeping its keys, the audience,
// the claims the policy needs, and a refusal that says which check failed.
package identity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/policyc/policyc/internal/clip"
	"github.com/policyc/policyc/runtime/table"
)

// Algorithms are the signature algorithms a token may be signed with. Any
// other, "none" above all, is refused before a key is looked for.
var Algorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}

// Defaults of Config.
const (
	DefaultSkew       = 30 * time.Second
	DefaultMinRefetch = 10 * time.Second
	DefaultRefresh    = 15 * time.Minute
	// DefaultCacheSize is the most verified tokens kept.
	DefaultCacheSize = 16384
)

// Issuer is an authorization server whose tokens the gateway accepts.
type Issuer struct {
	// Name is the issuer's name in the configuration, for logs and errors.
	Name string
	// URL is its issuer identifier: a token's iss must be exactly this.
	URL string
	// JWKSURL is where its keys are; empty: from its OpenID discovery
	// document (URL + "/.well-known/openid-configuration").
	JWKSURL string
	// PrincipalClaim is the claim that names the principal; default "sub".
	// A dotted name (realm_access.roles) reaches into objects when no claim
	// has the name as it is.
	PrincipalClaim string
	// GroupsClaim is the claim listing the token's groups (an array of
	// strings, or one string); empty: tokens of this issuer have no groups.
	GroupsClaim string
	// Groups maps the provider's group names to the policy's. A group the
	// map does not name is ignored.
	Groups map[string]string
	// GroupsOptional admits a token without GroupsClaim as one in no
	// group. By default such a token is refused: groups only narrow what a
	// principal may do, so a claim the provider stopped sending must not
	// widen it.
	GroupsOptional bool
}

// Config configures a Verifier.
type Config struct {
	// Resource is the gateway's resource identifier (its URL as clients
	// reach it): a token's aud must include it (RFC 8707). A trailing
	// slash is not significant.
	Resource string
	Issuers  []Issuer
	// Skew is the clock difference allowed when exp, nbf and iat are
	// checked. Default DefaultSkew; negative: none.
	Skew time.Duration
	// MinRefetch is the shortest time between two fetches of an issuer's
	// keys for an unknown key id. Default DefaultMinRefetch.
	MinRefetch time.Duration
	// Refresh is the age after which an issuer's keys are refetched in the
	// background. Default DefaultRefresh.
	Refresh time.Duration
	// CacheSize bounds the verified tokens kept. Default DefaultCacheSize.
	CacheSize int
	// Client fetches discovery documents and key sets; default one with a
	// 10 s timeout.
	Client *http.Client
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger is told of key sets fetched, changed or unreachable.
	Logger *slog.Logger
}

// Identity is who a verified token speaks for.
type Identity struct {
	// Principal is the principal's name, from the issuer's PrincipalClaim.
	Principal string
	// Groups are the policy's groups the token's groups map to, sorted,
	// without repeats.
	Groups []string
	// Issuer and Subject are the token's iss and sub.
	Issuer  string
	Subject string
	// IssuerName is the issuer's name in the configuration.
	IssuerName string
	// Scopes are the token's scopes (scope, or scp).
	Scopes []string
	// Expiry is the token's exp.
	Expiry time.Time
}

// Reason says which check refused a token.
type Reason string

// Reasons. Each is logged as it is written here.
const (
	Malformed       Reason = "malformed"        // not a signed JWT
	AlgNotAllowed   Reason = "alg_not_allowed"  // none, HS256, ...: not RS256, ES256 or EdDSA
	UnknownIssuer   Reason = "unknown_issuer"   // iss names no configured issuer
	UnknownKey      Reason = "unknown_key"      // no key of the issuer has the token's kid
	KeysUnavailable Reason = "keys_unavailable" // the issuer's keys could not be fetched for a new kid
	BadSignature    Reason = "bad_signature"    // the key does not verify the signature
	Expired         Reason = "expired"          // exp (plus the skew) has passed
	NotYetValid     Reason = "not_yet_valid"    // nbf or iat is ahead (beyond the skew)
	WrongAudience   Reason = "wrong_audience"   // aud does not name the gateway
	MissingClaim    Reason = "missing_claim"    // exp, sub, the principal or the groups claim
	BadClaim        Reason = "bad_claim"        // a claim of the wrong type, or not a principal name
)

// Refusal is a token that was not accepted. Its message is safe to show
// the client and to log: it never holds the token.
type Refusal struct {
	Reason Reason
	// Issuer and Subject are the token's iss and sub, when it was read far
	// enough to know them (unverified unless the signature was checked).
	Issuer, Subject string
	// Detail says more, for the log and the client.
	Detail string
}

func (r *Refusal) Error() string {
	if r.Detail == "" {
		return "token refused: " + string(r.Reason)
	}
	return "token refused: " + string(r.Reason) + ": " + r.Detail
}

// BootError is an issuer whose keys could not be had when the Verifier was
// made.
type BootError struct {
	// Issuer is the issuer's name in the configuration.
	Issuer string
	Err    error
}

func (e *BootError) Error() string { return e.Err.Error() }
func (e *BootError) Unwrap() error { return e.Err }

// Verifier verifies access tokens. It is safe for concurrent use.
type Verifier struct {
	cfg      Config
	resource string
	issuers  map[string]*issuer // by URL
	cache    tokenCache
}

// issuer is a configured issuer with its keys.
type issuer struct {
	Issuer
	keys *keySet
}

// New makes a Verifier, fetching every issuer's discovery document (when
// it has no JWKSURL) and keys. An issuer whose keys cannot be had is a
// *BootError; so is one configured twice.
func New(ctx context.Context, cfg Config) (*Verifier, error) {
	if cfg.Skew == 0 {
		cfg.Skew = DefaultSkew
	} else if cfg.Skew < 0 {
		cfg.Skew = 0
	}
	if cfg.MinRefetch <= 0 {
		cfg.MinRefetch = DefaultMinRefetch
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if u, err := url.Parse(cfg.Resource); err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("resource %q is not an absolute URL: it is the gateway's URL as clients reach it, which tokens must name in aud", cfg.Resource)
	}
	if len(cfg.Issuers) == 0 {
		return nil, errors.New("no issuer: a verifier needs at least one")
	}
	v := &Verifier{cfg: cfg, resource: cfg.Resource, issuers: map[string]*issuer{}}
	v.cache.init(cfg.CacheSize)
	for _, is := range cfg.Issuers {
		if is.PrincipalClaim == "" {
			is.PrincipalClaim = "sub"
		}
		if prev, dup := v.issuers[is.URL]; dup {
			return nil, &BootError{Issuer: is.Name, Err: fmt.Errorf("issuer %s is also %s: one issuer URL is one issuer", is.URL, prev.Name)}
		}
		jwksURL := is.JWKSURL
		if jwksURL == "" {
			u, err := discover(ctx, cfg.Client, is.URL)
			if err != nil {
				return nil, &BootError{Issuer: is.Name, Err: err}
			}
			jwksURL = u
		}
		ks := newKeySet(is.Name, jwksURL, &v.cfg, v.cache.clear)
		if err := ks.load(ctx); err != nil {
			return nil, &BootError{Issuer: is.Name, Err: fmt.Errorf("keys of issuer %s could not be fetched from %s: %w", is.URL, jwksURL, err)}
		}
		v.issuers[is.URL] = &issuer{Issuer: is, keys: ks}
	}
	return v, nil
}

// Resource is the gateway's resource identifier tokens must name.
func (v *Verifier) Resource() string { return v.resource }

// IssuerURLs lists the issuers' identifiers, sorted: the authorization
// servers of the gateway's protected resource metadata.
func (v *Verifier) IssuerURLs() []string {
	out := make([]string, 0, len(v.issuers))
	for u := range v.issuers {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// Skew is the clock difference the Verifier allows.
func (v *Verifier) Skew() time.Duration { return v.cfg.Skew }

// Verify verifies token and returns who it speaks for, or a *Refusal.
// A token verified before and not yet expired is answered from the cache.
func (v *Verifier) Verify(ctx context.Context, token string) (*Identity, error) {
	now := v.cfg.Now()
	if id, ok := v.cache.get(token, now); ok {
		return id, nil
	}
	// A change of keys while this token is checked empties the cache; the
	// identity is then not kept, or a token of a withdrawn key would be.
	gen := v.cache.generation()
	id, err := v.verify(ctx, token, now)
	if err != nil {
		return nil, err
	}
	// Kept until the token expires or its issuer's keys are due to be
	// fetched again, whichever is first: a key withdrawn is noticed by
	// the tokens it signed, not only by the ones not seen before.
	until := id.Expiry.Add(v.cfg.Skew)
	if due := now.Add(v.cfg.Refresh); due.Before(until) {
		until = due
	}
	v.cache.put(token, id, gen, until)
	return id, nil
}

// MaxTokenBytes bounds the tokens the Verifier reads: a longer one is
// refused before it is parsed.
const MaxTokenBytes = 32 << 10

func (v *Verifier) verify(ctx context.Context, token string, now time.Time) (*Identity, error) {
	if len(token) > MaxTokenBytes {
		return nil, &Refusal{Reason: Malformed, Detail: fmt.Sprintf("%d bytes long; the gateway reads tokens of at most %d", len(token), MaxTokenBytes)}
	}
	tok, err := jwt.ParseSigned(token, Algorithms)
	if err != nil {
		var alg *jose.ErrUnexpectedSignatureAlgorithm
		if errors.As(err, &alg) {
			return nil, &Refusal{Reason: AlgNotAllowed, Detail: fmt.Sprintf("signed with %s; only %s are accepted", clip.Quote(string(alg.Got)), algList())}
		}
		return nil, &Refusal{Reason: Malformed, Detail: "not a signed JWT"}
	}
	if len(tok.Headers) != 1 {
		return nil, &Refusal{Reason: Malformed, Detail: "a token has exactly one signature"}
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, &Refusal{Reason: Malformed, Detail: "its claims are not a JSON object of registered claims"}
	}
	// What a refusal repeats of the claims and header is bounded: they
	// are not verified yet, and a refusal is logged and answered.
	subject := unverified.Subject
	if len(subject) > maxSubject {
		subject = clip.String(subject)
	}
	is := v.issuers[unverified.Issuer]
	if is == nil {
		return nil, &Refusal{Reason: UnknownIssuer, Issuer: clip.String(unverified.Issuer), Subject: subject,
			Detail: fmt.Sprintf("issuer %s is not configured (configured: %s)", clip.Quote(unverified.Issuer), strings.Join(v.IssuerURLs(), ", "))}
	}
	h := tok.Headers[0]
	refuse := func(r Reason, format string, args ...any) error {
		return &Refusal{Reason: r, Issuer: is.URL, Subject: subject, Detail: fmt.Sprintf(format, args...)}
	}
	keys, err := is.keys.lookup(ctx, h.KeyID, jose.SignatureAlgorithm(h.Algorithm))
	switch {
	case errors.Is(err, errKeysUnavailable):
		return nil, refuse(KeysUnavailable, "%v", err)
	case err != nil:
		return nil, refuse(UnknownKey, "%v", err)
	}
	var std jwt.Claims
	var all map[string]any
	verified := false
	for _, k := range keys {
		if tok.Claims(k.Key, &std, &all) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, refuse(BadSignature, "the signature does not verify with key %s of issuer %s", clip.Quote(h.KeyID), is.URL)
	}
	switch err := std.ValidateWithLeeway(jwt.Expected{Issuer: is.URL, Time: now}, v.cfg.Skew); {
	case err == nil:
	case errors.Is(err, jwt.ErrExpired):
		return nil, refuse(Expired, "expired at %s (allowed clock skew %s)", std.Expiry.Time().UTC().Format(time.RFC3339), v.cfg.Skew)
	case errors.Is(err, jwt.ErrNotValidYet):
		return nil, refuse(NotYetValid, "not valid before %s (allowed clock skew %s)", std.NotBefore.Time().UTC().Format(time.RFC3339), v.cfg.Skew)
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, refuse(NotYetValid, "issued at %s, in the future (allowed clock skew %s)", std.IssuedAt.Time().UTC().Format(time.RFC3339), v.cfg.Skew)
	default:
		return nil, refuse(BadClaim, "%v", err)
	}
	if std.Expiry == nil {
		return nil, refuse(MissingClaim, "no exp: the gateway accepts only tokens that expire")
	}
	if !oauthex.MatchesResource(std.Audience, v.resource) {
		return nil, refuse(WrongAudience, "aud %q does not name this gateway (%s)", []string(std.Audience), v.resource)
	}
	if std.Subject == "" {
		return nil, refuse(MissingClaim, "no sub")
	}
	if !printable(std.Subject) {
		// It names the client in logs, approval requests and the
		// decision log.
		return nil, refuse(BadClaim, "sub %s is longer than %d bytes or holds a control character", quoteShort(std.Subject), maxSubject)
	}
	c, err := mapClaims(all, &is.Issuer)
	if err != nil {
		var ce *claimError
		errors.As(err, &ce)
		return nil, refuse(ce.reason, "%s", ce.detail)
	}
	return &Identity{Principal: c.principal, Groups: c.groups, Issuer: is.URL, Subject: std.Subject, IssuerName: is.Name,
		Scopes: c.scopes, Expiry: std.Expiry.Time()}, nil
}

func algList() string {
	s := make([]string, len(Algorithms))
	for i, a := range Algorithms {
		s[i] = string(a)
	}
	return strings.Join(s, ", ")
}

// maxSubject bounds a token's sub.
const maxSubject = 256

// printable says whether s is a subject the gateway can show: at most
// maxSubject bytes of valid UTF-8 without control characters.
func printable(s string) bool {
	if len(s) > maxSubject || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return false
		}
	}
	return true
}

// validPrincipal is table.ValidPrincipal, here for mapClaims.
var validPrincipal = table.ValidPrincipal

// tokenCache keeps verified tokens' identities until they expire: a
// bounded map, emptied when an issuer's keys change.
type tokenCache struct {
	mu  sync.RWMutex
	max int
	m   map[string]cachedToken
	gen uint64 // counts the clears
}

// cachedToken is a verified token's identity, kept until until.
type cachedToken struct {
	id    *Identity
	until time.Time
}

func (c *tokenCache) init(max int) {
	c.max, c.m = max, map[string]cachedToken{}
}

// get returns the identity of token, if it is kept and now is before its
// time is up.
func (c *tokenCache) get(token string, now time.Time) (*Identity, bool) {
	c.mu.RLock()
	e, ok := c.m[token]
	c.mu.RUnlock()
	if !ok || !now.Before(e.until) {
		return nil, false
	}
	return e.id, true
}

// generation is the cache's count of clears, for put.
func (c *tokenCache) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

// put keeps id for token until until, unless the cache was cleared since
// generation gen.
func (c *tokenCache) put(token string, id *Identity, gen uint64, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if len(c.m) >= c.max {
		// Full: forget about a quarter, the map's own order deciding
		// which. Tokens are presented again and again while they live, so
		// an entry lost costs one signature check.
		n := c.max / 4
		for k := range c.m {
			if n--; n < 0 {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[token] = cachedToken{id, until}
}

func (c *tokenCache) clear() {
	c.mu.Lock()
	clear(c.m)
	c.gen++
	c.mu.Unlock()
}
