package compiler_test

import (
	"fmt"
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/policygen"
	"github.com/policyc/policyc/runtime/table"
)

// BenchmarkCompile compiles generated policies end to end (CUE evaluation,
// checks, analysis, freezing). BenchmarkEvaluate runs only the CUE part
// (parse, key check, evaluation, schema validation), so the two together
// say how much of a compile is CUE.
func BenchmarkCompile(b *testing.B) {
	for _, size := range []struct{ servers, rules int }{{50, 35}, {200, 50}} {
		gen := policygen.Generate(policygen.Spec{Servers: size.servers, RulesPerServer: size.rules, Seed: 1})
		b.Run(fmt.Sprintf("rules=%d", gen.Rules), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				res := compiler.Compile(compiler.Input{Files: gen.Files, Source: table.Source{PolicyPath: "gen"}})
				if res.Table == nil {
					b.Fatal("generated policy does not compile")
				}
			}
		})
	}
}

func BenchmarkEvaluate(b *testing.B) {
	for _, size := range []struct{ servers, rules int }{{50, 35}, {200, 50}} {
		gen := policygen.Generate(policygen.Spec{Servers: size.servers, RulesPerServer: size.rules, Seed: 1})
		b.Run(fmt.Sprintf("rules=%d", gen.Rules), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				ev := compiler.Evaluate(gen.Files, compiler.PackageName, "#Policy")
				if compiler.HasErrors(ev.Diagnostics) {
					b.Fatal("generated policy does not evaluate")
				}
			}
		})
	}
}
