package identity

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/policyc/policyc/internal/testop"
)

const resource = "https://gateway.example.com/"

// clock is a settable clock, read by the verifier under test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func startOP(t testing.TB, alg jose.SignatureAlgorithm) *testop.Provider {
	t.Helper()
	p, err := testop.Start(alg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// corp is the issuer configuration the tests use for p.
func corp(p *testop.Provider) Issuer {
	return Issuer{Name: "corp", URL: p.Issuer, GroupsClaim: "groups",
		Groups: map[string]string{"idp-ops": "ops", "idp-dev": "dev", "idp-oncall": "ops"}}
}

func newVerifier(t testing.TB, c *clock, issuers ...Issuer) *Verifier {
	t.Helper()
	cfg := Config{Resource: resource, Issuers: issuers}
	if c != nil {
		cfg.Now = c.now
	}
	v, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func token(t testing.TB, p *testop.Provider, client string, scopes ...string) string {
	t.Helper()
	tok, err := p.Token(context.Background(), client, scopes...)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func agent(groups ...string) testop.Client {
	g := make([]any, len(groups))
	for i, s := range groups {
		g[i] = s
	}
	return testop.Client{Secret: "s3cret", Subject: "agent-7", Audience: []string{resource}, Claims: map[string]any{"groups": g, "email": "agent7@example.com"}}
}

// refused checks that err is a refusal for reason.
func refused(t *testing.T, err error, reason Reason) *Refusal {
	t.Helper()
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("err = %v, want a refusal for %s", err, reason)
	}
	if r.Reason != reason {
		t.Fatalf("refused for %s (%v), want %s", r.Reason, r, reason)
	}
	return r
}

func TestVerifyEachAlgorithm(t *testing.T) {
	for _, alg := range Algorithms {
		t.Run(string(alg), func(t *testing.T) {
			p := startOP(t, alg)
			p.SetClient("agent", agent("idp-ops", "idp-oncall", "unmapped"))
			v := newVerifier(t, nil, corp(p))
			id, err := v.Verify(context.Background(), token(t, p, "agent", "mcp", "tools"))
			if err != nil {
				t.Fatal(err)
			}
			if id.Principal != "agent-7" || id.Subject != "agent-7" || id.Issuer != p.Issuer || id.IssuerName != "corp" {
				t.Errorf("identity = %+v", id)
			}
			if !slices.Equal(id.Groups, []string{"ops"}) {
				t.Errorf("groups = %q, want [ops] (two provider groups map to ops; unmapped ones are dropped)", id.Groups)
			}
			if !slices.Equal(id.Scopes, []string{"mcp", "tools"}) {
				t.Errorf("scopes = %q", id.Scopes)
			}
			if time.Until(id.Expiry) < 4*time.Minute {
				t.Errorf("expiry = %v, want about 5 minutes ahead", id.Expiry)
			}
		})
	}
}

func TestPrincipalFromConfiguredClaim(t *testing.T) {
	p := startOP(t, jose.ES256)
	p.SetClient("agent", agent())
	is := corp(p)
	is.PrincipalClaim = "email"
	v := newVerifier(t, nil, is)
	id, err := v.Verify(context.Background(), token(t, p, "agent"))
	if err != nil {
		t.Fatal(err)
	}
	if id.Principal != "agent7@example.com" || id.Subject != "agent-7" {
		t.Errorf("principal %q subject %q, want the email and the sub", id.Principal, id.Subject)
	}

	is.PrincipalClaim = "name"
	v = newVerifier(t, nil, is)
	r := refused(t, verifyErr(v, token(t, p, "agent")), MissingClaim)
	if !strings.Contains(r.Detail, "no name claim") || r.Subject != "agent-7" {
		t.Errorf("refusal = %+v", r)
	}

	c := agent()
	c.Claims["email"] = "not a name"
	p.SetClient("agent", c)
	is.PrincipalClaim = "email"
	v = newVerifier(t, nil, is)
	refused(t, verifyErr(v, token(t, p, "agent")), BadClaim)
}

func verifyErr(v *Verifier, tok string) error {
	_, err := v.Verify(context.Background(), tok)
	return err
}

func TestGroupsChangeBetweenTwoTokensOfOneSubject(t *testing.T) {
	p := startOP(t, jose.RS256)
	p.SetClient("agent", agent("idp-dev"))
	v := newVerifier(t, nil, corp(p))
	first := token(t, p, "agent")
	p.SetClient("agent", agent("idp-ops"))
	second := token(t, p, "agent")
	a, err := v.Verify(context.Background(), first)
	if err != nil {
		t.Fatal(err)
	}
	b, err := v.Verify(context.Background(), second)
	if err != nil {
		t.Fatal(err)
	}
	if a.Subject != b.Subject || a.Principal != b.Principal {
		t.Fatalf("one subject, two identities: %+v %+v", a, b)
	}
	if !slices.Equal(a.Groups, []string{"dev"}) || !slices.Equal(b.Groups, []string{"ops"}) {
		t.Errorf("groups %q then %q, want [dev] then [ops]: each token's own", a.Groups, b.Groups)
	}
	// Again, from the cache: still each token's own.
	a2, _ := v.Verify(context.Background(), first)
	b2, _ := v.Verify(context.Background(), second)
	if !slices.Equal(a2.Groups, a.Groups) || !slices.Equal(b2.Groups, b.Groups) {
		t.Errorf("from the cache: %q, %q", a2.Groups, b2.Groups)
	}
}

func TestGroupsClaimMissing(t *testing.T) {
	p := startOP(t, jose.EdDSA)
	c := agent()
	delete(c.Claims, "groups")
	p.SetClient("agent", c)
	is := corp(p)
	r := refused(t, verifyErr(newVerifier(t, nil, is), token(t, p, "agent")), MissingClaim)
	if !strings.Contains(r.Detail, "no groups claim") {
		t.Errorf("detail = %q", r.Detail)
	}
	is.GroupsOptional = true
	id, err := newVerifier(t, nil, is).Verify(context.Background(), token(t, p, "agent"))
	if err != nil || len(id.Groups) != 0 {
		t.Errorf("with groups optional: %+v, %v; want no groups", id, err)
	}
	c.Claims["groups"] = map[string]any{"ops": true}
	p.SetClient("agent", c)
	refused(t, verifyErr(newVerifier(t, nil, is), token(t, p, "agent")), BadClaim)
}

func TestAnotherAudience(t *testing.T) {
	p := startOP(t, jose.RS256)
	c := agent()
	c.Audience = []string{"https://other.example.com/"}
	p.SetClient("agent", c)
	r := refused(t, verifyErr(newVerifier(t, nil, corp(p)), token(t, p, "agent")), WrongAudience)
	if !strings.Contains(r.Detail, "other.example.com") || !strings.Contains(r.Detail, resource) {
		t.Errorf("detail = %q, want both audiences named", r.Detail)
	}
	// The resource without its trailing slash is the same resource.
	c.Audience = []string{strings.TrimSuffix(resource, "/")}
	p.SetClient("agent", c)
	if err := verifyErr(newVerifier(t, nil, corp(p)), token(t, p, "agent")); err != nil {
		t.Errorf("aud without the trailing slash: %v", err)
	}
}

func TestClockSkew(t *testing.T) {
	p := startOP(t, jose.ES256)
	v := newVerifier(t, nil, corp(p)) // skew 30 s
	for _, tc := range []struct {
		name     string
		ahead    time.Duration
		lifetime time.Duration
		want     Reason
	}{
		{name: "provider 20s ahead", ahead: 20 * time.Second},
		{name: "provider 90s ahead", ahead: 90 * time.Second, want: NotYetValid},
		{name: "expired 20s ago", lifetime: -20 * time.Second},
		{name: "expired 90s ago", lifetime: -90 * time.Second, want: Expired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := agent()
			c.ClockAhead, c.Lifetime = tc.ahead, tc.lifetime
			p.SetClient("agent", c)
			err := verifyErr(v, token(t, p, "agent"))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("within the skew: %v", err)
				}
				return
			}
			refused(t, err, tc.want)
		})
	}
}

func TestCachedTokenExpires(t *testing.T) {
	p := startOP(t, jose.EdDSA)
	p.SetClient("agent", agent())
	c := &clock{t: time.Now()}
	v := newVerifier(t, c, corp(p))
	tok := token(t, p, "agent")
	if err := verifyErr(v, tok); err != nil {
		t.Fatal(err)
	}
	c.advance(5*time.Minute + 20*time.Second) // past exp, within the skew
	if err := verifyErr(v, tok); err != nil {
		t.Fatalf("within the skew after exp: %v", err)
	}
	c.advance(20 * time.Second)
	refused(t, verifyErr(v, tok), Expired)
}

// withHeader is tok with its protected header replaced by header and its
// signature by sig: a real token tampered with.
func withHeader(tok, header, sig string) string {
	parts := strings.Split(tok, ".")
	return base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + parts[1] + "." + sig
}

func TestAlgorithmsNotAllowed(t *testing.T) {
	p := startOP(t, jose.RS256)
	p.SetClient("agent", agent())
	v := newVerifier(t, nil, corp(p))
	tok := token(t, p, "agent")
	sig := strings.Split(tok, ".")[2]
	for _, tc := range []struct{ header, sig string }{
		{`{"alg":"none"}`, ""},
		{`{"alg":"none","typ":"JWT"}`, sig},
		{`{"alg":"HS256","kid":"` + p.SigningKeyID() + `"}`, sig},
		{`{"alg":"RS384","kid":"` + p.SigningKeyID() + `"}`, sig},
		{`{"alg":"PS256","kid":"` + p.SigningKeyID() + `"}`, sig},
	} {
		r := refused(t, verifyErr(v, withHeader(tok, tc.header, tc.sig)), AlgNotAllowed)
		if !strings.Contains(r.Detail, "RS256, ES256, EdDSA") {
			t.Errorf("%s: detail = %q", tc.header, r.Detail)
		}
	}
	// The same token, untampered, is fine.
	if err := verifyErr(v, tok); err != nil {
		t.Fatal(err)
	}
}

func TestBadSignatureAndMalformed(t *testing.T) {
	p := startOP(t, jose.ES256)
	p.SetClient("agent", agent())
	v := newVerifier(t, nil, corp(p))
	tok := token(t, p, "agent")
	parts := strings.Split(tok, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(string(payload), `"agent-7"`, `"root-1"`, 1)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(forged)) + "." + parts[2]
	r := refused(t, verifyErr(v, tampered), BadSignature)
	if r.Subject != "root-1" {
		t.Errorf("refusal names subject %q, want the (unverified) root-1", r.Subject)
	}
	for _, bad := range []string{"", "abc", "a.b.c", parts[0] + "." + parts[1], strings.Repeat("x", 1000)} {
		refused(t, verifyErr(v, bad), Malformed)
	}
}

func TestUnknownIssuer(t *testing.T) {
	p := startOP(t, jose.RS256)
	other := startOP(t, jose.RS256)
	other.SetClient("agent", agent())
	r := refused(t, verifyErr(newVerifier(t, nil, corp(p)), token(t, other, "agent")), UnknownIssuer)
	if r.Issuer != other.Issuer || !strings.Contains(r.Detail, p.Issuer) {
		t.Errorf("refusal = %+v", r)
	}
}

func TestKeysUnreachableAtBoot(t *testing.T) {
	p := startOP(t, jose.RS256)
	p.KeysDown(true)
	_, err := New(context.Background(), Config{Resource: resource, Issuers: []Issuer{corp(p)}})
	var be *BootError
	if !errors.As(err, &be) || be.Issuer != "corp" || !strings.Contains(err.Error(), p.JWKSURL()) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("err = %v, want a boot error naming issuer corp, its JWKS URL and the answer", err)
	}
	// With the key set named explicitly, discovery is not asked.
	is := corp(p)
	is.JWKSURL = p.JWKSURL()
	before := p.DiscoveryRequests()
	if _, err := New(context.Background(), Config{Resource: resource, Issuers: []Issuer{is}}); err == nil {
		t.Fatal("keys down, yet a verifier")
	}
	if p.DiscoveryRequests() != before {
		t.Error("discovery was asked although jwks_url was given")
	}
	// Nothing listening at all.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = New(context.Background(), Config{Resource: resource, Issuers: []Issuer{{Name: "gone", URL: "http://" + addr}}})
	if !errors.As(err, &be) || be.Issuer != "gone" || !strings.Contains(err.Error(), "discovery") {
		t.Fatalf("err = %v, want a boot error for issuer gone's discovery", err)
	}
}

// waitFetch waits for a fetch of issuer url's keys under way, if any.
func waitFetch(v *Verifier, url string) {
	ks := v.issuers[url].keys
	ks.mu.Lock()
	done := ks.inflight
	ks.mu.Unlock()
	if done != nil {
		<-done
	}
}

func TestKeyRotationDuringService(t *testing.T) {
	p := startOP(t, jose.RS256)
	p.SetClient("agent", agent())
	c := &clock{t: time.Now()}
	v := newVerifier(t, c, corp(p))
	old := token(t, p, "agent")
	if err := verifyErr(v, old); err != nil {
		t.Fatal(err)
	}
	fetches := p.JWKSRequests()

	// A new key, announced beside the old one: the first token it signs
	// refetches the keys once, and both tokens verify.
	c.advance(time.Minute)
	if err := p.Rotate(jose.ES256, true); err != nil {
		t.Fatal(err)
	}
	rotated := token(t, p, "agent")
	if err := verifyErr(v, rotated); err != nil {
		t.Fatalf("token of the new key: %v", err)
	}
	if n := p.JWKSRequests() - fetches; n != 1 {
		t.Fatalf("%d fetches of the keys for a new kid, want 1", n)
	}
	if err := verifyErr(v, old); err != nil {
		t.Fatalf("token of the old key, still published: %v", err)
	}

	// Another key within MinRefetch of that fetch: refused without asking
	// the provider, however many tokens come.
	if err := p.Rotate(jose.EdDSA, false); err != nil {
		t.Fatal(err)
	}
	newest := token(t, p, "agent")
	for range 5 {
		r := refused(t, verifyErr(v, newest), UnknownKey)
		if !strings.Contains(r.Detail, "at most every 10s") {
			t.Fatalf("detail = %q", r.Detail)
		}
	}
	if n := p.JWKSRequests() - fetches; n != 1 {
		t.Fatalf("%d fetches, want still 1: an unknown kid refetches at most every MinRefetch", n)
	}
	c.advance(DefaultMinRefetch)
	if err := verifyErr(v, newest); err != nil {
		t.Fatalf("after MinRefetch: %v", err)
	}
	if n := p.JWKSRequests() - fetches; n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
	// The old keys were withdrawn: the tokens they signed, verified
	// before, are verified again (the keys changed, the cache was
	// emptied) and refused.
	refused(t, verifyErr(v, old), UnknownKey)
	refused(t, verifyErr(v, rotated), UnknownKey)
}

// verifiedLongLived starts a provider whose agent's tokens live for
// lifetime, and returns it, the verifier's clock, the verifier and a
// token it has verified (and so cached).
func verifiedLongLived(t *testing.T, lifetime time.Duration) (*testop.Provider, *clock, *Verifier, string) {
	t.Helper()
	p := startOP(t, jose.ES256)
	long := agent()
	long.Lifetime = lifetime
	p.SetClient("agent", long)
	c := &clock{t: time.Now()}
	v := newVerifier(t, c, corp(p))
	tok := token(t, p, "agent")
	if err := verifyErr(v, tok); err != nil {
		t.Fatal(err)
	}
	return p, c, v, tok
}

func TestKeysRefreshedInBackground(t *testing.T) {
	p, c, v, tok := verifiedLongLived(t, time.Hour) // outlives the refresh
	// The provider withdraws the key; the gateway learns of it when its
	// keys are refreshed, not before: the token answers from the cache.
	if err := p.Rotate(jose.ES256, false); err != nil {
		t.Fatal(err)
	}
	if err := verifyErr(v, tok); err != nil {
		t.Fatalf("before the refresh: %v", err)
	}
	fetches := p.JWKSRequests()
	c.advance(DefaultRefresh)
	// A token not in the cache looks the keys up, which starts the
	// refresh; it is answered from the keys at hand.
	next := token(t, p, "agent")
	_ = verifyErr(v, next)
	waitFetch(v, p.Issuer)
	if p.JWKSRequests() == fetches {
		t.Fatal("no refresh of keys older than Refresh")
	}
	refused(t, verifyErr(v, tok), UnknownKey)
	if err := verifyErr(v, next); err != nil {
		t.Fatalf("token of the current key after the refresh: %v", err)
	}
}

func TestKeysUnavailableForNewKid(t *testing.T) {
	p := startOP(t, jose.RS256)
	p.SetClient("agent", agent())
	c := &clock{t: time.Now()}
	v := newVerifier(t, c, corp(p))
	old := token(t, p, "agent")
	if err := verifyErr(v, old); err != nil {
		t.Fatal(err)
	}
	c.advance(time.Minute)
	if err := p.Rotate(jose.RS256, true); err != nil {
		t.Fatal(err)
	}
	p.KeysDown(true)
	r := refused(t, verifyErr(v, token(t, p, "agent")), KeysUnavailable)
	if !strings.Contains(r.Detail, "503") {
		t.Errorf("detail = %q", r.Detail)
	}
	// The cached keys still serve.
	if err := verifyErr(v, old); err != nil {
		t.Fatalf("old token while the key set is down: %v", err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	p := startOP(t, jose.RS256)
	for _, cfg := range []Config{
		{Resource: "gateway", Issuers: []Issuer{corp(p)}},
		{Resource: resource},
		{Resource: resource, Issuers: []Issuer{corp(p), {Name: "again", URL: p.Issuer}}},
	} {
		if _, err := New(context.Background(), cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

func TestSubjectMustBePrintable(t *testing.T) {
	p := startOP(t, jose.ES256)
	c := agent()
	c.Subject = "agent\x1b[2J7"
	p.SetClient("agent", c)
	refused(t, verifyErr(newVerifier(t, nil, corp(p)), token(t, p, "agent")), BadClaim)
	c.Subject = strings.Repeat("s", maxSubject+1)
	p.SetClient("agent", c)
	refused(t, verifyErr(newVerifier(t, nil, corp(p)), token(t, p, "agent")), BadClaim)
	c.Subject = "248 289 ünïcode" // a subject, not a principal name: the principal is the email
	p.SetClient("agent", c)
	is := corp(p)
	is.PrincipalClaim = "email"
	if err := verifyErr(newVerifier(t, nil, is), token(t, p, "agent")); err != nil {
		t.Errorf("a printable subject: %v", err)
	}
}

// A token verified before answers from the cache at most until its
// issuer's keys are due to be fetched again: once its key is withdrawn
// and the keys refreshed, it is refused, although it has not expired.
func TestCachedTokenOfWithdrawnKey(t *testing.T) {
	p, c, v, tok := verifiedLongLived(t, 2*time.Hour) // outlives the refresh
	if err := p.Rotate(jose.ES256, false); err != nil {
		t.Fatal(err)
	}
	fetches := p.JWKSRequests()
	c.advance(DefaultRefresh)
	// Checked again, not answered from the cache: the keys at hand still
	// hold its key, and their refresh starts.
	if err := verifyErr(v, tok); err != nil {
		t.Fatalf("with the keys at hand: %v", err)
	}
	waitFetch(v, p.Issuer)
	if p.JWKSRequests() == fetches {
		t.Fatal("a token from the cache did not refresh keys older than Refresh")
	}
	refused(t, verifyErr(v, tok), UnknownKey)
}

// An identity checked while the cache was emptied (its issuer's keys
// changed meanwhile) is not kept: it may be of a key just withdrawn.
func TestTokenCacheClearedDuringCheck(t *testing.T) {
	var c tokenCache
	c.init(8)
	now := time.Now()
	id := &Identity{Principal: "agent7"}
	gen := c.generation()
	c.clear() // the keys change while the token is checked
	c.put("tok", id, gen, now.Add(time.Hour))
	if _, ok := c.get("tok", now); ok {
		t.Fatal("an identity checked across a clear was kept")
	}
	c.put("tok", id, c.generation(), now.Add(time.Hour))
	if got, ok := c.get("tok", now); !ok || got != id {
		t.Fatal("an identity checked after the clear was not kept")
	}
	if _, ok := c.get("tok", now.Add(time.Hour)); ok {
		t.Fatal("kept past its time")
	}
}

// What a refusal repeats of a token not verified is cut: a token is
// refused past MaxTokenBytes before it is parsed, and an issuer, subject
// or key id the gateway does not know is shortened in the refusal, which
// is logged and answered.
func TestRefusalOfHugeClaimsIsShort(t *testing.T) {
	p := startOP(t, jose.ES256)
	v := newVerifier(t, nil, corp(p))
	enc := func(v string) string { return base64.RawURLEncoding.EncodeToString([]byte(v)) }
	jwtOf := func(header, claims string) string { return enc(header) + "." + enc(claims) + "." + enc("sig") }

	r := refused(t, verifyErr(v, strings.Repeat("a", MaxTokenBytes)+".b.c"), Malformed)
	if !strings.Contains(r.Detail, "at most 32768") {
		t.Errorf("detail %q", r.Detail)
	}
	huge := strings.Repeat("x", 10000)
	r = refused(t, verifyErr(v, jwtOf(`{"alg":"ES256","kid":"k"}`, `{"iss":"https://`+huge+`","sub":"`+huge+`"}`)), UnknownIssuer)
	if len(r.Issuer) > 100 || len(r.Subject) > 100 || len(r.Error()) > 1000 {
		t.Errorf("refusal of %d, %d, %d bytes: %.200s", len(r.Issuer), len(r.Subject), len(r.Error()), r.Error())
	}
	r = refused(t, verifyErr(v, jwtOf(`{"alg":"ES256","kid":"`+huge+`"}`, `{"iss":"`+p.Issuer+`","sub":"`+huge+`"}`)), UnknownKey)
	if r.Issuer != p.Issuer || len(r.Subject) > 100 || len(r.Error()) > 1000 {
		t.Errorf("refusal of issuer %q, %d, %d bytes: %.200s", r.Issuer, len(r.Subject), len(r.Error()), r.Error())
	}
	// A subject the gateway would accept is repeated whole.
	long := strings.Repeat("s", maxSubject)
	r = refused(t, verifyErr(v, jwtOf(`{"alg":"ES256","kid":"k"}`, `{"iss":"`+p.Issuer+`","sub":"`+long+`"}`)), UnknownKey)
	if r.Subject != long {
		t.Errorf("a %d-byte subject was repeated as %q", len(long), r.Subject)
	}
}

// A key id of any length the issuer publishes verifies its tokens.
func TestLongKeyID(t *testing.T) {
	p := startOP(t, jose.ES256)
	p.SetClient("agent", agent())
	kid := "https://keys.example.com/tenants/0f8fad5b-d9cb-469f-a165-70867728950e/signing/2026-12"
	if err := p.RotateNamed(jose.ES256, false, kid); err != nil {
		t.Fatal(err)
	}
	v := newVerifier(t, nil, corp(p))
	if err := verifyErr(v, token(t, p, "agent")); err != nil {
		t.Fatalf("a token of key %q (%d bytes): %v", kid, len(kid), err)
	}
}

// A token checked while its issuer's keys change is not kept: here its
// unknown kid makes the check fetch the keys, which changes them and
// empties the cache after the check began.
func TestTokenCheckedAcrossKeyChangeNotKept(t *testing.T) {
	p := startOP(t, jose.ES256)
	p.SetClient("agent", agent())
	c := &clock{t: time.Now()}
	v := newVerifier(t, c, corp(p))
	if err := p.Rotate(jose.ES256, true); err != nil {
		t.Fatal(err)
	}
	c.advance(DefaultMinRefetch)
	tok := token(t, p, "agent")
	if err := verifyErr(v, tok); err != nil {
		t.Fatal(err)
	}
	if _, ok := v.cache.get(tok, c.now()); ok {
		t.Fatal("a token checked across a change of its issuer's keys was kept")
	}
	if err := verifyErr(v, tok); err != nil {
		t.Fatal(err)
	}
	if _, ok := v.cache.get(tok, c.now()); !ok {
		t.Fatal("a token checked with the keys unchanged was not kept")
	}
}
