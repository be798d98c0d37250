package identity

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/policyc/policyc/internal/clip"
)

// maxKeySetBytes bounds a key set document.
const maxKeySetBytes = 1 << 20

// errKeysUnavailable is a key set that could not be fetched for a key id
// the cached one lacks.
var errKeysUnavailable = errors.New("keys unavailable")

// discover reads issuerURL's OpenID discovery document (go-oidc checks
// that it names the same issuer) and returns its jwks_uri.
func discover(ctx context.Context, client *http.Client, issuerURL string) (string, error) {
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, client), issuerURL)
	if err != nil {
		return "", fmt.Errorf("OpenID discovery of issuer %s failed: %w", issuerURL, err)
	}
	var meta struct {
		JWKSURL string `json:"jwks_uri"`
	}
	if err := p.Claims(&meta); err != nil || meta.JWKSURL == "" {
		return "", fmt.Errorf("the discovery document of issuer %s names no jwks_uri; give jwks_url", issuerURL)
	}
	return meta.JWKSURL, nil
}

// keySet is one issuer's keys, as last fetched.
type keySet struct {
	name    string // the issuer's name, for the log
	url     string
	cfg     *Config
	changed func() // called when a fetch changes the keys

	cur atomic.Pointer[keys]

	mu       sync.Mutex
	inflight chan struct{} // closed when the fetch under way ends
	fetchErr error         // the last fetch's error
}

// keys is a fetched key set: by key id, each usable signature key.
type keys struct {
	byID    map[string][]jose.JSONWebKey
	all     []jose.JSONWebKey
	fetched time.Time
}

func newKeySet(name, url string, cfg *Config, changed func()) *keySet {
	return &keySet{name: name, url: url, cfg: cfg, changed: changed}
}

// lookup returns the keys that may have signed a token with kid and alg.
// A kid the cached set lacks refetches it, unless it was fetched less
// than MinRefetch ago; a set older than Refresh is refetched in the
// background, the cached one answering meanwhile.
func (s *keySet) lookup(ctx context.Context, kid string, alg jose.SignatureAlgorithm) ([]jose.JSONWebKey, error) {
	k := s.cur.Load()
	now := s.cfg.Now()
	if now.Sub(k.fetched) >= s.cfg.Refresh {
		s.refreshInBackground()
	}
	if m := k.match(kid, alg); len(m) > 0 {
		return m, nil
	}
	if now.Sub(k.fetched) < s.cfg.MinRefetch {
		return nil, fmt.Errorf("issuer %s has no %s key %s (its keys were fetched %s ago; they are fetched again for an unknown key at most every %s)",
			s.name, alg, clip.Quote(kid), now.Sub(k.fetched).Round(time.Millisecond), s.cfg.MinRefetch)
	}
	if err := s.refetch(ctx); err != nil {
		return nil, fmt.Errorf("%w: issuer %s: key %s is not among the cached keys, and fetching them from %s failed: %v", errKeysUnavailable, s.name, clip.Quote(kid), s.url, err)
	}
	if m := s.cur.Load().match(kid, alg); len(m) > 0 {
		return m, nil
	}
	return nil, fmt.Errorf("issuer %s has no %s key %s, also after fetching its keys again", s.name, alg, clip.Quote(kid))
}

// match is the keys of k with kid (any, when kid is empty) that sign
// with alg.
func (k *keys) match(kid string, alg jose.SignatureAlgorithm) []jose.JSONWebKey {
	cands := k.all
	if kid != "" {
		cands = k.byID[kid]
	}
	var out []jose.JSONWebKey
	for _, c := range cands {
		if c.Algorithm == "" || c.Algorithm == string(alg) {
			if keyFits(c.Key, alg) {
				out = append(out, c)
			}
		}
	}
	return out
}

// refetch fetches the keys once for every caller waiting at once; a
// caller that finds a fetch under way waits for it.
func (s *keySet) refetch(ctx context.Context) error {
	done := s.start()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetchErr
}

// start starts a fetch unless one is under way, and returns the channel
// closed when the fetch under way ends. The fetch is no caller's: one
// that goes away leaves it to finish for the others.
func (s *keySet) start() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight == nil {
		done := make(chan struct{})
		s.inflight = done
		go func() {
			err := s.fetch(context.Background())
			s.mu.Lock()
			s.fetchErr, s.inflight = err, nil
			s.mu.Unlock()
			close(done)
		}()
	}
	return s.inflight
}

// refreshInBackground starts a fetch unless one is under way.
func (s *keySet) refreshInBackground() { s.start() }

// fetch fetches the key set, and logs a failure. A fetch that fails
// leaves the cached keys as they are, but counts as a fetch for
// MinRefetch, so that an unreachable endpoint is not asked on every
// request.
func (s *keySet) fetch(ctx context.Context) error {
	err := s.load(ctx)
	if err != nil {
		s.cfg.Logger.Warn("issuer keys could not be fetched", "issuer", s.name, "jwks_url", s.url, "error", err.Error())
	}
	return err
}

// load is fetch without the log: the first fetch's error is the
// Verifier's.
func (s *keySet) load(ctx context.Context) error {
	got, err := s.get(ctx)
	now := s.cfg.Now()
	old := s.cur.Load()
	if err != nil {
		if old != nil {
			stale := *old
			stale.fetched = now
			s.cur.Store(&stale)
		}
		return err
	}
	got.fetched = now
	s.cur.Store(got)
	if old != nil && !sameKeys(old, got) {
		s.cfg.Logger.Info("issuer keys changed", "issuer", s.name, "jwks_url", s.url, "kids", strings.Join(kids(got), ","))
		s.changed()
	}
	return nil
}

// get fetches and parses the key set: its usable public signature keys.
// A set with none is an error.
func (s *keySet) get(ctx context.Context) (*keys, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", s.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxKeySetBytes {
		return nil, fmt.Errorf("%s: the key set is larger than %d bytes", s.url, maxKeySetBytes)
	}
	k, err := parseKeySet(body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.url, err)
	}
	return k, nil
}

// parseKeySet reads a JWKS document: the public keys meant for signatures
// (use "sig" or none) of a type one of Algorithms verifies. Keys it cannot
// use (encryption keys, other curves, symmetric keys) are skipped, as RFC
// 7517 asks; a set with no usable key is an error.
func parseKeySet(body []byte) (*keys, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("not a JWKS document: %v", err)
	}
	k := &keys{byID: map[string][]jose.JSONWebKey{}}
	for _, r := range raw.Keys {
		var jwk jose.JSONWebKey
		if err := jwk.UnmarshalJSON(r); err != nil {
			continue // a key type go-jose does not know
		}
		if !jwk.Valid() || !jwk.IsPublic() || (jwk.Use != "" && jwk.Use != "sig") {
			continue
		}
		if !slices.ContainsFunc(Algorithms, func(a jose.SignatureAlgorithm) bool { return keyFits(jwk.Key, a) }) {
			continue
		}
		k.all = append(k.all, jwk)
		k.byID[jwk.KeyID] = append(k.byID[jwk.KeyID], jwk)
	}
	if len(k.all) == 0 {
		return nil, errors.New("the key set has no public signature key for RS256, ES256 or EdDSA")
	}
	return k, nil
}

// keyFits says whether key can verify alg.
func keyFits(key any, alg jose.SignatureAlgorithm) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return alg == jose.RS256 && k.N.BitLen() >= 2048
	case *ecdsa.PublicKey:
		return alg == jose.ES256 && k.Curve == elliptic.P256()
	case ed25519.PublicKey:
		return alg == jose.EdDSA
	}
	return false
}

// sameKeys says whether two fetches of a key set hold the same keys
// under the same ids.
func sameKeys(a, b *keys) bool {
	return slices.Equal(fingerprints(a), fingerprints(b))
}

func fingerprints(k *keys) []string {
	out := make([]string, 0, len(k.all))
	for _, key := range k.all {
		tp, _ := key.Thumbprint(crypto.SHA256)
		out = append(out, key.KeyID+"\x00"+string(tp))
	}
	slices.Sort(out)
	return out
}

func kids(k *keys) []string {
	out := make([]string, 0, len(k.all))
	for _, key := range k.all {
		out = append(out, key.KeyID)
	}
	slices.Sort(out)
	return out
}
