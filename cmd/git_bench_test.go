package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/gitsrc/gittest"
	"github.com/policyc/policyc/internal/policygen"
)

// benchRepo builds a repository whose policy/ holds files and whose HEAD
// has commits commits on its first-parent line; packed, it is repacked as
// a clone would have it.
func benchRepo(b *testing.B, files []compiler.File, commits int, packed bool) *gittest.Repo {
	b.Helper()
	g := gittest.New(b, b.TempDir())
	g.WriteFiles("policy", files)
	g.Commit("policy")
	g.Chain(commits-1, "CHANGELOG")
	if packed {
		if err := g.Git.RepackObjects(&git.RepackConfig{}); err != nil {
			b.Fatal(err)
		}
	}
	return g
}

func teamPolicy(b *testing.B) []compiler.File {
	b.Helper()
	files, err := compiler.ReadDir("../examples/team")
	if err != nil {
		b.Fatal(err)
	}
	return files
}

// BenchmarkCompileRev compares, for the same policy, compiling a plain
// directory (no repository), the clean work tree of a repository with 1,000
// commits (which also reads HEAD and counts the serial) and --rev HEAD of
// that repository, loose (as go-git writes objects) and packed (as a clone
// has them).
func BenchmarkCompileRev(b *testing.B) {
	policies := []struct {
		name  string
		files func(*testing.B) []compiler.File
	}{
		{"team", teamPolicy},
		{"1750rules", func(*testing.B) []compiler.File {
			return policygen.Generate(policygen.Spec{Servers: 50, RulesPerServer: 35, Seed: 1}).Files
		}},
	}
	for _, pol := range policies {
		files := pol.files(b)
		b.Run(pol.name+"/plain-dir", func(b *testing.B) {
			dir := b.TempDir()
			for _, f := range files {
				os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644)
			}
			for b.Loop() {
				mustRun(b, 0, "compile", dir, "-o", os.DevNull)
			}
		})
		for _, packed := range []bool{false, true} {
			layout := "loose"
			if packed {
				layout = "packed"
			}
			g := benchRepo(b, files, 1000, packed)
			b.Run(pol.name+"/worktree-1000-"+layout, func(b *testing.B) {
				for b.Loop() {
					mustRun(b, 0, "compile", filepath.Join(g.Dir, "policy"), "-o", os.DevNull)
				}
			})
			b.Run(pol.name+"/rev-1000-"+layout, func(b *testing.B) {
				for b.Loop() {
					mustRun(b, 0, "compile", "--rev", "HEAD", "--repo", g.Dir, "policy", "-o", os.DevNull)
				}
			})
		}
	}
}

// BenchmarkDiff10k runs policyc diff between two revisions of the
// 10,000-rule policy (internal/policygen, 200 servers × 50 tool rules, ~60%
// globs): the second revision moves a rule on every 40th server and adds a
// global deny that touches every server.
func BenchmarkDiff10k(b *testing.B) {
	gen := policygen.Generate(policygen.Spec{Servers: 200, RulesPerServer: 50, Seed: 1})
	g := gittest.New(b, b.TempDir())
	g.WriteFiles("policy", gen.Files)
	g.Commit("10,000 rules")
	g.WriteFiles("policy", gittest.Revise(gen.Files))
	g.Commit("purge nothing")
	for b.Loop() {
		mustRun(b, ExitChanged, "diff", "HEAD~1", "HEAD", "--repo", g.Dir, "policy")
	}
}

// BenchmarkBlameWalk: blame of a rule whose line was rewritten 20 times
// (another entry added each time) in 1,000 commits, so that the search
// compiles 20 earlier policies; packed, as a clone has it.
func BenchmarkBlameWalk(b *testing.B) {
	g := gittest.New(b, b.TempDir())
	g.Write("policy/linear.cue", linearV2)
	g.Commit("policy")
	line := `approval_list: ["save_issue"`
	for i := range 20 {
		g.Chain(49, "CHANGELOG")
		line += `, "t` + string(rune('a'+i)) + `"`
		g.Write("policy/linear.cue", strings.Replace(linearV2, `approval_list: ["save_issue"`, line, 1))
		g.Commit("hold another")
	}
	if err := g.Git.RepackObjects(&git.RepackConfig{}); err != nil {
		b.Fatal(err)
	}
	policy := filepath.Join(g.Dir, "policy")
	first := ""
	for b.Loop() {
		code, out, errOut := runPolicyc("blame", "--server", "linear", "--name", "save_issue", policy, "--format", "json")
		if code != 0 {
			b.Fatalf("blame: %d %s", code, errOut)
		}
		if first == "" {
			first = out
		}
	}
	if !strings.Contains(first, `"subject": "policy"`) {
		b.Fatalf("blame did not reach the first commit:\n%s", first)
	}
}
