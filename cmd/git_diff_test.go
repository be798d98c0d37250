package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyc/policyc/internal/gitsrc/gittest"
)

func TestDiffRevisions(t *testing.T) {
	g, c1, c2 := policyRepo(t)
	policy := filepath.Join(g.Dir, "policy")

	stdout, _ := mustRun(t, ExitChanged, "diff", c1.String(), "HEAD", policy)
	for _, s := range []string{"| *          | linear | tool | save_issue | allow  | approve |", `approval_list "save_issue" at policy/linear.cue:8`,
		"Rules added (1)", "Rules removed (1)", "policy/linear.cue:6"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("text diff lacks %q:\n%s", s, stdout)
		}
	}
	stdout, _ = mustRun(t, ExitChanged, "diff", "HEAD~1", "v2", "--repo", g.Dir, "policy", "--format", "markdown")
	if !strings.Contains(stdout, "| * | `linear` | tool | `save_issue` | allow | **approve** | `approval_list` `save_issue` at `policy/linear.cue:8` |") {
		t.Errorf("markdown:\n%s", stdout)
	}
	stdout, _ = mustRun(t, ExitChanged, "diff", "HEAD~1", "HEAD", policy, "--format", "json")
	var rep struct {
		Old, New struct{ Commit string }
		Changes  []struct {
			Server, Kind, Name string
			Before, After      struct{ Effect string }
		}
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Old.Commit != c1.String() || rep.New.Commit != c2.String() || len(rep.Changes) != 1 || rep.Changes[0].After.Effect != "approve" {
		t.Errorf("json: %s", stdout)
	}

	// No change: exit 0, and the text says so.
	stdout, _ = mustRun(t, 0, "diff", "HEAD", "v2", policy)
	if !strings.Contains(stdout, "No decision changes.") {
		t.Errorf("stdout: %s", stdout)
	}

	// A table file on one side, a revision on the other.
	tableFile := filepath.Join(t.TempDir(), "deployed.json")
	mustRun(t, 0, "compile", "--rev", "HEAD~1", policy, "-o", tableFile)
	stdout, _ = mustRun(t, ExitChanged, "diff", tableFile, "HEAD", policy)
	if !strings.Contains(stdout, "save_issue") || !strings.Contains(stdout, "old: "+tableFile+" (commit "+c1.String()[:12]) {
		t.Errorf("stdout: %s", stdout)
	}

	// A side that does not compile: its diagnostics, exit 1.
	g.Write("policy/bad.cue", "package policy\n\nmcp_servers: x: access: tool: allow: [\"a\"]\n")
	g.Commit("a typo")
	_, stderr := mustRun(t, ExitProblems, "diff", "HEAD~1", "HEAD", policy)
	if !strings.Contains(stderr, "HEAD:policy/bad.cue:3:") {
		t.Errorf("stderr: %s", stderr)
	}
	// Bad sides.
	_, stderr = mustRun(t, ExitUsage, "diff", "HEAD", "nope", policy)
	if !strings.Contains(stderr, "nope: no such file, and not a revision of the repository at "+g.Dir) {
		t.Errorf("stderr: %s", stderr)
	}
	notRepo := t.TempDir()
	_, stderr = mustRun(t, ExitUsage, "diff", "HEAD~1", "HEAD", notRepo)
	if !strings.Contains(stderr, "not a git repository") {
		t.Errorf("stderr: %s", stderr)
	}
	junk := filepath.Join(t.TempDir(), "junk.json")
	os.WriteFile(junk, []byte("{}"), 0o644)
	_, stderr = mustRun(t, ExitFailure, "diff", junk, "HEAD~1", policy)
	if !strings.Contains(stderr, "junk.json") {
		t.Errorf("stderr: %s", stderr)
	}
	shallow := gittest.ShallowClone(t, g, t.TempDir(), 1, "")
	_, stderr = mustRun(t, ExitFailure, "diff", "HEAD", "HEAD", "--repo", shallow.Dir, "policy")
	if !strings.Contains(stderr, "shallow clone") {
		t.Errorf("stderr: %s", stderr)
	}
}

// A revision side of diff reports the digest of its table: the one
// policyc compile gives the same revision.
func TestDiffRevisionDigest(t *testing.T) {
	g, _, _ := policyRepo(t)
	policy := filepath.Join(g.Dir, "policy")
	digest := func(rev string) string {
		t.Helper()
		out, _ := mustRun(t, 0, "compile", "--rev", rev, policy)
		return decodeTable(t, []byte(out)).Digest
	}
	stdout, _ := mustRun(t, ExitChanged, "diff", "HEAD~1", "HEAD", policy, "--format", "json")
	var rep struct{ Old, New struct{ Digest string } }
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if old, new := digest("HEAD~1"), digest("HEAD"); rep.Old.Digest != old || rep.New.Digest != new || old == new {
		t.Errorf("digests old %q new %q, want %q and %q as compile gives them", rep.Old.Digest, rep.New.Digest, old, new)
	}
}

func TestBlame(t *testing.T) {
	g, _, c2 := policyRepo(t)
	policy := filepath.Join(g.Dir, "policy")
	stdout, _ := mustRun(t, 0, "blame", "--server", "linear", "--kind", "tool", "--name", "save_issue", policy)
	for _, s := range []string{
		`approve tool "save_issue" on linear for (any principal) at HEAD`,
		`decided by: approval_list "save_issue" at policy/linear.cue:8`,
		`line:       approval_list: ["save_issue"]`,
		"introduced: " + c2.String()[:12] + " 2025-03-01T07:01:00Z Bob Example <bob@example.com>",
		"Hold save_issue for approval",
	} {
		if !strings.Contains(stdout, s) {
			t.Errorf("blame lacks %q:\n%s", s, stdout)
		}
	}

	// Move the policy and edit above the line: still Bob's commit.
	g.Move("policy/linear.cue", "team/linear.cue")
	g.Move("policy/github.cue", "team/github.cue")
	g.Commit("move the policy to team/")
	g.Write("team/linear.cue", "// Linear.\n"+linearV2)
	g.Commit("a heading")
	stdout, _ = mustRun(t, 0, "blame", "--server", "linear", "--name", "save_issue", "--repo", g.Dir, "team", "--format", "json")
	var b blameResult
	if err := json.Unmarshal([]byte(stdout), &b); err != nil {
		t.Fatal(err)
	}
	if b.Introduced == nil || b.Introduced.Hash != c2.String() || b.Origin != "team/linear.cue:9" || b.Rule.List != "approval_list" || b.Stopped != "" {
		t.Errorf("after the move: %s", stdout)
	}
	// The same question at an older revision, where the policy was
	// elsewhere and the tool was allowed.
	stdout, _ = mustRun(t, 0, "blame", "--server", "linear", "--name", "save_issue", "--rev", "v2~1", "--repo", g.Dir, "policy")
	if !strings.Contains(stdout, `allow tool "save_issue"`) || !strings.Contains(stdout, "Alice Example") {
		t.Errorf("at v2~1: %s", stdout)
	}
	// The kind's default decides: blame its line... and the built-in
	// default has none.
	stdout, _ = mustRun(t, 0, "blame", "--server", "linear", "--name", "archive_issue", "--repo", g.Dir, "team")
	if !strings.Contains(stdout, "built-in default (deny)") || strings.Contains(stdout, "introduced") {
		t.Errorf("built-in default: %s", stdout)
	}
	g.Write("team/defaults.cue", "package policy\n\ndefaults: prompt: \"allow\"\n")
	g.Commit("prompts are allowed")
	stdout, _ = mustRun(t, 0, "blame", "--server", "github", "--kind", "prompt", "--name", "summarize", "--repo", g.Dir, "team")
	if !strings.Contains(stdout, "the prompt default of github at team/defaults.cue:3") || !strings.Contains(stdout, "prompts are allowed") {
		t.Errorf("default: %s", stdout)
	}
	// Bad input.
	_, stderr := mustRun(t, ExitUsage, "blame", "--server", "jira", "--name", "x", "--repo", g.Dir, "team")
	if !strings.Contains(stderr, `server "jira" is not in the policy`) || !strings.Contains(stderr, "github, linear") {
		t.Errorf("unknown server: %s", stderr)
	}
	// A misspelt server gets the name it is closest to.
	_, stderr = mustRun(t, ExitUsage, "blame", "--server", "linaer", "--name", "x", "--repo", g.Dir, "team")
	if !strings.Contains(stderr, `server "linaer" is not in the policy`) || !strings.Contains(stderr, `did you mean "linear"?`) {
		t.Errorf("misspelt server: %s", stderr)
	}
	if _, stderr := mustRun(t, ExitUsage, "blame", "--server", "jira", "--name", "x", "--repo", g.Dir, "team"); strings.Contains(stderr, "did you mean") {
		t.Errorf("a name close to none is given no suggestion: %s", stderr)
	}
	_, stderr = mustRun(t, ExitUsage, "blame", "--server", "linear", "--name", "x", "--rev", "nope", "--repo", g.Dir, "team")
	if !strings.Contains(stderr, `unknown revision "nope"`) {
		t.Errorf("unknown revision: %s", stderr)
	}
	_, stderr = mustRun(t, ExitUsage, "blame", "--server", "linear", "--kind", "tools", "--name", "x")
	if !strings.Contains(stderr, "--kind must be") {
		t.Errorf("bad kind: %s", stderr)
	}
	_, stderr = mustRun(t, ExitUsage, "blame", "--server", "linear", "--name", "x", t.TempDir())
	if !strings.Contains(stderr, "not a git repository") {
		t.Errorf("not a repository: %s", stderr)
	}
}

// A rule's line changed for another entry, or reformatted, is not where
// the rule came from: blame names the commit that made the rule decide.
func TestBlameSharedLine(t *testing.T) {
	g, _, c2 := policyRepo(t)
	policy := filepath.Join(g.Dir, "policy")
	g.Write("policy/linear.cue", strings.Replace(linearV2, `approval_list: ["save_issue"]`, `approval_list: ["save_issue", "create_issue"]`, 1))
	c3 := g.Commit("Hold create_issue too")
	g.Write("policy/linear.cue", strings.Replace(linearV2, `approval_list: ["save_issue"]`, "approval_list: [\n\t\t\"save_issue\",\n\t\t\"create_issue\",\n\t]", 1))
	g.Commit("One entry a line")
	blame := func(name string) blameResult {
		t.Helper()
		stdout, _ := mustRun(t, 0, "blame", "--server", "linear", "--name", name, policy, "--format", "json")
		var b blameResult
		if err := json.Unmarshal([]byte(stdout), &b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	if b := blame("save_issue"); b.Introduced == nil || b.Introduced.Hash != c2.String() || b.Introduced.Author != "Bob Example" || b.Origin != "policy/linear.cue:9" {
		t.Errorf("save_issue: %+v %+v", b, b.Introduced)
	}
	if b := blame("create_issue"); b.Introduced == nil || b.Introduced.Hash != c3.String() || b.Origin != "policy/linear.cue:10" {
		t.Errorf("create_issue: %+v %+v", b, b.Introduced)
	}
	// Made to decide otherwise and back: the commit that brought it back.
	g.Write("policy/linear.cue", strings.Replace(linearV2, `approval_list: ["save_issue"]`, `approval_list: ["create_issue"]`, 1))
	g.Commit("Let save_issue through")
	g.Write("policy/linear.cue", strings.Replace(linearV2, `approval_list: ["save_issue"]`, `approval_list: ["create_issue", "save_issue"]`, 1))
	c6 := g.CommitAs(gittest.Bob, "Hold save_issue again")
	if b := blame("save_issue"); b.Introduced == nil || b.Introduced.Hash != c6.String() {
		t.Errorf("save_issue, held again: %+v", b.Introduced)
	}
	if b := blame("create_issue"); b.Introduced == nil || b.Introduced.Hash != c3.String() {
		t.Errorf("create_issue, after save_issue came and went: %+v", b.Introduced)
	}
}

// --groups asks for a principal in groups by its token, as explain does:
// the group's narrowing rule decides, and its commit is named.
func TestBlameGroups(t *testing.T) {
	g, _, _ := policyRepo(t)
	policy := filepath.Join(g.Dir, "policy")
	g.Write("policy/groups.cue", "package policy\n\ngroups: contractors: {\n\tmembers: [\"erin\"]\n\tmcp_servers: linear: access: tool: deny_list: [\"get_*\"]\n}\n")
	c3 := g.CommitAs(gittest.Bob, "Contractors read no issues")
	stdout, _ := mustRun(t, 0, "blame", "--server", "linear", "--name", "get_issue", "--principal", "dave", "--groups", "contractors", policy)
	for _, s := range []string{`deny tool "get_issue" on linear for dave (groups contractors)`, `deny_list "get_*" (group:contractors scope) at policy/groups.cue:5`, "introduced: " + c3.String()[:12]} {
		if !strings.Contains(stdout, s) {
			t.Errorf("blame --groups lacks %q:\n%s", s, stdout)
		}
	}
	// The groups as the lookup reads them, not as typed.
	stdout, _ = mustRun(t, 0, "blame", "--server", "linear", "--name", "get_issue", "--principal", "dave", "--groups", " contractors,contractors", policy)
	if !strings.Contains(stdout, `for dave (groups contractors) at HEAD`) {
		t.Errorf("blame --groups as typed:\n%s", stdout)
	}
	stdout, _ = mustRun(t, 0, "blame", "--server", "linear", "--name", "get_issue", "--principal", "dave", policy)
	if !strings.Contains(stdout, `allow tool "get_issue" on linear for dave`) {
		t.Errorf("without --groups:\n%s", stdout)
	}
	_, stderr := mustRun(t, ExitUsage, "blame", "--server", "linear", "--name", "get_issue", "--principal", "dave", "--groups", "contractor", policy)
	if !strings.Contains(stderr, `--groups: "contractor" is not a group of the table`) {
		t.Errorf("unknown group: %s", stderr)
	}
}

// A rule's line edited, then the policy moved: the search follows the
// move and names the commit that made the rule decide, with no note that
// it stopped short.
func TestBlameAcrossMove(t *testing.T) {
	g, _, c2 := policyRepo(t)
	g.Write("policy/linear.cue", strings.Replace(linearV2, `approval_list: ["save_issue"]`, `approval_list: ["save_issue", "create_issue"]`, 1))
	g.Commit("Hold create_issue too")
	g.Move("policy/linear.cue", "pol/linear.cue")
	g.Move("policy/github.cue", "pol/github.cue")
	g.Commit("move the policy to pol/")
	stdout, _ := mustRun(t, 0, "blame", "--server", "linear", "--name", "save_issue", "--repo", g.Dir, "pol", "--format", "json")
	var b blameResult
	if err := json.Unmarshal([]byte(stdout), &b); err != nil {
		t.Fatal(err)
	}
	if b.Introduced == nil || b.Introduced.Hash != c2.String() || b.Stopped != "" {
		t.Errorf("after the move: %s", stdout)
	}
}

// On a merge, the side that brought the rule is credited, not the merge.
func TestBlameMerge(t *testing.T) {
	g, _, c2 := policyRepo(t)
	g.Branch("side")
	g.Write("policy/linear.cue", strings.Replace(linearV2, `approval_list: ["save_issue"]`, `approval_list: ["save_issue", "archive_issue"]`, 1))
	side := g.CommitAs(gittest.Bob, "Hold archive_issue")
	g.Checkout("main")
	g.Write("policy/linear.cue", strings.Replace(linearV2, `approval_list: ["save_issue"]`, `approval_list: ["save_issue", "create_issue"]`, 1))
	main := g.Commit("Hold create_issue")
	g.Write("policy/linear.cue", strings.Replace(linearV2, `approval_list: ["save_issue"]`, `approval_list: ["save_issue", "create_issue", "archive_issue"]`, 1))
	g.Merge(side, "merge the archive hold")
	policy := filepath.Join(g.Dir, "policy")
	for name, want := range map[string]string{"archive_issue": side.String(), "create_issue": main.String(), "save_issue": c2.String()} {
		stdout, _ := mustRun(t, 0, "blame", "--server", "linear", "--name", name, policy, "--format", "json")
		var b blameResult
		if err := json.Unmarshal([]byte(stdout), &b); err != nil {
			t.Fatal(err)
		}
		if b.Introduced == nil || b.Introduced.Hash != want {
			t.Errorf("%s: introduced %+v, want %s", name, b.Introduced, want)
		}
	}
}

// A parent whose policy does not compile stops the search, and blame says
// the rule may be older.
func TestBlameStopsAtABrokenParent(t *testing.T) {
	g, _, _ := policyRepo(t)
	g.Write("policy/github.cue", "package policy\n\nmcp_servers: github: {\n")
	g.Commit("half a file")
	g.Write("policy/github.cue", githubV1)
	g.Write("policy/linear.cue", strings.Replace(linearV2, `approval_list: ["save_issue"]`, `approval_list: ["save_issue", "create_issue"]`, 1))
	c4 := g.Commit("Mend github.cue; hold create_issue")
	stdout, _ := mustRun(t, 0, "blame", "--server", "linear", "--name", "save_issue", filepath.Join(g.Dir, "policy"))
	if !strings.Contains(stdout, "introduced: "+c4.String()[:12]) || !strings.Contains(stdout, "(the rule may be older: the policy at commit ") || !strings.Contains(stdout, "does not compile)") {
		t.Errorf("a broken parent:\n%s", stdout)
	}
}
