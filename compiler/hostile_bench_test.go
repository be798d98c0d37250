package compiler_test

import (
	"fmt"
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/policygen"
	"github.com/policyc/policyc/runtime/table"
)

// BenchmarkHostile compiles the shapes a pull request could use to exhaust
// a CI runner: long random globs in a global allow_list, and many simple
// prefix globs in one block. Each must finish within the analysis's budget
// (docs/performance.md has the figures):
//
//	go test ./compiler -run '^$' -bench Hostile -benchmem -benchtime 1x
func BenchmarkHostile(b *testing.B) {
	shapes := []struct {
		name  string
		files []compiler.File
	}{
		{"long=100x300", policygen.LongGlobs(100, 300, 1)},
		{"prefixes=16000", policygen.Prefixes(16000)},
		{"prefixes=200000", policygen.Prefixes(200000)},
		{"suffixes=16000", policygen.Suffixes(16000)},
	}
	for _, s := range shapes {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res := compiler.Compile(compiler.Input{Files: s.files, Source: table.Source{PolicyPath: "bench"}})
				if res.Policy == nil {
					b.Fatalf("the policy does not compile: %v", res.Diagnostics)
				}
			}
		})
	}
}

// BenchmarkHostileEvaluate runs only CUE's part of the compile of the
// prefix shapes (parse, key check, evaluation, schema validation): the cost
// the analysis's budget does not bound.
func BenchmarkHostileEvaluate(b *testing.B) {
	for _, n := range []int{16000, 90000, 200000} {
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
