package compiler

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/policyc/policyc/internal/glob"
)

// The block's index (by literal prefix and suffix) gives first and earlier
// the answers a scan of every rule in order gives (the plain scan of a
// small block too), on random blocks of
// globs and literals over a small alphabet, U+FFFD included (it matches
// invalid UTF-8, so it must not be indexed as a literal byte).
func TestBlockIndexMatchesScan(t *testing.T) {
	tokens := []string{"a", "b", "ab", "ba", "*", "?", "[ab]", "\uFFFD", "*", "a", "b"}
	r := rand.New(rand.NewPCG(3, 5))
	pattern := func() string {
		var b strings.Builder
		for range 1 + r.IntN(4) {
			b.WriteString(tokens[r.IntN(len(tokens))])
		}
		return b.String()
	}
	var names []string
	var grow func(prefix string, n int)
	grow = func(prefix string, n int) {
		names = append(names, prefix)
		if n == 0 {
			return
		}
		for _, c := range []string{"a", "b", "c", "\uFFFD", "\xff"} {
			grow(prefix+c, n-1)
		}
	}
	grow("", 4)
	for round := range 300 {
		var rules []*rrule
		// Small blocks and blocks past indexedBlock: both the scan and the
		// index are checked.
		n := 1 + r.IntN(24)
		if round%5 == 0 {
			n = indexedBlock + r.IntN(64)
		}
		for i := range n {
			src := pattern()
			g, err := glob.Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			rr := &rrule{entry: &Entry{Pattern: src, Glob: g}, pos: i}
			rr.readPattern()
			rules = append(rules, rr)
		}
		b := &rblock{}
		b.setRules(rules)
		for _, name := range names {
			var want *rrule
			for _, o := range rules {
				if o.match(name) {
					want = o
					break
				}
			}
			if got := b.first(name); got != want {
				t.Fatalf("round %d: first(%q) = %v, a scan finds %v", round, name, describeRule(got), describeRule(want))
			}
		}
		for _, rr := range rules {
			var want []*rrule
			for _, o := range rules[:rr.pos] {
				if !o.pat().Empty() && !disjoint(rr, o) && (!o.isLit || rr.pat().Match(o.lit)) {
					want = append(want, o)
				}
			}
			if got := b.earlier(rr); !slices.Equal(got, want) {
				t.Fatalf("round %d: earlier(%q) has %d rules, a scan %d", round, rr.entry.Pattern, len(got), len(want))
			}
		}
	}
}
