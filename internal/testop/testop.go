// Package testop runs a real OpenID provider on the loopback interface for
// tests: zitadel/oidc's op package (an OpenID Certified implementation)
// over an in-memory storage. It issues JWT access tokens by the
// client-credentials grant and by the authorization-code flow with PKCE
// (a user signs in on its login form, in a browser), signs them with keys
// that a test can rotate (RS256, ES256 or EdDSA), and serves discovery and
// the JWKS as any provider does. Tests obtain tokens from its endpoints
// over HTTP, exactly as an agent or a browser would; nothing here builds a
// token by hand.
package testop

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Client is a client-credentials client of the provider: an agent. The
// tokens it is issued carry Subject as sub and the claims below; a test
// may change them between two tokens (SetClient).
type Client struct {
	Secret string
	// Subject is the tokens' sub; default the client's id.
	Subject string
	// Audience is the tokens' aud. Empty: the resource the token request
	// names (RFC 8707's resource parameter); a request naming none gets no
	// token.
	Audience []string
	// Claims are added to every token (groups, email, ...).
	Claims map[string]any
	// Lifetime is how long a token is valid; default 5 minutes. A
	// negative lifetime issues tokens that expired that long ago.
	Lifetime time.Duration
	// ClockAhead is how far the provider's clock runs ahead of the real
	// one for this client's tokens: their iat and nbf are that far in the
	// future.
	ClockAhead time.Duration
	// RedirectURIs make the client one of the authorization-code flow as
	// well (with PKCE; without a Secret, a public client): the provider's
	// login form signs a User in, and the code goes to one of these.
	RedirectURIs []string
}

// Provider is a running OpenID provider.
type Provider struct {
	// Issuer is the provider's issuer URL, http://127.0.0.1:PORT.
	Issuer string

	srv *http.Server
	ln  net.Listener
	st  *storage

	jwksRequests      atomic.Int64
	discoveryRequests atomic.Int64
	keysDown          atomic.Bool
}

// Start starts a provider signing with a fresh key of alg (jose.RS256,
// jose.ES256 or jose.EdDSA). Close stops it.
func Start(alg jose.SignatureAlgorithm) (*Provider, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Provider{Issuer: "http://" + ln.Addr().String(), ln: ln, st: &storage{clients: map[string]Client{}, users: map[string]User{}, authReqs: map[string]*authRequest{}}}
	if err := p.Rotate(alg, true); err != nil {
		ln.Close()
		return nil, err
	}
	cfg := &op.Config{CryptoKey: sha256.Sum256([]byte(p.Issuer)), AuthMethodPost: true, CodeMethodS256: true}
	prov, err := op.NewProvider(cfg, p.st, op.StaticIssuer(p.Issuer), op.WithAllowInsecure())
	if err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", prov)
	mux.HandleFunc("/oauth/token", func(w http.ResponseWriter, r *http.Request) {
		// The resource indicator (RFC 8707), for the storage: the op
		// package hands it only the scopes.
		if err := r.ParseForm(); err == nil && r.PostForm.Get("resource") != "" {
			r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, r.PostForm["resource"]))
		}
		prov.ServeHTTP(w, r)
	})
	p.loginRoutes(mux)
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		// The resource indicator of an authorization request, as for the
		// token endpoint.
		if err := r.ParseForm(); err == nil && r.Form.Get("resource") != "" {
			r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, r.Form["resource"]))
		}
		prov.ServeHTTP(w, r)
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		p.jwksRequests.Add(1)
		if p.keysDown.Load() {
			http.Error(w, "keys unavailable", http.StatusServiceUnavailable)
			return
		}
		prov.ServeHTTP(w, r)
	})
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		p.discoveryRequests.Add(1)
		prov.ServeHTTP(w, r)
	})
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

// Close stops the provider.
func (p *Provider) Close() error { return p.srv.Close() }

// JWKSURL is the provider's key set, as its discovery document names it.
func (p *Provider) JWKSURL() string { return p.Issuer + "/keys" }

// TokenURL is the provider's token endpoint.
func (p *Provider) TokenURL() string { return p.Issuer + "/oauth/token" }

// JWKSRequests is the number of requests its key set has had.
func (p *Provider) JWKSRequests() int64 { return p.jwksRequests.Load() }

// DiscoveryRequests is the number of requests its discovery document has had.
func (p *Provider) DiscoveryRequests() int64 { return p.discoveryRequests.Load() }

// KeysDown makes the key set answer 503 (down) or serve again.
func (p *Provider) KeysDown(down bool) { p.keysDown.Store(down) }

// SetClient adds or replaces a client.
func (p *Provider) SetClient(id string, c Client) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.clients[id] = c
}

// Rotate signs from now on with a fresh key of alg. With keepOld the
// previous keys stay in the key set (a rotation announced in advance);
// without, they are dropped (a key withdrawn).
func (p *Provider) Rotate(alg jose.SignatureAlgorithm, keepOld bool) error {
	return p.RotateNamed(alg, keepOld, "")
}

// RotateNamed is Rotate with the new key's id kid, when it is not empty.
func (p *Provider) RotateNamed(alg jose.SignatureAlgorithm, keepOld bool, kid string) error {
	k, err := newKey(alg)
	if err != nil {
		return err
	}
	if kid != "" {
		k.id = kid
	}
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	if !keepOld {
		p.st.keys = nil
	}
	p.st.keys = append(p.st.keys, k)
	p.st.signing = k
	return nil
}

// SigningKeyID is the id (kid) of the key tokens are signed with now.
func (p *Provider) SigningKeyID() string {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	return p.st.signing.id
}

// Token asks the token endpoint for an access token by the
// client-credentials grant, as an agent does, and returns it.
func (p *Provider) Token(ctx context.Context, clientID string, scopes ...string) (string, error) {
	p.st.mu.Lock()
	c, ok := p.st.clients[clientID]
	p.st.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("no client %q", clientID)
	}
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {strings.Join(scopes, " ")}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.TokenURL(), strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(c.Secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("token endpoint: %s: %s", resp.Status, body)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	if err := json.Unmarshal(body, &tr); err != nil {
		return "", err
	}
	if tr.AccessToken == "" || !strings.EqualFold(tr.TokenType, "bearer") {
		return "", fmt.Errorf("token endpoint: no bearer token in %s", body)
	}
	return tr.AccessToken, nil
}

// signingKey is one of the provider's keys.
type signingKey struct {
	id  string
	alg jose.SignatureAlgorithm
	key crypto.Signer
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return k.alg }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

// publicKey is a key of the key set.
type publicKey struct{ k *signingKey }

func (p publicKey) ID() string                         { return p.k.id }
func (p publicKey) Algorithm() jose.SignatureAlgorithm { return p.k.alg }
func (p publicKey) Use() string                        { return "sig" }
func (p publicKey) Key() any                           { return p.k.key.Public() }

var keySerial atomic.Int64

func newKey(alg jose.SignatureAlgorithm) (*signingKey, error) {
	var key crypto.Signer
	var err error
	switch alg {
	case jose.RS256:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.EdDSA:
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, fmt.Errorf("testop: no keys for %s", alg)
	}
	if err != nil {
		return nil, err
	}
	return &signingKey{id: fmt.Sprintf("%s-%d", strings.ToLower(string(alg)), keySerial.Add(1)), alg: alg, key: key}, nil
}

// storage is the provider's in-memory storage: clients, users and keys.
// It serves the client-credentials grant and the authorization-code flow;
// the other flows answer that they are not supported.
type storage struct {
	mu      sync.Mutex
	clients map[string]Client
	keys    []*signingKey
	signing *signingKey
	tokens  atomic.Int64
	// users sign in on the login form; authReqs are the authorization
	// requests in progress, by id (see authcode.go).
	users    map[string]User
	authReqs map[string]*authRequest
	logins   atomic.Int64
}

var errUnsupported = errors.New("testop: not supported by the test provider")

// tokenRequest is a client-credentials request.
type tokenRequest struct {
	clientID string
	subject  string
	audience []string
	scopes   []string
}

func (r *tokenRequest) GetSubject() string    { return r.subject }
func (r *tokenRequest) GetAudience() []string { return r.audience }
func (r *tokenRequest) GetScopes() []string   { return r.scopes }

func (s *storage) client(id string) (Client, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	return c, ok
}

func (s *storage) ClientCredentials(_ context.Context, clientID, clientSecret string) (op.Client, error) {
	c, ok := s.client(clientID)
	if !ok || c.Secret != clientSecret {
		return nil, errors.New("unknown client or wrong secret")
	}
	return &opClient{id: clientID, c: c}, nil
}

// resourceKey is the context key of a token request's resource
// parameters.
type resourceKey struct{}

func (s *storage) ClientCredentialsTokenRequest(ctx context.Context, clientID string, scopes []string) (op.TokenRequest, error) {
	c, ok := s.client(clientID)
	if !ok {
		return nil, errors.New("unknown client")
	}
	if len(c.Audience) == 0 {
		c.Audience, _ = ctx.Value(resourceKey{}).([]string)
	}
	if len(c.Audience) == 0 {
		return nil, oidc.ErrInvalidTarget().WithDescription("client %s has no audience, and the request names no resource", clientID)
	}
	sub := c.Subject
	if sub == "" {
		sub = clientID
	}
	return &tokenRequest{clientID: clientID, subject: sub, audience: slices.Clone(c.Audience), scopes: scopes}, nil
}

func (s *storage) GetClientByClientID(_ context.Context, clientID string) (op.Client, error) {
	c, ok := s.client(clientID)
	if !ok {
		return nil, errors.New("unknown client")
	}
	return &opClient{id: clientID, c: c}, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, clientID, clientSecret string) error {
	c, ok := s.client(clientID)
	if !ok || c.Secret != clientSecret {
		return errors.New("unknown client or wrong secret")
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, r op.TokenRequest) (string, time.Time, error) {
	lifetime, ahead := 5*time.Minute, time.Duration(0)
	if tr, ok := r.(*tokenRequest); ok {
		if c, ok := s.client(tr.clientID); ok {
			ahead = c.ClockAhead
			if c.Lifetime != 0 {
				lifetime = c.Lifetime
			}
		}
	}
	if a, ok := r.(*authRequest); ok {
		if l := s.accessLifetime(a); l != 0 {
			lifetime = l
		}
	}
	return fmt.Sprintf("at-%d", s.tokens.Add(1)), time.Now().Add(ahead + lifetime), nil
}

func (s *storage) GetPrivateClaimsFromScopes(_ context.Context, _, clientID string, scopes []string) (map[string]any, error) {
	c, _ := s.client(clientID)
	claims := map[string]any{}
	for k, v := range c.Claims {
		claims[k] = v
	}
	if len(scopes) > 0 {
		claims["scope"] = strings.Join(scopes, " ")
	}
	return claims, nil
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.signing, nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var algs []jose.SignatureAlgorithm
	for _, k := range s.keys {
		if !slices.Contains(algs, k.alg) {
			algs = append(algs, k.alg)
		}
	}
	return algs, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]op.Key, len(s.keys))
	for i, k := range s.keys {
		keys[i] = publicKey{k}
	}
	return keys, nil
}

func (s *storage) Health(context.Context) error { return nil }

// The flows the test provider does not serve.

func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errUnsupported
}
func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, errUnsupported
}
func (s *storage) TerminateSession(context.Context, string, string) error { return errUnsupported }
func (s *storage) RevokeToken(context.Context, string, string, string) *oidc.Error {
	return oidc.ErrUnsupportedGrantType()
}
func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}
func (s *storage) SetUserinfoFromScopes(_ context.Context, info *oidc.UserInfo, userID, _ string, _ []string) error {
	info.Subject = userID // an ID token's sub, which the user info would otherwise blank
	return nil
}
func (s *storage) SetUserinfoFromToken(context.Context, *oidc.UserInfo, string, string, string) error {
	return errUnsupported
}
func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errUnsupported
}
func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errUnsupported
}
func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errUnsupported
}

// opClient is a client as the op package sees it.
type opClient struct {
	id string
	c  Client
}

func (c *opClient) GetID() string                       { return c.id }
func (c *opClient) RedirectURIs() []string              { return c.c.RedirectURIs }
func (c *opClient) PostLogoutRedirectURIs() []string    { return nil }
func (c *opClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *opClient) AuthMethod() oidc.AuthMethod {
	if c.c.Secret == "" && len(c.c.RedirectURIs) > 0 {
		return oidc.AuthMethodNone // a public client: PKCE alone
	}
	return oidc.AuthMethodBasic
}
func (c *opClient) ResponseTypes() []oidc.ResponseType {
	if len(c.c.RedirectURIs) > 0 {
		return []oidc.ResponseType{oidc.ResponseTypeCode}
	}
	return nil
}
func (c *opClient) GrantTypes() []oidc.GrantType {
	if len(c.c.RedirectURIs) > 0 {
		return []oidc.GrantType{oidc.GrantTypeClientCredentials, oidc.GrantTypeCode}
	}
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}
func (c *opClient) LoginURL(id string) string            { return "/login?authRequestID=" + url.QueryEscape(id) }
func (c *opClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c *opClient) IDTokenLifetime() time.Duration       { return time.Hour }
func (c *opClient) DevMode() bool                        { return true }
func (c *opClient) IsScopeAllowed(string) bool           { return true }
func (c *opClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *opClient) ClockSkew() time.Duration             { return -c.c.ClockAhead }
func (c *opClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *opClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
