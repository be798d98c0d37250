package compiler_test

import (
	"strings"
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/policygen"
)

// The shapes of BenchmarkHostile end, each, with the finding that names
// the budget they hit, at the rule or list that hit it. The budgets count
// states, words and comparisons, so these tests need no timer.
func TestHostileShapes(t *testing.T) {
	t.Run("long globs", func(t *testing.T) {
		res := compiler.Compile(compiler.Input{Files: policygen.LongGlobs(100, 300, 1)})
		ds := codes(res.Diagnostics, compiler.CodeReachIncomplete)
		if res.Table == nil || len(ds) != 1 || ds[0].Pos.String() != "policy.cue:3:44" ||
			!strings.Contains(ds[0].Message, "more than 8388608 words of automaton and states (glob.MaxWitnessWords)") {
			t.Fatalf("table %v, findings %v", res.Table != nil, res.Diagnostics)
		}
	})
	t.Run("one list of 200,000 patterns", func(t *testing.T) {
		res := compiler.Compile(compiler.Input{Files: policygen.Prefixes(200000)})
		if len(res.Diagnostics) != 1 || res.Diagnostics[0].Code != compiler.CodeTooLarge || res.Diagnostics[0].Pos.String() != "policy.cue:3:43" ||
			!strings.Contains(res.Diagnostics[0].Message, "this list has 200,000 entries") ||
			!strings.Contains(res.Diagnostics[0].Message, "over the evaluation budget of 2,000,000,000") {
			t.Fatalf("findings %v", res.Diagnostics)
		}
	})
	t.Run("globs with no literal affix", func(t *testing.T) {
		// Every rule of *_t0_*, *_t1_*, ... is compared with every one
		// before it: a budget of a million units runs out among 3,000 of
		// them.
		res := compiler.Compile(compiler.Input{Files: policygen.Infixes(3000)})
		if res.Policy == nil {
			t.Fatal(res.Diagnostics)
		}
		full := compiler.AnalyzeReach(res.Policy, compiler.ReachOptions{})
		if ds := codes(full.Diagnostics, compiler.CodeReachIncomplete); len(ds) != 0 {
			t.Fatalf("with the default budget: %v", ds)
		}
		small := compiler.AnalyzeReach(res.Policy, compiler.ReachOptions{Budget: 1_000_000})
		ds := codes(small.Diagnostics, compiler.CodeReachIncomplete)
		if len(ds) != 1 || !strings.Contains(ds[0].Message, "the analysis used up the work it may do on one policy") {
			t.Fatalf("with a budget of a million units: %v", ds)
		}
	})
	for name, files := range map[string][]compiler.File{"many prefixes": policygen.Prefixes(16000), "many suffixes": policygen.Suffixes(16000)} {
		t.Run(name, func(t *testing.T) {
			// t0_*, t1_*, ... or *_t0, *_t1, ...: the rules are indexed by
			// their literal prefix and suffix, so 16,000 of them are settled
			// with a small part of the budget.
			res := compiler.Compile(compiler.Input{Files: files})
			if res.Table == nil || len(res.Diagnostics) != 0 {
				t.Fatalf("table %v, findings %v", res.Table != nil, res.Diagnostics)
			}
			r := compiler.AnalyzeReach(res.Policy, compiler.ReachOptions{Budget: compiler.ReachBudget / 100})
			if ds := codes(r.Diagnostics, compiler.CodeReachIncomplete); len(ds) != 0 {
				t.Fatalf("with a hundredth of the budget: %v", ds)
			}
		})
	}
}

func codes(ds []compiler.Diagnostic, code string) []compiler.Diagnostic {
	var out []compiler.Diagnostic
	for _, d := range ds {
		if d.Code == code {
			out = append(out, d)
		}
	}
	return out
}
