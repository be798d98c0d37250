package compiler_test

import (
	"fmt"
	"strings"
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

// manyScopesPolicy is a policy with n groups of 20 members, or, when
// groups is false, n principals each with a scope of its own. Group g<i>
// has members u<i> to u<i+19>, so each principal is in up to 20 groups
// and the sets of groups of any two of them differ.
func manyScopesPolicy(n int, groups bool) []compiler.File {
	var src strings.Builder
	src.WriteString("package policy\nmcp_servers: s: access: tool: allow_list: [\"get_*\", \"run_*\"]\n")
	for i := range n {
		if !groups {
			fmt.Fprintf(&src, "principals: \"u%d@example.com\": mcp_servers: s: access: tool: deny_list: [\"run_%d_*\"]\n", i, i)
			continue
		}
		members := make([]string, 20)
		for j := range members {
			members[j] = fmt.Sprintf("%q", fmt.Sprintf("u%d@example.com", i+j))
		}
		fmt.Fprintf(&src, "groups: g%d: {members: [%s], mcp_servers: s: access: tool: deny_list: [\"run_%d_*\"]}\n", i, strings.Join(members, ", "), i)
	}
	return []compiler.File{{Name: "scopes.cue", Data: []byte(src.String())}}
}

// BenchmarkCompileManyGroups compiles a policy with 4,000 overlapping
// groups of 20 members; BenchmarkCompileManyPrincipals one with 4,000
// principals, each with a scope of its own. The classes of principals are
// built from the scopes' members, not by asking every scope about every
// principal:
//
//	go test ./compiler -run '^$' -bench 'Many(Groups|Principals)' -benchmem
func BenchmarkCompileManyGroups(b *testing.B) { benchmarkCompileScopes(b, 4000, true) }

func BenchmarkCompileManyPrincipals(b *testing.B) { benchmarkCompileScopes(b, 4000, false) }

// BenchmarkAnalyzeManyGroups and BenchmarkAnalyzeManyPrincipals run the
// reachability analysis alone on the same policies, without the CUE
// evaluation that takes most of a compile.
func BenchmarkAnalyzeManyGroups(b *testing.B) { benchmarkAnalyzeScopes(b, 4000, true) }

func BenchmarkAnalyzeManyPrincipals(b *testing.B) { benchmarkAnalyzeScopes(b, 4000, false) }

func benchmarkAnalyzeScopes(b *testing.B, n int, groups bool) {
	res := compiler.Compile(compiler.Input{Files: manyScopesPolicy(n, groups), Source: table.Source{PolicyPath: "bench"}})
	if res.Policy == nil {
		b.Fatalf("the benchmark policy does not compile: %v", res.Diagnostics)
	}
	b.ReportAllocs()
	for b.Loop() {
		compiler.AnalyzeReach(res.Policy, compiler.ReachOptions{})
	}
}

func benchmarkCompileScopes(b *testing.B, n int, groups bool) {
	files := manyScopesPolicy(n, groups)
	b.ReportAllocs()
	for b.Loop() {
		res := compiler.Compile(compiler.Input{Files: files, Source: table.Source{PolicyPath: "bench"}})
		if res.Table == nil {
			b.Fatalf("the benchmark policy does not compile: %v", res.Diagnostics)
		}
	}
}

// BenchmarkUnknownKeys evaluates a policy with thousands of unknown keys in
// one block, each reported with its own finding.
func BenchmarkUnknownKeys(b *testing.B) {
	for _, n := range []int{1000, 2500, 10000} {
		var src strings.Builder
		src.WriteString("package policy\n\nmcp_servers: github: access: tool: {\n\tallow_list: [\"get_*\"]\n")
		for i := range n {
			fmt.Fprintf(&src, "\tbogus_key_%d: 1\n", i)
		}
		src.WriteString("}\n")
		files := []compiler.File{{Name: "p.cue", Data: []byte(src.String())}}
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			for b.Loop() {
				if ev := compiler.Evaluate(files, compiler.PackageName, "#Policy"); len(ev.Diagnostics) != n {
					b.Fatalf("%d diagnostics", len(ev.Diagnostics))
				}
			}
		})
	}
}
