package testcase

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/policygen"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// BenchmarkTest runs 10,000 cases on the 10,000-rule policy
// (internal/policygen, 200 servers × 50 tool rules, seed 1) after its
// compile, in the steps of policyc test: read (the test file checked
// against #Tests by compiler.Evaluate, the reader of every CUE input),
// run (resolve the cases against the table, load it into runtime/decide
// and decide every case), coverage (run, counting the cases of every rule,
// and the reachability analysis that tells unreachable rules) and all of
// it (read, then coverage):
//
//	go test ./testcase -run '^$' -bench BenchmarkTest -benchtime=5x
func BenchmarkTest(b *testing.B) {
	gen := policygen.Generate(policygen.Spec{Servers: 200, RulesPerServer: 50, Seed: 1})
	res := compiler.Compile(compiler.Input{Files: gen.Files, Source: table.Source{PolicyPath: "gen"}})
	if res.Table == nil {
		b.Fatal("the generated policy does not compile")
	}
	files := []compiler.File{{Name: "tests/gen.cue", Data: benchCases(b, res.Table, gen, 10000)}}
	read := func(b *testing.B) []*Case {
		cases, diags := Parse(files)
		if len(diags) > 0 || len(cases) != 10000 {
			b.Fatalf("%d cases, %d problems", len(cases), len(diags))
		}
		return cases
	}
	run := func(b *testing.B, cases []*Case, coverage bool) {
		if ds := Check(cases, res.Table); len(ds) > 0 {
			b.Fatal(ds[0].Format(""))
		}
		r, err := NewRunner(res.Table, cases)
		if err != nil {
			b.Fatal(err)
		}
		rep := r.Run(cases, coverage)
		if rep.Failed != 0 {
			b.Fatalf("%d cases failed", rep.Failed)
		}
		if coverage {
			if cov := rep.Coverage(compiler.AnalyzeReach(res.Policy, compiler.ReachOptions{})); cov.Covered == 0 {
				b.Fatal("no rule covered")
			}
		}
	}
	b.Run("read", func(b *testing.B) {
		for b.Loop() {
			read(b)
		}
	})
	cases := read(b)
	b.Run("run", func(b *testing.B) {
		for b.Loop() {
			run(b, cases, false)
		}
	})
	b.Run("coverage", func(b *testing.B) {
		for b.Loop() {
			run(b, cases, true)
		}
	})
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			run(b, read(b), true)
		}
	})
}

// benchCases writes n cases over gen's servers and names, each expecting
// what the table decides (so that every case passes), a quarter of them
// naming the deciding rule by its origin.
func benchCases(b *testing.B, t *table.Table, gen policygen.Policy, n int) []byte {
	rt, err := decide.LoadForInspection(t)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var src strings.Builder
	src.WriteString("package tests\n\ncases: {\n")
	for i := range n {
		server, name := gen.Servers[r.IntN(len(gen.Servers))], gen.Names[r.IntN(len(gen.Names))]
		d := rt.Decide("", server, table.Tool, name)
		rule := ""
		if i%4 == 0 && d.Rule != nil {
			rule = fmt.Sprintf(", rule: %q", d.Rule.Origin)
		}
		fmt.Fprintf(&src, "\t%s: \"case %d\": {server: %q, name: %q, expect: %q%s}\n", server, i, server, name, d.Effect, rule)
	}
	src.WriteString("}\n")
	return []byte(src.String())
}
