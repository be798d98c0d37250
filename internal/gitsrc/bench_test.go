package gitsrc_test

import (
	"fmt"
	"testing"

	git "github.com/go-git/go-git/v5"

	"github.com/policyc/policyc/internal/gitsrc"
	"github.com/policyc/policyc/internal/gitsrc/gittest"
)

// history builds a repository whose HEAD has n commits on its first-parent
// line, the policy in policy/ and every commit touching another file.
func history(b *testing.B, n int) *gittest.Repo {
	b.Helper()
	g := gittest.New(b, b.TempDir())
	g.Write("policy/p.cue", policyV2)
	g.Commit("policy")
	g.Chain(n-1, "CHANGELOG")
	return g
}

// BenchmarkSerial measures the first-parent walk alone, in a repository
// opened once: packed (as a clone has it) for 100, 1,000 and 10,000
// commits, and loose (as go-git writes commits) for 1,000. It grows
// linearly with the depth of the commit.
func BenchmarkSerial(b *testing.B) {
	for _, tc := range []struct {
		n      int
		packed bool
	}{{100, true}, {1000, true}, {10000, true}, {1000, false}} {
		layout := "loose"
		if tc.packed {
			layout = "packed"
		}
		b.Run(fmt.Sprintf("%s/commits=%d", layout, tc.n), func(b *testing.B) {
			g := history(b, tc.n)
			if tc.packed {
				if err := g.Git.RepackObjects(&git.RepackConfig{}); err != nil {
					b.Fatal(err)
				}
			}
			r, err := gitsrc.Open(g.Dir)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			c, err := r.Resolve("HEAD")
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				s, err := r.Serial(c, "HEAD")
				if err != nil || s != uint64(tc.n) {
					b.Fatal(s, err)
				}
			}
		})
	}
}

// BenchmarkRead is what compile --rev does before compiling, on 1,000
// packed commits: open, resolve, read the files, provenance and serial.
func BenchmarkRead(b *testing.B) {
	g := history(b, 1000)
	if err := g.Git.RepackObjects(&git.RepackConfig{}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := gitsrc.Open(g.Dir)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Read("HEAD", "policy"); err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
}
