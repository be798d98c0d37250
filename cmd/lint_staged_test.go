package cmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"go.yaml.in/yaml/v3"
)

// The staged and the work-tree versions of one policy differ; lint --staged
// must judge the staged one, read through go-git (no git binary).

const (
	stagedShadowed = "package policy\n\nmcp_servers: github: access: tool: {\n\tdeny_list: [\"get_*\"]\n\tallow_list: [\"get_issue\"]\n}\n"
	stagedClean    = "package policy\n\nmcp_servers: github: access: tool: {\n\tdeny_list: [\"get_secret\"]\n\tallow_list: [\"get_issue\"]\n}\n"
	stagedBroken   = "package policy\n\nmcp_servers: {\n"
)

type lintRepo struct {
	t    *testing.T
	dir  string
	repo *git.Repository
	wt   *git.Worktree
}

func newLintRepo(t *testing.T) *lintRepo {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	return &lintRepo{t: t, dir: dir, repo: repo, wt: wt}
}

func (r *lintRepo) write(path, data string) {
	r.t.Helper()
	p := filepath.Join(r.dir, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// stage writes data at path and adds it to the index.
func (r *lintRepo) stage(path, data string) {
	r.t.Helper()
	r.write(path, data)
	if _, err := r.wt.Add(path); err != nil {
		r.t.Fatal(err)
	}
}

// unstage removes path from the index only, as git rm --cached does.
func (r *lintRepo) unstage(path string) {
	r.t.Helper()
	idx, err := r.repo.Storer.Index()
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := idx.Remove(path); err != nil {
		r.t.Fatal(err)
	}
	if err := r.repo.Storer.SetIndex(idx); err != nil {
		r.t.Fatal(err)
	}
}

func runLint(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestLintStagedJudgesTheIndex(t *testing.T) {
	r := newLintRepo(t)
	// Staged: a shadowed rule. Work tree: fixed, not staged yet.
	r.stage("policy.cue", stagedShadowed)
	r.write("policy.cue", stagedClean)

	code, out, errOut := runLint(t, "lint", "--staged", "--fail-level", "warning", r.dir)
	if code != ExitProblems || !strings.Contains(out, "warning[shadowed-rule]") {
		t.Fatalf("--staged must judge the staged shadowed rule: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := runLint(t, "lint", "--fail-level", "warning", r.dir); code != ExitOK || strings.Contains(out, "shadowed-rule") {
		t.Fatalf("without --staged the work tree is judged: exit %d\n%s", code, out)
	}

	// Now the fix is staged and the work tree is broken: the commit is fine.
	r.stage("policy.cue", stagedClean)
	r.write("policy.cue", stagedBroken)
	if code, out, errOut := runLint(t, "lint", "--staged", "--fail-level", "warning", r.dir); code != ExitOK {
		t.Fatalf("the staged fix must pass: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := runLint(t, "lint", r.dir); code != ExitProblems || !strings.Contains(out, "error[syntax-error]") {
		t.Fatalf("the broken work tree must fail without --staged: exit %d\n%s", code, out)
	}
}

// lint --staged says, in one line on standard error, when the work tree
// differs from the index, and nothing when it does not.
func TestLintStagedNotesUnstagedChanges(t *testing.T) {
	r := newLintRepo(t)
	r.stage("policy.cue", stagedClean)
	r.stage("policyc.cue", "package policyc\n")
	if _, _, errOut := runLint(t, "lint", "--staged", r.dir); errOut != "" {
		t.Errorf("work tree as staged: stderr %q, want nothing", errOut)
	}
	r.write("policy.cue", stagedShadowed)
	r.write("new.cue", "package policy\n")
	r.write("policyc.cue", "package policyc\n\nfail_level: \"warning\"\n")
	code, _, errOut := runLint(t, "lint", "--staged", r.dir)
	want := "policyc: note: the work tree differs from the index in new.cue (not staged), policy.cue, policyc.cue: --staged lints what is staged; 'git add' a change for it to count\n"
	if code != ExitOK || errOut != want {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 0 and:\n%s", code, errOut, want)
	}
	os.Remove(filepath.Join(r.dir, "new.cue"))
	os.Remove(filepath.Join(r.dir, "policy.cue"))
	_, _, errOut = runLint(t, "lint", "--staged", r.dir)
	if !strings.Contains(errOut, "policy.cue (deleted, not staged)") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("a staged file deleted from the work tree: stderr %q", errOut)
	}
}

func TestLintStagedDeletedFileIsGone(t *testing.T) {
	r := newLintRepo(t)
	r.write("policy.cue", stagedClean)
	r.stage("policy.cue", stagedClean)
	r.stage("extra.cue", "package policy\n\nmcp_servers: linear: access: tool: allow_list: [\"get_[\"]\n")
	if code, out, errOut := runLint(t, "lint", "--staged", r.dir); code != ExitProblems || !strings.Contains(out, "invalid-glob") {
		t.Fatalf("the staged extra.cue is linted: exit %d\n%s%s", code, out, errOut)
	}
	// Removed from the index, still on disk: it will not be committed.
	r.unstage("extra.cue")
	if code, out, errOut := runLint(t, "lint", "--staged", r.dir); code != ExitOK || strings.Contains(out, "extra.cue") {
		t.Fatalf("a file deleted in the index must be gone: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, _ := runLint(t, "lint", r.dir); code != ExitProblems {
		t.Fatalf("on disk extra.cue is still there")
	}
	// Everything removed from the index: no policy at all.
	r.unstage("policy.cue")
	if code, out, _ := runLint(t, "lint", "--staged", r.dir); code != ExitProblems || !strings.Contains(out, "no-policy-files") {
		t.Fatalf("an index without the policy has no policy files: exit %d\n%s", code, out)
	}
}

func TestLintStagedSubdirectoryAndConfig(t *testing.T) {
	r := newLintRepo(t)
	r.stage("policy/policy.cue", stagedShadowed)
	r.stage("policy/nested/other.cue", stagedBroken) // not part of the package
	r.stage("README.md", "not policy\n")
	// Staged config: warnings fail. On disk: the default.
	r.stage("policy/policyc.cue", "package policyc\n\nfail_level: \"warning\"\n")
	r.write("policy/policyc.cue", "package policyc\n")

	dir := filepath.Join(r.dir, "policy")
	code, out, errOut := runLint(t, "lint", "--staged", dir)
	if code != ExitProblems || !strings.Contains(out, "in 1 file") {
		t.Fatalf("the staged config (fail_level warning) must apply: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, _ := runLint(t, "lint", dir); code != ExitOK {
		t.Fatalf("the config on disk has the default fail level: exit %d", code)
	}
	// A staged config that is invalid is a tool failure, named as staged.
	r.stage("policy/policyc.cue", "package policyc\n\nfail_levle: \"warning\"\n")
	r.write("policy/policyc.cue", "package policyc\n")
	code, _, errOut = runLint(t, "lint", "--staged", dir)
	if code != ExitFailure || !strings.Contains(errOut, "policyc.cue (staged) is invalid") || !strings.Contains(errOut, `did you mean "fail_level"?`) {
		t.Fatalf("an invalid staged config must fail the tool: exit %d\n%s", code, errOut)
	}
}

func TestLintStagedRefusals(t *testing.T) {
	// Not a repository.
	code, _, errOut := runLint(t, "lint", "--staged", t.TempDir())
	if code != ExitFailure || !strings.Contains(errOut, "not a git repository") {
		t.Fatalf("outside a repository: exit %d\n%s", code, errOut)
	}
	// lint has no --repo: the advice is to run it inside the repository.
	if strings.Contains(errOut, "--repo") || !strings.Contains(errOut, "run policyc lint --staged inside the repository") {
		t.Errorf("outside a repository, the advice does not fit lint: %s", errOut)
	}

	// Unresolved merge conflicts: the index holds stages 1 to 3.
	r := newLintRepo(t)
	r.stage("policy.cue", stagedClean)
	idx, err := r.repo.Storer.Index()
	if err != nil {
		t.Fatal(err)
	}
	e, err := idx.Entry("policy.cue")
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := *e, *e
	e.Stage, ours.Stage, theirs.Stage = index.AncestorMode, index.OurMode, index.TheirMode
	idx.Entries = append(idx.Entries, &ours, &theirs)
	if err := r.repo.Storer.SetIndex(idx); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runLint(t, "lint", "--staged", r.dir)
	if code != ExitFailure || !strings.Contains(errOut, "policy.cue has unresolved merge conflicts in the index") {
		t.Fatalf("a conflicted file must be refused: exit %d\n%s", code, errOut)
	}

	// A symbolic link where a policy file is expected.
	r = newLintRepo(t)
	r.stage("policy.cue", stagedClean)
	idx, _ = r.repo.Storer.Index()
	idx.Entries = append(idx.Entries, &index.Entry{Name: "link.cue", Mode: filemode.Symlink, Hash: plumbing.ZeroHash})
	if err := r.repo.Storer.SetIndex(idx); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runLint(t, "lint", "--staged", r.dir)
	if code != ExitFailure || !strings.Contains(errOut, "link.cue is a symbolic link in the index") {
		t.Fatalf("a symbolic link must be refused: exit %d\n%s", code, errOut)
	}
}

// TestPreCommitHookEntry runs the command .pre-commit-hooks.yaml declares,
// as the pre-commit framework would, on a repository whose staged policy
// fails lint and then passes (the test hooks: a policy without test cases
// passes).
func TestPreCommitHookEntry(t *testing.T) {
	data, err := os.ReadFile("../.pre-commit-hooks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var hooks []struct {
		ID            string `yaml:"id"`
		Entry         string `yaml:"entry"`
		Language      string `yaml:"language"`
		Files         string `yaml:"files"`
		PassFilenames *bool  `yaml:"pass_filenames"`
	}
	if err := yaml.Unmarshal(data, &hooks); err != nil {
		t.Fatal(err)
	}
	if len(hooks) == 0 {
		t.Fatal("no hooks declared")
	}
	r := newLintRepo(t)
	r.stage("policyc.cue", "package policyc\n\nfail_level: \"warning\"\n")
	for _, h := range hooks {
		fields := strings.Fields(h.Entry)
		if len(fields) < 2 || fields[0] != "policyc" || h.PassFilenames == nil || *h.PassFilenames {
			t.Fatalf("hook %s: entry %q must run policyc without file names", h.ID, h.Entry)
		}
		if fields[1] == "lint" {
			r.stage("policy.cue", stagedShadowed)
			r.write("policy.cue", stagedClean)
			if code, out, _ := runLint(t, append(fields[1:], r.dir)...); code != ExitProblems {
				t.Errorf("hook %s must stop a commit of a shadowed rule: exit %d\n%s", h.ID, code, out)
			}
		}
		r.stage("policy.cue", stagedClean)
		if code, out, errOut := runLint(t, append(fields[1:], r.dir)...); code != ExitOK {
			t.Errorf("hook %s must let the fixed policy through: exit %d\n%s%s", h.ID, code, out, errOut)
		}
	}
}
