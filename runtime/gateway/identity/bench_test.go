package identity

import (
	"context"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// BenchmarkVerifyCached is a token presented again: a map lookup and a
// look at the clock, no signature check.
func BenchmarkVerifyCached(b *testing.B) {
	p := startOP(b, jose.RS256)
	p.SetClient("agent", agent("idp-ops", "idp-dev"))
	v := newVerifier(b, nil, corp(p))
	tok := token(b, p, "agent", "mcp")
	if _, err := v.Verify(context.Background(), tok); err != nil {
		b.Fatal(err)
	}
	fetches := p.JWKSRequests()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
	if p.JWKSRequests() != fetches {
		b.Fatal("the keys were fetched while verifying a cached token")
	}
}

// BenchmarkVerifyFirst is a token seen for the first time, per algorithm:
// the signature check and the claims, with the keys at hand.
func BenchmarkVerifyFirst(b *testing.B) {
	for _, alg := range Algorithms {
		b.Run(string(alg), func(b *testing.B) {
			p := startOP(b, alg)
			p.SetClient("agent", agent("idp-ops", "idp-dev"))
			v := newVerifier(b, nil, corp(p))
			tok := token(b, p, "agent", "mcp")
			ctx := context.Background()
			fetches := p.JWKSRequests()
			b.ReportAllocs()
			for b.Loop() {
				v.cache.clear()
				if _, err := v.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
			if p.JWKSRequests() != fetches {
				b.Fatal("the keys were fetched for a known kid")
			}
		})
	}
}
