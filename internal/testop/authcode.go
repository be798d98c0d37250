package testop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is a person who signs in on the provider's login form, in the
// authorization-code flow.
type User struct {
	Password string
	// Subject is the tokens' sub; default the user's name.
	Subject string
	// Claims are added to the access tokens of the user's sign-ins
	// (groups, email, ...).
	Claims map[string]any
	// Lifetime is how long an access token is valid; default 5 minutes.
	Lifetime time.Duration
}

// SetUser adds or replaces a user of the login form.
func (p *Provider) SetUser(name string, u User) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.users[name] = u
}

// Logins counts the sign-ins the login form accepted.
func (p *Provider) Logins() int64 { return p.st.logins.Load() }

// authRequest is an authorization request in progress: made at
// /authorize, signed in on the login form, then exchanged for tokens once
// by its code.
type authRequest struct {
	id          string
	clientID    string
	redirectURI string
	state       string
	nonce       string
	scopes      []string
	respType    oidc.ResponseType
	respMode    oidc.ResponseMode
	challenge   *oidc.CodeChallenge
	audience    []string
	created     time.Time

	// Set when a user signed in.
	user     string
	subject  string
	authTime time.Time
	code     string
}

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string                 { return a.audience }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.clientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.challenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.respType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.respMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.subject != "" }

// authRequestTTL is how long an authorization request waits for a
// sign-in and its code for the exchange.
const authRequestTTL = 10 * time.Minute

func randomID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *storage) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	c, ok := s.client(req.ClientID)
	if !ok {
		return nil, errors.New("unknown client")
	}
	aud := slices.Clone(c.Audience)
	if len(aud) == 0 {
		aud, _ = ctx.Value(resourceKey{}).([]string)
	}
	a := &authRequest{id: randomID(), clientID: req.ClientID, redirectURI: req.RedirectURI, state: req.State, nonce: req.Nonce,
		scopes: slices.Clone(req.Scopes), respType: req.ResponseType, respMode: req.ResponseMode, audience: slices.Clone(aud), created: time.Now()}
	if req.CodeChallenge != "" {
		a.challenge = &oidc.CodeChallenge{Challenge: req.CodeChallenge, Method: req.CodeChallengeMethod}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, old := range s.authReqs {
		if time.Since(old.created) > authRequestTTL {
			delete(s.authReqs, id)
		}
	}
	s.authReqs[a.id] = a
	return a, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.authReqs[id]
	if !ok {
		return nil, fmt.Errorf("no authorization request %q", id)
	}
	return a, nil
}

func (s *storage) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.authReqs {
		if a.code != "" && a.code == code {
			return a, nil
		}
	}
	return nil, errors.New("unknown or used code")
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.authReqs[id]
	if !ok {
		return fmt.Errorf("no authorization request %q", id)
	}
	a.code = code
	return nil
}

// DeleteAuthRequest ends a request once its code was exchanged: a code is
// good for one exchange.
func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.authReqs, id)
	return nil
}

// GetPrivateClaimsFromRequest gives the access token of a sign-in its
// user's claims, and that of a client-credentials grant its client's.
func (s *storage) GetPrivateClaimsFromRequest(ctx context.Context, req op.TokenRequest, scopes []string) (map[string]any, error) {
	a, ok := req.(*authRequest)
	if !ok {
		tr, _ := req.(*tokenRequest)
		var clientID string
		if tr != nil {
			clientID = tr.clientID
		}
		return s.GetPrivateClaimsFromScopes(ctx, req.GetSubject(), clientID, scopes)
	}
	s.mu.Lock()
	u := s.users[a.user]
	s.mu.Unlock()
	claims := maps.Clone(u.Claims)
	if claims == nil {
		claims = map[string]any{}
	}
	if len(scopes) > 0 {
		claims["scope"] = strings.Join(scopes, " ")
	}
	return claims, nil
}

// signIn signs user in for the authorization request id, if the password
// is theirs.
func (s *storage) signIn(id, user, password string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.authReqs[id]
	if !ok {
		return errors.New("this sign-in has ended; start again from the application")
	}
	u, ok := s.users[user]
	if !ok || u.Password != password {
		return errors.New("unknown user or wrong password")
	}
	a.user, a.subject, a.authTime = user, u.Subject, time.Now()
	if a.subject == "" {
		a.subject = user
	}
	s.logins.Add(1)
	return nil
}

// accessLifetime is the lifetime of the access tokens of an authorization
// request's user, zero for the default.
func (s *storage) accessLifetime(a *authRequest) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.users[a.user].Lifetime
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in · test provider</title></head>
<body>
<h1>Sign in to the test provider</h1>
{{if .Error}}<p id="error" role="alert">{{.Error}}</p>{{end}}
<form method="post" action="/login">
  <input type="hidden" name="id" value="{{.ID}}">
  <label for="username">User name</label> <input id="username" name="username" autocomplete="username" required>
  <label for="password">Password</label> <input id="password" name="password" type="password" autocomplete="current-password" required>
  <button type="submit" id="login">Sign in</button>
</form>
</body></html>
`))

// loginRoutes serves the login form the provider sends a browser to
// during an authorization request: a user name and a password, then back
// to the provider's callback, which redirects to the client with a code.
func (p *Provider) loginRoutes(mux *http.ServeMux) {
	type form struct{ ID, Error string }
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		loginPage.Execute(w, form{ID: r.URL.Query().Get("authRequestID")})
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id := r.PostForm.Get("id")
		if err := p.st.signIn(id, r.PostForm.Get("username"), r.PostForm.Get("password")); err != nil {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			loginPage.Execute(w, form{ID: id, Error: err.Error()})
			return
		}
		http.Redirect(w, r, p.Issuer+"/authorize/callback?id="+url.QueryEscape(id), http.StatusFound)
	})
}
