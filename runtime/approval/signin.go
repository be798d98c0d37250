package approval

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/policyc/policyc/internal/authlimit"
	"github.com/policyc/policyc/runtime/gateway/identity"
	"github.com/policyc/policyc/runtime/principal"
)

// ApproverGroup is the group an approver's access token must be in: the
// issuer of AdminOAuthConfig.Identity maps each of the provider's approver
// groups to it.
const ApproverGroup = "approver"

// AdminOAuthConfig configures approvers from an identity provider: the
// admin API admits the provider's JWT access tokens of approvers, and the
// approvals page signs approvers in with the provider.
type AdminOAuthConfig struct {
	// Identity configures the verifier of the admin side's access tokens:
	// its Resource is the audience they must name (the admin listener's
	// own URL, or another configured one), and its one issuer maps the
	// provider's approver groups to ApproverGroup (Groups). A verified
	// token in no approver group is refused as no approver's.
	Identity identity.Config
	// ApproverGroups and GroupsClaim are the provider's approver groups
	// and the claim listing them, for refusals to name.
	ApproverGroups []string
	GroupsClaim    string
	// SignIn, when set, signs approvers in on the approvals page with the
	// provider.
	SignIn *SignInConfig
}

// SignInConfig is the approvals page's client at the identity provider:
// the authorization-code flow with PKCE (S256), an OpenID ID token whose
// nonce is checked, and an access token for the admin side's audience.
type SignInConfig struct {
	ClientID string
	// ClientSecret is empty for a public client (PKCE alone).
	ClientSecret string
	// Scopes are asked for beside openid.
	Scopes []string
	// RedirectURL is the page's callback as the provider redirects
	// browsers to it; default Config.PageURL + SignInCallback.
	RedirectURL string
	// Client makes the calls to the provider's token endpoint; default one
	// with a 10 s timeout.
	Client *http.Client
}

// SignInCallback is where the provider sends a browser back to the
// approvals page after a sign-in.
const SignInCallback = "/signin/callback"

// AdminOAuth verifies the identity provider's tokens for the admin side.
// NewAdminOAuth makes it, fetching the provider's keys (and, for the
// page's sign-in, its discovery document).
type AdminOAuth struct {
	cfg      AdminOAuthConfig
	verifier *identity.Verifier
	issuer   string
	// The page's sign-in, when configured.
	signIn   *SignInConfig
	endpoint oauth2.Endpoint
	idTokens *oidc.IDTokenVerifier
}

// NewAdminOAuth makes the admin side's verifier of the provider's tokens.
// A provider whose keys or discovery document cannot be had is an error,
// an *identity.BootError for the keys.
func NewAdminOAuth(ctx context.Context, cfg AdminOAuthConfig) (*AdminOAuth, error) {
	if len(cfg.Identity.Issuers) != 1 {
		return nil, fmt.Errorf("the admin side trusts one identity provider; %d are configured", len(cfg.Identity.Issuers))
	}
	v, err := identity.New(ctx, cfg.Identity)
	if err != nil {
		return nil, err
	}
	o := &AdminOAuth{cfg: cfg, verifier: v, issuer: cfg.Identity.Issuers[0].URL}
	if cfg.SignIn == nil {
		return o, nil
	}
	sc := *cfg.SignIn
	if sc.ClientID == "" {
		return nil, errors.New("the approvals page's sign-in needs the client id the provider registered for it")
	}
	if sc.Client == nil {
		sc.Client = &http.Client{Timeout: 10 * time.Second}
	}
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, sc.Client), o.issuer)
	if err != nil {
		return nil, &identity.BootError{Issuer: cfg.Identity.Issuers[0].Name, Err: fmt.Errorf("OpenID discovery of %s for the approvals page's sign-in: %w", o.issuer, err)}
	}
	o.endpoint = p.Endpoint()
	if o.endpoint.AuthURL == "" || o.endpoint.TokenURL == "" {
		return nil, &identity.BootError{Issuer: cfg.Identity.Issuers[0].Name, Err: fmt.Errorf("the discovery document of %s names no authorization or token endpoint: the approvals page cannot sign in with it", o.issuer)}
	}
	algs := make([]string, len(identity.Algorithms))
	for i, a := range identity.Algorithms {
		algs[i] = string(a)
	}
	now := cfg.Identity.Now
	if now == nil {
		now = time.Now
	}
	o.idTokens = p.VerifierContext(oidc.ClientContext(context.WithoutCancel(ctx), sc.Client),
		&oidc.Config{ClientID: sc.ClientID, SupportedSigningAlgs: algs, Now: now})
	o.signIn = &sc
	return o, nil
}

// Issuer is the provider's issuer identifier.
func (o *AdminOAuth) Issuer() string { return o.issuer }

// Audience is the audience the admin side's tokens must name.
func (o *AdminOAuth) Audience() string { return o.verifier.Resource() }

// errNotApprover is a verified token of someone who is not an approver.
type errNotApprover struct{ msg string }

func (e *errNotApprover) Error() string { return e.msg }

// approver verifies token and returns the approver it speaks for, as a
// principal reference (name, issuer and subject: principal.Same then
// tells an approver from the requester by subject) and the token's
// expiry; or a *identity.Refusal, or an *errNotApprover.
func (o *AdminOAuth) approver(ctx context.Context, token string) (string, time.Time, error) {
	id, err := o.verifier.Verify(ctx, token)
	if err != nil {
		return "", time.Time{}, err
	}
	return o.approverOf(id)
}

func (o *AdminOAuth) approverOf(id *identity.Identity) (string, time.Time, error) {
	if !slices.Contains(id.Groups, ApproverGroup) {
		claim := o.cfg.GroupsClaim
		if claim == "" {
			claim = "groups"
		}
		return "", time.Time{}, &errNotApprover{fmt.Sprintf("%s (subject %q of %s) is not an approver: the token's %s claim lists none of the approver groups (%s); ask the provider's administrator to add them to one",
			id.Principal, id.Subject, id.Issuer, claim, strings.Join(o.cfg.ApproverGroups, ", "))}
	}
	return principal.Ref(principal.Parts{Name: id.Principal, Issuer: id.Issuer, Subject: id.Subject}), id.Expiry, nil
}

// looksLikeJWT says whether token has a JWT's three dot-separated parts:
// only such a token is given to the verifier.
func looksLikeJWT(token string) bool {
	return strings.Count(token, ".") == 2
}

// pendingSignIn is a sign-in sent to the provider and not yet back. The
// gateway keeps nothing of it: the browser that started it holds it in a
// cookie, sealed (signInSeal), and the callback must bring the state it
// names.
type pendingSignIn struct {
	State    string    `json:"state"`
	Nonce    string    `json:"nonce"`
	Verifier string    `json:"verifier"`
	Next     string    `json:"next"`
	Expires  time.Time `json:"expires"`
}

const (
	// signInTTL is how long a sign-in may take at the provider.
	signInTTL = 10 * time.Minute
	// signInCookie holds the browser's sign-in in progress, sealed.
	signInCookie = "policyc_signin"
)

// signInSeal seals and opens the sign-ins in progress, with a key made
// when the admin handler is: a cookie sealed by another process, or
// changed by the browser, does not open. Keeping them in the browser, not
// here, leaves no state for anyone to fill by starting sign-ins: before,
// sixteen started from one address (a proxy's, for every approver behind
// it) refused the next sign-in for ten minutes.
type signInSeal struct{ aead cipher.AEAD }

func newSignInSeal() signInSeal {
	key := make([]byte, 32)
	rand.Read(key)
	block, _ := aes.NewCipher(key) // a 32-byte key: no error
	aead, _ := cipher.NewGCMWithRandomNonce(block)
	return signInSeal{aead}
}

// signInAD binds a sealed value to its use.
var signInAD = []byte(signInCookie)

// seal returns p sealed for the sign-in cookie. HTML characters are not
// escaped (a "&" in next would take six bytes): with next at most maxNext
// bytes of printable ASCII the cookie stays under the 4 KiB a browser
// keeps (TestSignInCookieFits).
func (s signInSeal) seal(p *pendingSignIn) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(p) // a struct of strings and a time: no error
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nil, nil, b.Bytes(), signInAD))
}

// open returns the sign-in sealed in v, or nil when v is not one this
// process sealed.
func (s signInSeal) open(v string) *pendingSignIn {
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil
	}
	if b, err = s.aead.Open(nil, nil, b, signInAD); err != nil {
		return nil
	}
	var p pendingSignIn
	if json.Unmarshal(b, &p) != nil {
		return nil
	}
	return &p
}

func (a *admin) oauth2Config() *oauth2.Config {
	sc := a.oauth.signIn
	redirect := sc.RedirectURL
	if redirect == "" {
		redirect = a.g.cfg.PageURL + SignInCallback
	}
	return &oauth2.Config{ClientID: sc.ClientID, ClientSecret: sc.ClientSecret, Endpoint: a.oauth.endpoint,
		RedirectURL: redirect, Scopes: append([]string{oidc.ScopeOpenID}, sc.Scopes...)}
}

// secure says whether the page's cookies are Secure: served over TLS, or
// behind a public URL that is https.
func (a *admin) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(a.g.cfg.PageURL, "https://")
}

// signInStart sends the browser to the provider: a fresh state, nonce and
// PKCE verifier, sealed in a cookie until the callback, so that only this
// browser can come back with the state.
func (a *admin) signInStart(w http.ResponseWriter, r *http.Request) {
	p := &pendingSignIn{State: randomToken(), Nonce: randomToken(), Verifier: oauth2.GenerateVerifier(),
		Next: localPath(r.URL.Query().Get("next")), Expires: a.g.now().Add(signInTTL)}
	http.SetCookie(w, &http.Cookie{Name: signInCookie, Value: a.signInSeal.seal(p), Path: "/signin", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: a.secure(r), MaxAge: int(signInTTL.Seconds())})
	u := a.oauth2Config().AuthCodeURL(p.State, oauth2.S256ChallengeOption(p.Verifier), oidc.Nonce(p.Nonce),
		oauth2.SetAuthURLParam("resource", a.oauth.Audience()))
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// signInCallback ends a sign-in: the state must be the one this browser
// started (its cookie, cleared by the answer), the code is exchanged with its PKCE verifier, the ID token
// must carry its nonce, and the access token must verify as the admin
// API's and be an approver's of the same subject. Then the page's session
// starts, for as long as the access token lasts (at most SessionTTL).
func (a *admin) signInCallback(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg string) {
		a.render(w, status, a.loginData("/approvals", "Not signed in: "+msg))
	}
	if msg, limited := a.limited(w, r); limited {
		fail(http.StatusTooManyRequests, msg+".")
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	c, err := r.Cookie(signInCookie)
	http.SetCookie(w, &http.Cookie{Name: signInCookie, Value: "", Path: "/signin", HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: a.secure(r), MaxAge: -1})
	var p *pendingSignIn
	if err == nil {
		p = a.signInSeal.open(c.Value)
	}
	if p == nil || state == "" || !equalStrings(p.State, state) {
		a.limit.Failed(authlimit.Source(r))
		fail(http.StatusBadRequest, "this sign-in was not started in this browser (its state does not match); sign in again from the approvals page.")
		return
	}
	if !a.g.now().Before(p.Expires) {
		fail(http.StatusBadRequest, "this sign-in took too long; sign in again.")
		return
	}
	if e := q.Get("error"); e != "" {
		msg := "the identity provider refused the sign-in: " + e
		if d := q.Get("error_description"); d != "" {
			msg += ": " + d
		}
		fail(http.StatusUnauthorized, msg)
		return
	}
	code := q.Get("code")
	if code == "" {
		fail(http.StatusBadRequest, "the identity provider sent no code back.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, a.oauth.signIn.Client)
	tok, err := a.oauth2Config().Exchange(ctx, code, oauth2.VerifierOption(p.Verifier), oauth2.SetAuthURLParam("resource", a.oauth.Audience()))
	if err != nil {
		a.g.logger.Warn("approvals page sign-in: code exchange failed", "issuer", a.oauth.issuer, "error", err)
		fail(http.StatusBadGateway, "the identity provider's token endpoint did not give tokens for the code; sign in again (the gateway's log has the provider's answer).")
		return
	}
	rawID, _ := tok.Extra("id_token").(string)
	if rawID == "" {
		fail(http.StatusBadGateway, "the identity provider sent no ID token; the page's client must be an OpenID Connect client with the openid scope.")
		return
	}
	idt, err := a.oauth.idTokens.Verify(ctx, rawID)
	if err != nil {
		a.limit.Failed(authlimit.Source(r))
		fail(http.StatusUnauthorized, "the ID token does not verify: "+err.Error())
		return
	}
	if !equalStrings(idt.Nonce, p.Nonce) {
		a.limit.Failed(authlimit.Source(r))
		fail(http.StatusUnauthorized, "the ID token's nonce is not this sign-in's; sign in again.")
		return
	}
	id, err := a.oauth.verifier.Verify(ctx, tok.AccessToken)
	if err != nil {
		a.limit.Failed(authlimit.Source(r))
		a.g.logger.Warn("approvals page sign-in: access token refused", "issuer", a.oauth.issuer, "subject", idt.Subject, "error", err)
		fail(http.StatusUnauthorized, "the provider's access token is not one the admin API accepts ("+err.Error()+"); its audience must be "+a.oauth.Audience()+".")
		return
	}
	if id.Subject != idt.Subject {
		a.limit.Failed(authlimit.Source(r))
		fail(http.StatusUnauthorized, fmt.Sprintf("the ID token (subject %q) and the access token (subject %q) are not of one user.", idt.Subject, id.Subject))
		return
	}
	name, expires, err := a.oauth.approverOf(id)
	if err != nil {
		a.limit.Failed(authlimit.Source(r))
		fail(http.StatusForbidden, err.Error()+".")
		return
	}
	a.startSession(w, r, name, expires)
	a.g.logger.Info("approvals page sign-in", "approver", principal.Name(name), "issuer", id.Issuer, "subject", id.Subject)
	http.Redirect(w, r, p.Next, http.StatusSeeOther)
}

// startSession signs the browser in as approver until expires (zero: the
// session's TTL; at most the TTL in any case), with an opaque id in a
// cookie that names a session kept here.
func (a *admin) startSession(w http.ResponseWriter, r *http.Request, approver string, expires time.Time) {
	ttl := a.sessionTTL
	now := a.g.now()
	if !expires.IsZero() && expires.Sub(now) < ttl {
		ttl = expires.Sub(now)
	}
	id := randomToken()
	s := &pageSession{approver: approver, csrf: randomToken(), started: now, expires: now.Add(ttl)}
	a.mu.Lock()
	a.endSessionsLocked(now, approver)
	a.sessions[id] = s
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: a.secure(r), MaxAge: max(1, int(ttl.Seconds()))})
}

// maxPageSessions is how many sign-ins one approver may have at once: a
// new one past it ends that approver's oldest. Each sign-in is kept here,
// so without a cap a script signing in again and again with an approver's
// token would keep one for every sign-in until it expired.
const maxPageSessions = 16

// endSessionsLocked ends the sign-ins that expired, and approver's oldest
// when it has maxPageSessions, to make room for a new one.
func (a *admin) endSessionsLocked(now time.Time, approver string) {
	var oldest string
	n := 0
	for k, s := range a.sessions {
		switch {
		case !now.Before(s.expires):
			delete(a.sessions, k)
		case s.approver == approver:
			n++
			if oldest == "" || s.started.Before(a.sessions[oldest].started) {
				oldest = k
			}
		}
	}
	if n >= maxPageSessions { // every sign-in comes here: n is at most the cap
		delete(a.sessions, oldest)
	}
}

// loginData is the sign-in page: the provider's button when the page
// signs in with one, the token form when approvers have static tokens.
func (a *admin) loginData(next, errText string) *pageData {
	return &pageData{Title: "Sign in", Login: true, Next: next, Error: errText,
		SignIn: a.oauth != nil && a.oauth.signIn != nil, TokenSignIn: len(a.approvers) > 0 || a.oauth == nil || a.oauth.signIn == nil,
		SignInURL: "/signin?next=" + url.QueryEscape(next)}
}
