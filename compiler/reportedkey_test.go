package compiler

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestReportedKey checks reportedKey, which looks up the prefixes of a path,
// against the definition it replaced: a reported key equal to the path, or
// one followed in it by '.' or '['.
func TestReportedKey(t *testing.T) {
	want := func(bad map[string]bool, dotted string) bool {
		for k := range bad {
			if dotted == k || strings.HasPrefix(dotted, k+".") || strings.HasPrefix(dotted, k+"[") {
				return true
			}
		}
		return false
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		var b strings.Builder
		for range rnd.IntN(7) {
			b.WriteByte("ab.[]0"[rnd.IntN(6)])
		}
		return b.String()
	}
	for range 500 {
		c := newCompilation(PackageName, "#Policy")
		for range rnd.IntN(5) {
			c.badKeys[word()] = true
		}
		for range 50 {
			dotted := word()
			if got, w := c.reportedKey(dotted), want(c.badKeys, dotted); got != w {
				t.Fatalf("reportedKey(%q) with %v = %v, want %v", dotted, c.badKeys, got, w)
			}
		}
	}
}
