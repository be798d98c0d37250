package decisiondiff

import (
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/gitsrc/gittest"
	"github.com/policyc/policyc/internal/policygen"
)

func filesMap(fs []compiler.File) map[string]string {
	m := map[string]string{}
	for _, f := range fs {
		m[f.Name] = string(f.Data)
	}
	return m
}

// BenchmarkCompare10k compares two revisions of the 10,000-rule policy
// (internal/policygen: 200 servers × 50 tool rules, ~60% globs). The second
// revision adds a global deny, so every server's block differs and is
// searched, not skipped: the worst case for a change of that size.
func BenchmarkCompare10k(b *testing.B) {
	gen := policygen.Generate(policygen.Spec{Servers: 200, RulesPerServer: 50, Seed: 1})
	old := compile(b, filesMap(gen.Files))
	new := compile(b, filesMap(gittest.Revise(gen.Files)))
	var r *Report
	for b.Loop() {
		var err error
		if r, err = Compare(old, new, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	if len(r.Changes) == 0 || len(r.Undecided) > 0 {
		b.Fatalf("%d changes, %d undecided", len(r.Changes), len(r.Undecided))
	}
	b.ReportMetric(float64(len(r.Changes)), "changes")
}

// BenchmarkCompare10kSame compares the policy with a recompilation of
// itself: every block is skipped as unchanged.
func BenchmarkCompare10kSame(b *testing.B) {
	gen := policygen.Generate(policygen.Spec{Servers: 200, RulesPerServer: 50, Seed: 1})
	old := compile(b, filesMap(gen.Files))
	new := compile(b, filesMap(gen.Files))
	for b.Loop() {
		r, err := Compare(old, new, Options{})
		if err != nil || r.Changed() {
			b.Fatal(err, r.Changes)
		}
	}
}
