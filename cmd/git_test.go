package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/policyc/policyc/internal/gitsrc/gittest"
	"github.com/policyc/policyc/runtime/table"
)

// run runs policyc in-process and returns its exit code and output.
func run(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// mustRun runs policyc and fails the test unless it exits with want.
func mustRun(t testing.TB, want int, args ...string) (string, string) {
	t.Helper()
	code, stdout, stderr := run(t, args...)
	if code != want {
		t.Fatalf("policyc %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, stdout, stderr)
	}
	return stdout, stderr
}

const linearV1 = `package policy

approval_channels: page: approvals_page: {}

mcp_servers: linear: access: tool: {
	allow_list: ["list_*", "get_*", "save_issue"]
	deny_list: ["delete_*"]
	approval_channel: "page"
}
`

// linearV2 holds save_issue for approval (line 8).
const linearV2 = `package policy

approval_channels: page: approvals_page: {}

mcp_servers: linear: access: tool: {
	allow_list: ["list_*", "get_*"]
	deny_list: ["delete_*"]
	approval_list: ["save_issue"]
	approval_channel: "page"
	approval_timeout_seconds: 60
}
`

const githubV1 = `package policy

mcp_servers: github: access: tool: allow_list: ["get_*", "list_*"]
`

// policyRepo builds a repository with the policy in policy/: commit 1 by
// Alice, commit 2 by Bob (save_issue needs approval), tagged v2.
func policyRepo(t testing.TB) (*gittest.Repo, plumbing.Hash, plumbing.Hash) {
	t.Helper()
	g := gittest.New(t, filepath.Join(t.TempDir(), "policies"))
	g.SetOrigin("https://ci:token@git.example.com/acme/policies.git")
	g.Write("policy/linear.cue", linearV1)
	g.Write("policy/github.cue", githubV1)
	g.Write("README.md", "# policies\n")
	c1 := g.Commit("Linear and GitHub policy")
	g.Write("policy/linear.cue", linearV2)
	c2 := g.CommitAs(gittest.Bob, "Hold save_issue for approval\n\nIssues are visible to customers.")
	g.Tag("v2", c2, "release 2")
	return g, c1, c2
}

func decodeTable(t testing.TB, b []byte) *table.Table {
	t.Helper()
	tb, err := table.Decode(b)
	if err != nil {
		t.Fatalf("decode table: %v\n%s", err, b)
	}
	return tb
}

func readTable(t testing.TB, path string) ([]byte, *table.Table) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b, decodeTable(t, b)
}

func TestCompileRevProvenance(t *testing.T) {
	g, c1, c2 := policyRepo(t)
	policy := filepath.Join(g.Dir, "policy")
	out := filepath.Join(t.TempDir(), "table.json")
	mustRun(t, 0, "compile", "--rev", "HEAD", policy, "-o", out)
	_, tb := readTable(t, out)
	commit, _ := g.Git.CommitObject(c2)
	root, _ := commit.Tree()
	sub, _ := root.Tree("policy")
	want := table.Source{
		Commit:     c2.String(),
		CommitTime: "2025-03-01T07:01:00Z",
		PolicyPath: "policy",
		Repository: "https://git.example.com/acme/policies.git",
		Tree:       sub.Hash.String(),
	}
	if tb.Source != want || tb.Serial != 2 {
		t.Errorf("source %+v serial %d\nwant   %+v serial 2", tb.Source, tb.Serial, want)
	}
	if tb.Servers["linear"].Tool.Rules[1].Effect != table.Approve.String() {
		t.Errorf("HEAD's policy was not the one compiled: %+v", tb.Servers["linear"].Tool.Rules)
	}

	// Every way of naming a revision.
	for rev, wantCommit := range map[string]plumbing.Hash{
		"main": c2, "v2": c2, "refs/tags/v2": c2, c2.String(): c2, c2.String()[:7]: c2,
		"HEAD~1": c1, "main^": c1, "v2~1": c1, c1.String(): c1,
	} {
		stdout, _ := mustRun(t, 0, "compile", "--rev", rev, "--repo", g.Dir, "policy")
		tb := decodeTable(t, []byte(stdout))
		if tb.Source.Commit != wantCommit.String() {
			t.Errorf("--rev %s compiled %s, want %s", rev, tb.Source.Commit, wantCommit)
		}
	}
	// A detached HEAD.
	g.Detach(c1)
	stdout, _ := mustRun(t, 0, "compile", "--rev", "HEAD", policy)
	if tb := decodeTable(t, []byte(stdout)); tb.Source.Commit != c1.String() || tb.Serial != 1 {
		t.Errorf("detached HEAD: commit %s serial %d", tb.Source.Commit, tb.Serial)
	}
}

func TestCompileRevIgnoresWorkTree(t *testing.T) {
	g, _, _ := policyRepo(t)
	policy := filepath.Join(g.Dir, "policy")
	committed, _ := mustRun(t, 0, "compile", "--rev", "HEAD", policy)

	// A clean work tree builds exactly the table of HEAD.
	clean, stderr := mustRun(t, 0, "compile", policy)
	if clean != committed || stderr != "" {
		t.Errorf("clean work tree differs from --rev HEAD:\n%s\n%s\nstderr %s", clean, committed, stderr)
	}
	clean2, _ := mustRun(t, 0, "compile", "--require-clean", "--repo", g.Dir, "policy")
	if clean2 != committed {
		t.Error("--require-clean --repo on a clean tree differs from --rev HEAD")
	}

	// Uncommitted edits do not leak into a revision build...
	g.WriteUnstaged("policy/linear.cue", linearV1)
	g.WriteUnstaged("policy/extra.cue", "package policy\n")
	again, _ := mustRun(t, 0, "compile", "--rev", "HEAD", policy)
	if again != committed {
		t.Error("--rev HEAD changed with the work tree")
	}
	// ...the work tree build is marked dirty, with serial 0...
	dirty, stderr := mustRun(t, 0, "compile", policy)
	tb := decodeTable(t, []byte(dirty))
	if !tb.Source.Dirty || tb.Serial != 0 || tb.Source.Tree != "" || tb.Source.Commit != g.Head().String() {
		t.Errorf("dirty table: %+v serial %d", tb.Source, tb.Serial)
	}
	if !strings.Contains(stderr, "marked dirty") || !strings.Contains(stderr, "linear.cue (modified)") {
		t.Errorf("stderr: %s", stderr)
	}
	// ...and --require-clean refuses it, naming the files, writing nothing.
	out := filepath.Join(t.TempDir(), "table.json")
	_, stderr = mustRun(t, ExitUsage, "compile", "--require-clean", policy, "-o", out)
	for _, s := range []string{"differs from HEAD", "extra.cue (not in HEAD)", "linear.cue (modified)", "--rev HEAD"} {
		if !strings.Contains(stderr, s) {
			t.Errorf("--require-clean message lacks %q: %s", s, stderr)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("a refused compile wrote its output")
	}
}

// The same commit, compiled from two clones in different directories at
// different times (and in different time zones), gives the same bytes.
func TestReproducibleClones(t *testing.T) {
	up, _, _ := policyRepo(t)
	a := gittest.Clone(t, up, filepath.Join(t.TempDir(), "work", "a"))
	outA := filepath.Join(t.TempDir(), "a.json")
	mustRun(t, 0, "compile", "--rev", "HEAD", filepath.Join(a.Dir, "policy"), "-o", outA)

	time.Sleep(1100 * time.Millisecond)
	local := time.Local
	time.Local = time.FixedZone("UTC+9", 9*60*60)
	defer func() { time.Local = local }()

	b := gittest.Clone(t, up, filepath.Join(t.TempDir(), "elsewhere", "deeper", "b"))
	outB := filepath.Join(t.TempDir(), "b.json")
	mustRun(t, 0, "compile", "--rev", "origin/main", "--repo", b.Dir, "policy", "-o", outB)

	ba, ta := readTable(t, outA)
	bb, _ := readTable(t, outB)
	if !bytes.Equal(ba, bb) {
		t.Errorf("clones built different tables:\n%s\n%s", ba, bb)
	}
	if ta.Source.Repository != up.URL() || ta.Source.PolicyPath != "policy" {
		t.Errorf("provenance %+v", ta.Source)
	}
	// And a clean work tree in either clone builds the same bytes again.
	wt, _ := mustRun(t, 0, "compile", filepath.Join(b.Dir, "policy"))
	if wt != string(ba) {
		t.Error("the clean work tree of a clone differs from the revision build")
	}
}

func TestCompileRevHistory(t *testing.T) {
	g := gittest.New(t, t.TempDir())
	g.Write("policy/linear.cue", linearV1)
	g.Write("policy/old.cue", githubV1)
	g.Commit("one") // serial 1
	g.Move("policy/old.cue", "policy/github.cue")
	g.Commit("rename old.cue") // 2
	g.Branch("feature")
	g.Write("policy/linear.cue", linearV2)
	g.Commit("feature one") // 3 on feature
	g.Write("policy/memory.cue", "package policy\n\nmcp_servers: memory: access: tool: allow_list: [\"read_graph\"]\n")
	feature := g.Commit("feature two") // 4 on feature
	g.Checkout("main")
	g.Remove("policy/github.cue")
	g.Commit("delete github") // 3
	g.Write("policy/linear.cue", linearV2)
	g.Write("policy/memory.cue", "package policy\n\nmcp_servers: memory: access: tool: allow_list: [\"read_graph\"]\n")
	merge := g.Merge(feature, "merge feature") // 4
	g.Move("policy/linear.cue", "policies/linear.cue")
	g.Move("policy/memory.cue", "policies/memory.cue")
	moved := g.Commit("move the policy to policies/") // 5

	servers := func(tb *table.Table) string {
		var names []string
		for n := range tb.Servers {
			names = append(names, n)
		}
		sort.Strings(names)
		return strings.Join(names, " ")
	}
	for _, tc := range []struct {
		rev, path string
		serial    uint64
		servers   string
	}{
		{"HEAD~4", "policy", 1, "github linear"},
		{"HEAD~3", "policy", 2, "github linear"},
		{"feature", "policy", 4, "github linear memory"},
		{"HEAD~2", "policy", 3, "linear"},
		{merge.String(), "policy", 4, "linear memory"},
		{"HEAD~1^2", "policy", 4, "github linear memory"},
		{moved.String(), "policies", 5, "linear memory"},
	} {
		stdout, _ := mustRun(t, 0, "compile", "--rev", tc.rev, "--repo", g.Dir, tc.path)
		tb := decodeTable(t, []byte(stdout))
		if tb.Serial != tc.serial || servers(tb) != tc.servers {
			t.Errorf("%s %s: serial %d, servers %q; want %d, %q", tc.rev, tc.path, tb.Serial, servers(tb), tc.serial, tc.servers)
		}
	}
	// The moved policy is not at its old path any more: the error says so,
	// and where it went.
	out := filepath.Join(t.TempDir(), "t.json")
	_, stderr := mustRun(t, ExitUsage, "compile", "--rev", "HEAD", "--repo", g.Dir, "policy", "-o", out)
	if !strings.Contains(stderr, `has no directory "policy"`) || !strings.Contains(stderr, "policies") {
		t.Errorf("stderr: %s", stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("output written")
	}
}

func TestCompileRevBadInput(t *testing.T) {
	g, _, _ := policyRepo(t)
	notRepo := t.TempDir()
	os.MkdirAll(filepath.Join(notRepo, "policy"), 0o755)
	os.WriteFile(filepath.Join(notRepo, "policy", "p.cue"), []byte(linearV1), 0o644)
	shallow := gittest.ShallowClone(t, g, t.TempDir(), 1, "https://git.example.com/acme/policies.git")
	broken := filepath.Join(g.Dir, "policy", "broken")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"not a repository", []string{"compile", "--rev", "HEAD", filepath.Join(notRepo, "policy")}, ExitUsage,
			[]string{"not a git repository", notRepo, "--repo"}},
		{"--repo not a repository", []string{"compile", "--rev", "HEAD", "--repo", notRepo, "policy"}, ExitUsage,
			[]string{"not a git repository"}},
		{"--require-clean outside git", []string{"compile", "--require-clean", filepath.Join(notRepo, "policy")}, ExitUsage,
			[]string{"not in a git repository"}},
		{"unknown revision", []string{"compile", "--rev", "v9", "--repo", g.Dir, "policy"}, ExitUsage,
			[]string{`unknown revision "v9"`}},
		{"beyond the root", []string{"compile", "--rev", "HEAD~5", "--repo", g.Dir, "policy"}, ExitUsage,
			[]string{`unknown revision "HEAD~5"`, "names a parent the history does not have"}},
		{"no second parent", []string{"compile", "--rev", "HEAD^2", "--repo", g.Dir, "policy"}, ExitUsage,
			[]string{`unknown revision "HEAD^2"`}},
		{"no such path", []string{"compile", "--rev", "HEAD", "--repo", g.Dir, "nowhere"}, ExitUsage,
			[]string{`has no directory "nowhere"`, "policy"}},
		{"path outside the repository", []string{"compile", "--rev", "HEAD", "--repo", g.Dir, "../x"}, ExitUsage,
			[]string{"not inside the repository"}},
		{"shallow clone", []string{"compile", "--rev", "HEAD", "--repo", shallow.Dir, "policy"}, ExitFailure,
			[]string{"shallow clone", "fetch-depth: 0", "--unshallow", "serial"}},
		{"shallow clone work tree", []string{"compile", filepath.Join(shallow.Dir, "policy")}, ExitFailure,
			[]string{"shallow clone"}},
		{"work tree directory missing", []string{"compile", broken}, ExitUsage,
			[]string{"no policy directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "table.json")
			_, stderr := mustRun(t, tc.code, append(tc.args, "-o", out)...)
			for _, s := range tc.want {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Error("output written")
			}
		})
	}
}

func TestCompileRevDiagnostics(t *testing.T) {
	g, _, _ := policyRepo(t)
	g.Write("policy/bad.cue", "package policy\n\nmcp_servers: x: access: tool: allow: [\"a\"]\n")
	g.Commit("a typo")
	_, stderr := mustRun(t, ExitProblems, "compile", "--rev", "HEAD", "--repo", g.Dir, "policy")
	if !strings.Contains(stderr, "HEAD:policy/bad.cue:3:") || !strings.Contains(stderr, "allow_list") {
		t.Errorf("diagnostics do not point into the revision: %s", stderr)
	}
}
