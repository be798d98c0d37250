package compiler

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/policyc/policyc/internal/glob"
)

// TestBlockFirstIndexed: the indexed search of a block (its literals by
// name, then its globs in order) finds the rule a search rule by rule finds,
// on random blocks that repeat literals and mix globs before, among and
// after them.
func TestBlockFirstIndexed(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	words := []string{"a", "b", "ab", "ba", "aa", "b_a", "a_b", ""}
	globs := []string{"*", "a*", "*b", "a?", "?b", "[ab]*", "*_*", "b*a"}
	for trial := range 3000 {
		n := 1 + rng.IntN(12)
		var rules []*rrule
		for i := range n {
			src := words[rng.IntN(len(words)-1)]
			if rng.IntN(3) == 0 {
				src = globs[rng.IntN(len(globs))]
			}
			e := &Entry{Pattern: src, Glob: glob.MustParse(src)}
			r := &rrule{entry: e, pos: i}
			r.readPattern()
			rules = append(rules, r)
		}
		b := &rblock{}
		b.setRules(rules)
		for _, name := range words {
			var want *rrule
			for _, r := range rules {
				if r.match(name) {
					want = r
					break
				}
			}
			if got := b.first(name); got != want {
				t.Fatalf("trial %d, name %q: first is %s, a search rule by rule finds %s", trial, name, describeRule(got), describeRule(want))
			}
		}
	}
}

func describeRule(r *rrule) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("rule %d %q", r.pos, r.entry.Pattern)
}
