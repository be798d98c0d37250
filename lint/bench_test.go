package lint

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/policyc/policyc/internal/policygen"
)

// BenchmarkLintExamples runs the whole lint pipeline in process on the
// bundled team example, files already read: compile (CUE evaluation,
// checks, reachability), ignores, levels and the text report.
func BenchmarkLintExamples(b *testing.B) {
	files := readDir(filepath.Join("..", "examples", "team"))
	b.ReportAllocs()
	for b.Loop() {
		rep := Lint(files, nil)
		if err := WriteText(io.Discard, rep, Output{Root: "examples/team"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLintGenerated runs the pipeline on generated policies of 50 tool
// rules per server (about 60% globs, deny, approval and allow mixed), up to
// the 10,000-rule policy (200 servers).
func BenchmarkLintGenerated(b *testing.B) {
	for _, servers := range []int{20, 200} {
		g := policygen.Generate(policygen.Spec{Servers: servers, RulesPerServer: 50, Seed: 1})
		b.Run(fmt.Sprintf("rules=%d", g.Rules), func(b *testing.B) {
			for b.Loop() {
				rep := Lint(g.Files, nil)
				if err := WriteText(io.Discard, rep, Output{Root: "p"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
