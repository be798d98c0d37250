package gitsrc_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/policyc/policyc/internal/gitsrc"
	"github.com/policyc/policyc/internal/gitsrc/gittest"
)

const policyV1 = `package policy

mcp_servers: linear: access: tool: {
	allow_list: ["list_*", "save_issue"]
}
`

const policyV2 = `package policy

mcp_servers: linear: access: tool: {
	allow_list: ["list_*"]
	approval_list: ["save_issue"]
}
`

func open(t *testing.T, dir string) *gitsrc.Repo {
	t.Helper()
	r, err := gitsrc.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func fileNames(s *gitsrc.Snapshot) []string {
	var names []string
	for _, f := range s.Files {
		names = append(names, f.Name)
	}
	return names
}

func TestReadProvenance(t *testing.T) {
	g := gittest.New(t, t.TempDir())
	g.SetOrigin("https://ci-bot:s3cret@git.example.com/acme/policy.git")
	g.Write("policy/linear.cue", policyV1)
	g.Write("policy/policyc.cue", "package config\n")
	g.Write("README.md", "policies\n")
	first := g.Commit("linear policy")
	g.Write("policy/linear.cue", policyV2)
	second := g.Commit("save_issue needs approval")

	r := open(t, g.Dir)
	snap, err := r.Read("main", "policy")
	if err != nil {
		t.Fatal(err)
	}
	if got := fileNames(snap); !reflect.DeepEqual(got, []string{"linear.cue"}) {
		t.Errorf("files = %v, want only linear.cue (the lint config is not policy)", got)
	}
	if string(snap.Files[0].Data) != policyV2 {
		t.Errorf("read %q, want the content of the second commit", snap.Files[0].Data)
	}
	c, _ := g.Git.CommitObject(second)
	root, _ := c.Tree()
	sub, _ := root.Tree("policy")
	src := snap.Source
	if src.Commit != second.String() || src.Tree != sub.Hash.String() || src.PolicyPath != "policy" || src.Dirty {
		t.Errorf("source = %+v, want commit %s, tree %s, path policy, clean", src, second, sub.Hash)
	}
	if src.Repository != "https://git.example.com/acme/policy.git" {
		t.Errorf("repository = %q, want the origin URL without credentials", src.Repository)
	}
	// Epoch is 09:00 at +02:00; the second commit is a minute later.
	if src.CommitTime != "2025-03-01T07:01:00Z" {
		t.Errorf("commit time = %q, want the committer time in UTC", src.CommitTime)
	}
	if snap.Serial != 2 {
		t.Errorf("serial = %d, want 2", snap.Serial)
	}
	old, err := r.Read(first.String()[:7], "policy")
	if err != nil {
		t.Fatal(err)
	}
	if string(old.Files[0].Data) != policyV1 || old.Serial != 1 {
		t.Errorf("short-hash read: serial %d, content %q", old.Serial, old.Files[0].Data)
	}
	// The repository root as policy path.
	g.Write("top.cue", policyV1)
	g.Commit("a policy at the root")
	top, err := r.Read("HEAD", ".")
	if err != nil {
		t.Fatal(err)
	}
	if top.Source.PolicyPath != "." || top.Source.Tree != mustCommit(t, g, g.Head()).TreeHash.String() {
		t.Errorf("root read: %+v", top.Source)
	}
}

func mustCommit(t *testing.T, g *gittest.Repo, h plumbing.Hash) *struct{ TreeHash plumbing.Hash } {
	t.Helper()
	c, err := g.Git.CommitObject(h)
	if err != nil {
		t.Fatal(err)
	}
	return &struct{ TreeHash plumbing.Hash }{c.TreeHash}
}

func TestNoOrigin(t *testing.T) {
	g := gittest.New(t, t.TempDir())
	g.Write("p.cue", policyV1)
	g.Commit("one")
	snap, err := open(t, g.Dir).Read("HEAD", ".")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Source.Repository != "" {
		t.Errorf("repository = %q, want none: a local path would differ between clones", snap.Source.Repository)
	}
}

func TestStripCredentials(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:token@github.com/acme/p.git": "https://github.com/acme/p.git",
		"https://token@github.com/acme/p.git":      "https://github.com/acme/p.git",
		"ssh://git@github.com/acme/p.git":          "ssh://github.com/acme/p.git",
		"https://github.com/acme/p.git":            "https://github.com/acme/p.git",
		"git@github.com:acme/p.git":                "git@github.com:acme/p.git",
		"/srv/git/p.git":                           "/srv/git/p.git",
	} {
		if got := gitsrc.StripCredentials(in); got != want {
			t.Errorf("StripCredentials(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestResolve(t *testing.T) {
	g := gittest.New(t, t.TempDir())
	g.Write("p.cue", policyV1)
	c1 := g.Commit("one")
	g.Write("p.cue", policyV2)
	c2 := g.Commit("two")
	g.Tag("v1", c1, "release 1") // annotated
	g.Tag("light", c2, "")       // lightweight
	g.Branch("feature")
	g.Write("f.cue", policyV1)
	f1 := g.Commit("feature work")
	g.Checkout("main")
	g.Write("f.cue", policyV1)
	m := g.Merge(f1, "merge feature")

	r := open(t, g.Dir)
	for rev, want := range map[string]plumbing.Hash{
		"HEAD":            m,
		"main":            m,
		"refs/heads/main": m,
		"feature":         f1,
		"v1":              c1,
		"refs/tags/v1":    c1,
		"light":           c2,
		c2.String():       c2,
		c2.String()[:8]:   c2,
		"HEAD~1":          c2,
		"HEAD~2":          c1,
		"HEAD^2":          f1,
		"main^1":          c2,
		"v1~0":            c1,
	} {
		c, err := r.Resolve(rev)
		if err != nil {
			t.Errorf("Resolve(%q): %v", rev, err)
			continue
		}
		if c.Hash != want {
			t.Errorf("Resolve(%q) = %s, want %s", rev, c.Hash, want)
		}
	}
	// A detached HEAD resolves to the checked-out commit.
	g.Detach(c1)
	if c, err := r.Resolve("HEAD"); err != nil || c.Hash != c1 {
		t.Errorf("detached HEAD: %v, %v; want %s", c, err, c1)
	}
	for _, bad := range []string{"nope", "v9", "HEAD~10", strings.Repeat("0", 40), "deadbeef", "",
		"HEAD@{1}", "main@{upstream}", "main@{2025-01-01}", ":/feature", "HEAD:p.cue", "HEAD~1..HEAD", "v1^{tree}", "HEAD^{/feature}"} {
		_, err := r.Resolve(bad)
		var re *gitsrc.RevisionError
		if !errors.As(err, &re) {
			t.Errorf("Resolve(%q): error %v, want a RevisionError", bad, err)
			continue
		}
		if !strings.Contains(err.Error(), "unknown revision") || !strings.Contains(err.Error(), bad) {
			t.Errorf("Resolve(%q): message %q does not name the revision", bad, err)
		}
	}
}

// The serial grows along the first-parent line, merges included, and
// commits a merge brings in are not counted.
func TestSerialFirstParent(t *testing.T) {
	g := gittest.New(t, t.TempDir())
	g.Write("p.cue", policyV1)
	g.Commit("one") // 1
	g.Write("p.cue", policyV2)
	base := g.Commit("two") // 2
	g.Branch("feature")
	for i := 0; i < 5; i++ {
		g.Write("f.cue", strings.Repeat("// x\n", i+1)+policyV1)
		g.Commit("feature") // 3..7 on the feature branch
	}
	feature := g.Head()
	g.Checkout("main")
	g.Write("m.cue", "package policy\n")
	g.Commit("three") // 3
	g.Write("f.cue", strings.Repeat("// x\n", 5)+policyV1)
	merge := g.Merge(feature, "merge feature") // 4
	g.Write("m.cue", "package policy\n// after\n")
	after := g.Commit("five") // 5

	r := open(t, g.Dir)
	want := map[plumbing.Hash]uint64{base: 2, feature: 7, merge: 4, after: 5}
	for h, n := range want {
		c, _ := g.Git.CommitObject(h)
		got, err := r.Serial(c, h.String())
		if err != nil {
			t.Fatal(err)
		}
		if got != n {
			t.Errorf("serial of %s = %d, want %d", h, got, n)
		}
	}
	// Every commit on the first-parent line of main has a larger serial
	// than the one before it.
	c, _ := g.Git.CommitObject(after)
	prev, _ := r.Serial(c, "main")
	for len(c.ParentHashes) > 0 {
		c, _ = g.Git.CommitObject(c.ParentHashes[0])
		s, err := r.Serial(c, c.Hash.String())
		if err != nil {
			t.Fatal(err)
		}
		if s >= prev {
			t.Errorf("serial %d of %s is not below its child's %d", s, c.Hash, prev)
		}
		prev = s
	}
}

func TestShallowClone(t *testing.T) {
	g := gittest.New(t, t.TempDir())
	for i := 0; i < 5; i++ {
		g.Write("policy/p.cue", policyV1+strings.Repeat("// more\n", i))
		g.Commit("change")
	}
	full := open(t, g.Dir)
	want, err := full.Read("HEAD", "policy")
	if err != nil {
		t.Fatal(err)
	}
	shallow := gittest.ShallowClone(t, g, t.TempDir(), 2, "https://git.example.com/p.git")
	r := open(t, shallow.Dir)
	if !r.Shallow() {
		t.Fatal("the shallow clone is not seen as shallow")
	}
	_, err = r.Read("HEAD", "policy")
	var se *gitsrc.ShallowError
	if !errors.As(err, &se) {
		t.Fatalf("Read in a shallow clone: %v, want a ShallowError", err)
	}
	for _, s := range []string{"shallow", "fetch-depth: 0", "--unshallow", se.Missing.String()[:12]} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q does not mention %q", err, s)
		}
	}
	// The first-parent walk stops at the boundary, whose parent is the
	// third commit.
	c, _ := g.Git.CommitObject(g.Head())
	p1, _ := g.Git.CommitObject(c.ParentHashes[0])
	if se.Commit != p1.Hash || se.Missing != p1.ParentHashes[0] {
		t.Errorf("boundary %s, missing %s; want %s and %s", se.Commit, se.Missing, p1.Hash, p1.ParentHashes[0])
	}
	// Reaching past the boundary by revision is a shallow error too.
	if _, err := r.Resolve("HEAD~3"); !errors.As(err, &se) {
		t.Errorf("Resolve(HEAD~3) in a shallow clone: %v, want a ShallowError", err)
	}
	// The full repository has the serial the shallow one could not count.
	if want.Serial != 5 {
		t.Errorf("full serial = %d, want 5", want.Serial)
	}
}

func TestMissingParentObject(t *testing.T) {
	// History cut without a shallow file (a damaged or partial copy) is
	// refused the same way, naming the missing commit.
	g := gittest.New(t, t.TempDir())
	g.Write("p.cue", policyV1)
	g.Commit("one")
	g.Write("p.cue", policyV2)
	g.Commit("two")
	cut := gittest.ShallowClone(t, g, t.TempDir(), 1, "")
	if err := os.Remove(filepath.Join(cut.Dir, ".git", "shallow")); err != nil {
		t.Fatal(err)
	}
	_, err := open(t, cut.Dir).Read("HEAD", ".")
	var se *gitsrc.ShallowError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "missing from the object store") {
		t.Errorf("got %v, want a ShallowError about a missing parent", err)
	}
}

func TestRenameDeleteMove(t *testing.T) {
	g := gittest.New(t, t.TempDir())
	g.Write("policy/a.cue", policyV1)
	g.Write("policy/b.cue", "package policy\n")
	c1 := g.Commit("two files")
	g.Move("policy/a.cue", "policy/linear.cue")
	c2 := g.Commit("rename a to linear")
	g.Remove("policy/b.cue")
	c3 := g.Commit("delete b")
	g.Move("policy/linear.cue", "policies/linear.cue")
	c4 := g.Commit("move the policy to policies/")

	r := open(t, g.Dir)
	for _, tc := range []struct {
		rev   plumbing.Hash
		path  string
		files []string
	}{
		{c1, "policy", []string{"a.cue", "b.cue"}},
		{c2, "policy", []string{"b.cue", "linear.cue"}},
		{c3, "policy", []string{"linear.cue"}},
		{c4, "policies", []string{"linear.cue"}},
	} {
		snap, err := r.Read(tc.rev.String(), tc.path)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.rev, tc.path, err)
		}
		if got := fileNames(snap); !reflect.DeepEqual(got, tc.files) {
			t.Errorf("%s %s: files %v, want %v", tc.rev, tc.path, got, tc.files)
		}
	}
	// After the move the old path is gone, and the error says where the
	// policy went.
	_, err := r.Read("HEAD", "policy")
	var pe *gitsrc.PathError
	if !errors.As(err, &pe) {
		t.Fatalf("got %v, want a PathError", err)
	}
	if !reflect.DeepEqual(pe.Candidates, []string{"policies"}) || !strings.Contains(err.Error(), `has no directory "policy"`) {
		t.Errorf("error %q, candidates %v", err, pe.Candidates)
	}
	// A file is not a policy directory.
	if _, err := r.Read("HEAD", "policies/linear.cue"); !errors.As(err, &pe) || !pe.NotDir {
		t.Errorf("file as policy path: %v", err)
	}
	// The same tree content gives the same tree hash, wherever it lives:
	// the rename commits differ, the policies tree of c4 equals c3's policy
	// tree.
	s3, _ := r.Read(c3.String(), "policy")
	s4, _ := r.Read(c4.String(), "policies")
	if s3.Source.Tree != s4.Source.Tree {
		t.Errorf("moved tree hash %s differs from %s", s4.Source.Tree, s3.Source.Tree)
	}
}

func TestSymlinkRefused(t *testing.T) {
	g := gittest.New(t, t.TempDir())
	g.Write("real/p.cue", policyV1)
	if err := os.MkdirAll(filepath.Join(g.Dir, "policy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../real/p.cue", filepath.Join(g.Dir, "policy", "p.cue")); err != nil {
		t.Skip("symlinks not available:", err)
	}
	w, _ := g.Git.Worktree()
	if _, err := w.Add("policy/p.cue"); err != nil {
		t.Fatal(err)
	}
	g.Commit("a linked policy file")
	_, err := open(t, g.Dir).Read("HEAD", "policy")
	if err == nil || !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), "p.cue") {
		t.Errorf("got %v, want a refusal naming the link", err)
	}
}

func TestNotRepository(t *testing.T) {
	dir := t.TempDir()
	_, err := gitsrc.Open(filepath.Join(dir, "policy"))
	var ne *gitsrc.NotRepositoryError
	if !errors.As(err, &ne) {
		t.Fatalf("got %v, want a NotRepositoryError", err)
	}
	// The fact only: what to do instead is in terms of a command's flags,
	// which only the command knows (lint has no --repo).
	if !strings.Contains(err.Error(), "not a git repository") || strings.Contains(err.Error(), "--repo") {
		t.Errorf("message %q", err)
	}
}

// A bare repository is found as git finds it, from the directory itself,
// from inside it, and from a path below it that does not exist; it reads
// as its clone does, and has no work tree to place a directory in.
func TestOpenBare(t *testing.T) {
	g := gittest.New(t, t.TempDir())
	g.Write("policy/p.cue", policyV1)
	g.Commit("one")
	g.Write("policy/p.cue", policyV2)
	g.Commit("two")
	// Inside a work tree, so the search must stop at the bare repository
	// rather than go on to the work tree above it.
	bare := filepath.Join(g.Dir, "mirror.git")
	if _, err := git.PlainClone(bare, true, &git.CloneOptions{URL: g.URL()}); err != nil {
		t.Fatal(err)
	}
	want, err := open(t, g.Dir).Read("HEAD", "policy")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{bare, filepath.Join(bare, "refs", "heads"), filepath.Join(bare, "policy")} {
		r, err := gitsrc.Open(dir)
		if err != nil {
			t.Fatalf("Open(%s): %v", dir, err)
		}
		defer r.Close()
		if r.Root() != "" || r.Dir() != bare {
			t.Errorf("Open(%s): root %q, dir %q; want no work tree and %s", dir, r.Root(), r.Dir(), bare)
		}
		snap, err := r.Read("HEAD", "policy")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(snap.Files, want.Files) || snap.Serial != 2 || snap.Source.Tree != want.Source.Tree || snap.Source.Commit != want.Source.Commit {
			t.Errorf("bare read %+v serial %d, want %+v serial 2", snap.Source, snap.Serial, want.Source)
		}
		_, err = r.RelPath(filepath.Join(bare, "policy"))
		var be *gitsrc.BareError
		if !errors.As(err, &be) || be.Dir != bare || !strings.Contains(err.Error(), "no work tree") {
			t.Errorf("RelPath in a bare repository: %v", err)
		}
	}
}

func TestOpenFromSubdirectoryAndRelPath(t *testing.T) {
	g := gittest.New(t, t.TempDir())
	g.Write("policy/p.cue", policyV1)
	g.Commit("one")
	// Opening from a directory that does not exist finds the repository
	// of its nearest existing parent: a policy path of an old revision.
	r := open(t, filepath.Join(g.Dir, "gone", "policy"))
	rel, err := r.RelPath(filepath.Join(g.Dir, "gone", "policy"))
	if err != nil || rel != "gone/policy" {
		t.Errorf("RelPath = %q, %v", rel, err)
	}
	if rel, err := r.RelPath(g.Dir); err != nil || rel != "." {
		t.Errorf("RelPath(root) = %q, %v", rel, err)
	}
	// Through a symbolic link to the repository.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(g.Dir, link); err == nil {
		lr := open(t, filepath.Join(link, "policy"))
		if rel, err := lr.RelPath(filepath.Join(link, "policy")); err != nil || rel != "policy" {
			t.Errorf("RelPath through a link = %q, %v", rel, err)
		}
	}
	if _, err := r.RelPath(t.TempDir()); err == nil || !strings.Contains(err.Error(), "outside the repository") {
		t.Errorf("RelPath outside: %v", err)
	}
	for _, bad := range []string{"../x", "/etc", ".."} {
		if _, err := gitsrc.CleanPath(bad); err == nil {
			t.Errorf("CleanPath(%q) accepted", bad)
		}
	}
	if p, err := gitsrc.CleanPath("./policy//team/"); err != nil || p != "policy/team" {
		t.Errorf("CleanPath = %q, %v", p, err)
	}
}

func TestWorkTreeDirty(t *testing.T) {
	g := gittest.New(t, t.TempDir())
	dir := filepath.Join(g.Dir, "policy")
	r := open(t, g.Dir)

	// No commit yet: nothing to be clean against.
	g.WriteUnstaged("policy/p.cue", policyV1)
	snap, err := r.WorkTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Source.Dirty || snap.Serial != 0 || snap.Source.Commit != "" {
		t.Errorf("unborn HEAD: %+v serial %d", snap.Source, snap.Serial)
	}

	g.Write("policy/p.cue", policyV1)
	g.Write("policy/policyc.cue", "package config\n")
	g.Commit("one")
	g.Write("policy/p.cue", policyV2)
	head := g.Commit("two")

	clean, err := r.WorkTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	atHead, err := r.Read("HEAD", "policy")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(clean.Source, atHead.Source) || clean.Serial != atHead.Serial || clean.Serial != 2 {
		t.Errorf("clean work tree %+v/%d differs from HEAD %+v/%d", clean.Source, clean.Serial, atHead.Source, atHead.Serial)
	}

	check := func(what string, want bool) {
		t.Helper()
		snap, err := r.WorkTree(dir)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Source.Dirty != want {
			t.Errorf("%s: snapshot dirty = %v; want %v", what, snap.Source.Dirty, want)
		}
		if want && (snap.Serial != 0 || snap.Source.Tree != "" || snap.Source.Commit != head.String()) {
			t.Errorf("%s: dirty snapshot %+v serial %d; want HEAD as commit, no tree, serial 0", what, snap.Source, snap.Serial)
		}
	}
	check("clean", false)
	g.WriteUnstaged("policy/p.cue", policyV1)
	check("modified file", true)
	g.WriteUnstaged("policy/p.cue", policyV2)
	check("restored file", false)
	g.WriteUnstaged("policy/policyc.cue", "package config\n// changed\n")
	check("changed lint config", false)
	g.WriteUnstaged("policy/notes.md", "not policy\n")
	check("non-.cue file", false)
	g.WriteUnstaged("policy/sub/x.cue", "package policy\n")
	check("file in a subdirectory", false)
	g.WriteUnstaged("policy/new.cue", "package policy\n")
	check("untracked policy file", true)
	os.Remove(filepath.Join(dir, "new.cue"))
	check("untracked file removed", false)
	os.Remove(filepath.Join(dir, "p.cue"))
	check("deleted file", true)
	g.WriteUnstaged("policy/p.cue", policyV2)
	// How it differs, file by file.
	g.WriteUnstaged("policy/p.cue", policyV1)
	g.WriteUnstaged("policy/new.cue", "package policy\n")
	g.Write("policy/gone.cue", "package policy\n")
	g.Commit("three")
	os.Remove(filepath.Join(dir, "gone.cue"))
	snap, err = r.WorkTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"gone.cue (deleted)", "new.cue (not in HEAD)", "p.cue (modified)"}; !reflect.DeepEqual(snap.Changed, want) {
		t.Errorf("changed = %v, want %v", snap.Changed, want)
	}
	// A directory HEAD does not have is dirty.
	g.WriteUnstaged("other/p.cue", policyV1)
	other, err := r.WorkTree(filepath.Join(g.Dir, "other"))
	if err != nil || !other.Source.Dirty {
		t.Errorf("uncommitted directory: %v, %v", other, err)
	}
}

func TestBlameLine(t *testing.T) {
	g := gittest.New(t, t.TempDir())
	g.Write("policy/linear.cue", policyV1)
	g.Commit("linear policy")
	g.Write("policy/linear.cue", policyV2)
	introduced := g.CommitAs(gittest.Bob, "Hold save_issue for approval\n\nLinear writes are visible to customers.")
	// An unrelated change later in the file.
	g.Write("policy/linear.cue", policyV2+"\n// reviewed\n")
	g.Commit("note review")

	r := open(t, g.Dir)
	head, _ := g.Git.CommitObject(g.Head())
	// Line 5 is `approval_list: ["save_issue"]`.
	o, err := r.BlameLine(head, "policy/linear.cue", 5)
	if err != nil {
		t.Fatal(err)
	}
	if o.Commit != introduced || o.AuthorName != "Bob Example" || o.AuthorEmail != "bob@example.com" ||
		o.Subject != "Hold save_issue for approval" || !strings.Contains(o.Text, "approval_list") {
		t.Errorf("blame = %+v, want Bob's commit %s", o, introduced)
	}
	if want := gittest.Epoch.Add(time.Minute); !o.Date.Equal(want) {
		t.Errorf("date = %v, want %v", o.Date, want)
	}

	// Move the policy to another directory and add lines above: blame
	// still finds Bob's commit, across the rename.
	g.Move("policy/linear.cue", "policies/linear.cue")
	g.Commit("move the policy")
	g.Write("policies/linear.cue", "// Linear\n"+policyV2+"\n// reviewed\n")
	g.Commit("heading")
	head, _ = g.Git.CommitObject(g.Head())
	o, err = r.BlameLine(head, "policies/linear.cue", 6)
	if err != nil {
		t.Fatal(err)
	}
	if o.Commit != introduced || !strings.Contains(o.Text, "approval_list") {
		t.Errorf("after the move: %s %q, want %s", o.Commit, o.Text, introduced)
	}
	// The move itself is blamed for nothing it carried; the heading is
	// the new commit's.
	o, err = r.BlameLine(head, "policies/linear.cue", 1)
	if err != nil || o.Commit != g.Head() {
		t.Errorf("line 1: %v, %v; want the heading commit", o, err)
	}

	if _, err := r.BlameLine(head, "policies/linear.cue", 99); err == nil || !strings.Contains(err.Error(), "no line 99") {
		t.Errorf("out of range: %v", err)
	}
	if _, err := r.BlameLine(head, "policy/linear.cue", 1); err == nil || !strings.Contains(err.Error(), "not in commit") {
		t.Errorf("missing file: %v", err)
	}
}

// Two clones in different directories read the same snapshot.
func TestClonesAgree(t *testing.T) {
	up := gittest.New(t, t.TempDir())
	up.Write("policy/p.cue", policyV1)
	up.Commit("one")
	up.Write("policy/p.cue", policyV2)
	up.Commit("two")
	a := gittest.Clone(t, up, filepath.Join(t.TempDir(), "a"))
	b := gittest.Clone(t, up, filepath.Join(t.TempDir(), "elsewhere", "b"))
	sa, err := open(t, a.Dir).Read("HEAD", "policy")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := open(t, b.Dir).Read("origin/main", "policy")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sa.Source, sb.Source) || sa.Serial != sb.Serial || !reflect.DeepEqual(sa.Files, sb.Files) {
		t.Errorf("clones differ:\n%+v %d\n%+v %d", sa.Source, sa.Serial, sb.Source, sb.Serial)
	}
	if sa.Source.Repository != up.URL() {
		t.Errorf("repository = %q, want the upstream URL %q", sa.Source.Repository, up.URL())
	}
}

// The serial is the same whether history is loose, packed, or both: the
// walk reads packed commits itself and leaves the rest to go-git.
func TestSerialPackedAndLoose(t *testing.T) {
	g := gittest.New(t, t.TempDir())
	g.Write("policy/p.cue", policyV1)
	g.Commit("one")
	g.Chain(30, "CHANGELOG")
	g.Branch("side")
	g.Chain(3, "SIDE")
	side := g.Head()
	g.Checkout("main")
	g.Write("m.txt", "merge\n")
	g.Merge(side, "merge side") // 32
	serial := func() uint64 {
		t.Helper()
		r := open(t, g.Dir)
		defer r.Close()
		s, err := r.Read("HEAD", "policy")
		if err != nil {
			t.Fatal(err)
		}
		return s.Serial
	}
	if s := serial(); s != 32 {
		t.Fatalf("loose serial = %d, want 32", s)
	}
	if err := g.Git.RepackObjects(&git.RepackConfig{}); err != nil {
		t.Fatal(err)
	}
	if s := serial(); s != 32 {
		t.Errorf("packed serial = %d, want 32", s)
	}
	g.Chain(5, "CHANGELOG") // loose commits on top of packed history
	if s := serial(); s != 37 {
		t.Errorf("loose over packed serial = %d, want 37", s)
	}
}
