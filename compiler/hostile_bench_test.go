package compiler_test

import (
	"fmt"
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/policygen"
	"github.com/policyc/policyc/runtime/table"
)

// BenchmarkHostile compiles the shapes a pull request could use to exhaust
// a CI runner: long random globs in a global allow_list, many simple globs
// in one block with a literal prefix, a suffix or neither, one list of 200,000
// patterns, and 50,000 generated rules spread over 1,000 servers. Each
// ends within the compiler's budgets: compiled (maybe with
// reach-incomplete), or refused before evaluation (policy-too-large).
// docs/performance.md has the figures:
//
//	go test ./compiler -run '^$' -bench Hostile -benchmem -benchtime 1x
func BenchmarkHostile(b *testing.B) {
	shapes := []struct {
		name    string
		files   []compiler.File
		refused bool
	}{
		{"long=100x300", policygen.LongGlobs(100, 300, 1), false},
		{"prefixes=16000", policygen.Prefixes(16000), false},
		{"suffixes=16000", policygen.Suffixes(16000), false},
		{"infixes=16000", policygen.Infixes(16000), false},
		{"prefixes=200000", policygen.Prefixes(200000), true},
		{"generated=50000", policygen.Generate(policygen.Spec{Servers: 1000, RulesPerServer: 50, Seed: 1}).Files, false},
	}
	for _, s := range shapes {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res := compiler.Compile(compiler.Input{Files: s.files, Source: table.Source{PolicyPath: "bench"}})
				if refused := len(codes(res.Diagnostics, compiler.CodeTooLarge)) > 0; refused != s.refused || !refused && res.Policy == nil {
					b.Fatalf("refused %v, policy %v: %v", refused, res.Policy != nil, res.Diagnostics)
				}
			}
		})
	}
}

// BenchmarkHostileEvaluate runs only CUE's part of the compile (parse, key
// check, evaluation, schema validation) of one list of prefix globs: the
// cost EvaluationBudget bounds. 44,000 entries is about the longest list
// the budget admits.
func BenchmarkHostileEvaluate(b *testing.B) {
	for _, n := range []int{16000, 44000} {
		files := policygen.Prefixes(n)
		b.Run(fmt.Sprintf("prefixes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ev := compiler.Evaluate(files, compiler.PackageName, "#Policy"); compiler.HasErrors(ev.Diagnostics) {
					b.Fatalf("the policy does not evaluate: %v", ev.Diagnostics)
				}
			}
		})
	}
}
