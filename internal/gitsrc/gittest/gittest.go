// Package gittest builds real git repositories for tests, with go-git and
// without a git binary: commits with fixed authors and times, branches,
// merges, annotated tags, detached heads, clones in other directories and
// shallow clones.
//
// It is for tests only; nothing outside _test.go files imports it.
package gittest

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
)

// Repo is a repository under construction.
type Repo struct {
	T   testing.TB
	Dir string
	Git *git.Repository
	// When is the time of the next commit; each commit advances it by a
	// minute. It is in a non-UTC zone, so tests see times normalised.
	When time.Time
}

// Epoch is the time of the first commit of every repository.
var Epoch = time.Date(2025, 3, 1, 9, 0, 0, 0, time.FixedZone("CEST", 2*60*60))

// Alice and Bob are the authors commits are made as.
var (
	Alice = Person{"Alice Example", "alice@example.com"}
	Bob   = Person{"Bob Example", "bob@example.com"}
)

// Person is a commit author.
type Person struct{ Name, Email string }

// New creates a repository in dir with its default branch named main.
func New(t testing.TB, dir string) *Repo {
	t.Helper()
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &Repo{T: t, Dir: dir, Git: r, When: Epoch}
}

func (r *Repo) wt() *git.Worktree {
	r.T.Helper()
	w, err := r.Git.Worktree()
	if err != nil {
		r.T.Fatal(err)
	}
	return w
}

// Write writes a file (slash-separated, relative to the work tree) and
// stages it.
func (r *Repo) Write(name, content string) {
	r.T.Helper()
	r.WriteUnstaged(name, content)
	if _, err := r.wt().Add(name); err != nil {
		r.T.Fatal(err)
	}
}

// WriteUnstaged writes a file without staging it.
func (r *Repo) WriteUnstaged(name, content string) {
	r.T.Helper()
	p := filepath.Join(r.Dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.T.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.T.Fatal(err)
	}
}

// Remove deletes a file from the work tree and the index.
func (r *Repo) Remove(name string) {
	r.T.Helper()
	if _, err := r.wt().Remove(name); err != nil {
		r.T.Fatal(err)
	}
}

// Move renames a file in the work tree and the index.
func (r *Repo) Move(from, to string) {
	r.T.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(r.Dir, filepath.FromSlash(to))), 0o755); err != nil {
		r.T.Fatal(err)
	}
	if _, err := r.wt().Move(from, to); err != nil {
		r.T.Fatal(err)
	}
}

func (r *Repo) sig(p Person) *object.Signature {
	s := &object.Signature{Name: p.Name, Email: p.Email, When: r.When}
	r.When = r.When.Add(time.Minute)
	return s
}

// Commit commits the index as Alice and returns the commit's hash.
func (r *Repo) Commit(msg string) plumbing.Hash {
	r.T.Helper()
	return r.CommitAs(Alice, msg)
}

// CommitAs commits the index as p.
func (r *Repo) CommitAs(p Person, msg string, parents ...plumbing.Hash) plumbing.Hash {
	r.T.Helper()
	h, err := r.wt().Commit(msg, &git.CommitOptions{Author: r.sig(p), Parents: parents, AllowEmptyCommits: true})
	if err != nil {
		r.T.Fatal(err)
	}
	return h
}

// Head returns the commit HEAD points at.
func (r *Repo) Head() plumbing.Hash {
	r.T.Helper()
	ref, err := r.Git.Head()
	if err != nil {
		r.T.Fatal(err)
	}
	return ref.Hash()
}

// Branch creates a branch at HEAD and checks it out.
func (r *Repo) Branch(name string) {
	r.T.Helper()
	err := r.wt().Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(name), Create: true})
	if err != nil {
		r.T.Fatal(err)
	}
}

// Checkout checks out an existing branch.
func (r *Repo) Checkout(name string) {
	r.T.Helper()
	if err := r.wt().Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(name)}); err != nil {
		r.T.Fatal(err)
	}
}

// Detach checks out a commit, leaving HEAD detached.
func (r *Repo) Detach(h plumbing.Hash) {
	r.T.Helper()
	if err := r.wt().Checkout(&git.CheckoutOptions{Hash: h}); err != nil {
		r.T.Fatal(err)
	}
}

// Merge commits the index as a merge of HEAD (first parent) and other.
// The caller stages the merged content first.
func (r *Repo) Merge(other plumbing.Hash, msg string) plumbing.Hash {
	r.T.Helper()
	return r.CommitAs(Alice, msg, r.Head(), other)
}

// Tag creates a tag at h; annotated when msg is not empty.
func (r *Repo) Tag(name string, h plumbing.Hash, msg string) {
	r.T.Helper()
	var opts *git.CreateTagOptions
	if msg != "" {
		opts = &git.CreateTagOptions{Tagger: r.sig(Alice), Message: msg}
	}
	if _, err := r.Git.CreateTag(name, h, opts); err != nil {
		r.T.Fatal(err)
	}
}

// SetOrigin adds a remote named origin with url.
func (r *Repo) SetOrigin(url string) {
	r.T.Helper()
	if _, err := r.Git.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{url}}); err != nil {
		r.T.Fatal(err)
	}
}

// served maps file:// URLs to the repositories tests may clone, through an
// in-process transport: go-git's own file transport would run
// git-upload-pack.
var (
	servedMu sync.Mutex
	served   = map[string]storer.Storer{}
	install  sync.Once
)

type loader struct{}

func (loader) Load(ep *transport.Endpoint) (storer.Storer, error) {
	servedMu.Lock()
	defer servedMu.Unlock()
	if s, ok := served[ep.String()]; ok {
		return s, nil
	}
	return nil, transport.ErrRepositoryNotFound
}

// URL returns a file:// URL other repositories can clone r from.
func (r *Repo) URL() string {
	install.Do(func() { client.InstallProtocol("file", server.NewClient(loader{})) })
	u := "file://" + filepath.ToSlash(r.Dir)
	ep, err := transport.NewEndpoint(u)
	if err != nil {
		r.T.Fatal(err)
	}
	servedMu.Lock()
	served[ep.String()] = r.Git.Storer
	servedMu.Unlock()
	return u
}

// Clone clones src into dir, checking out its HEAD branch; the clone's
// origin is src's URL.
func Clone(t testing.TB, src *Repo, dir string) *Repo {
	t.Helper()
	r, err := git.PlainClone(dir, false, &git.CloneOptions{URL: src.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return &Repo{T: t, Dir: dir, Git: r, When: src.When}
}

// ShallowClone makes in dir what `git clone --depth N` of src's HEAD
// branch leaves: the newest depth commits of the first-parent line with
// their trees, a .git/shallow file naming the oldest, and origin set to
// url. Earlier history is absent from its object store.
func ShallowClone(t testing.TB, src *Repo, dir string, depth int, url string) *Repo {
	t.Helper()
	dst := New(t, dir)
	head := src.Head()
	var keep []plumbing.Hash
	c, err := src.Git.CommitObject(head)
	if err != nil {
		t.Fatal(err)
	}
	for {
		keep = append(keep, c.Hash)
		if len(keep) == depth || len(c.ParentHashes) == 0 {
			break
		}
		if c, err = src.Git.CommitObject(c.ParentHashes[0]); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range keep {
		copyObject(t, src.Git.Storer, dst.Git.Storer, h)
		c, _ := src.Git.CommitObject(h)
		copyTree(t, src.Git, dst.Git.Storer, c.TreeHash)
	}
	if err := dst.Git.Storer.SetShallow([]plumbing.Hash{keep[len(keep)-1]}); err != nil {
		t.Fatal(err)
	}
	main := plumbing.NewBranchReferenceName("main")
	if err := dst.Git.Storer.SetReference(plumbing.NewHashReference(main, head)); err != nil {
		t.Fatal(err)
	}
	if err := dst.wt().Reset(&git.ResetOptions{Commit: head, Mode: git.HardReset}); err != nil {
		t.Fatal(err)
	}
	if url != "" {
		dst.SetOrigin(url)
	}
	return dst
}

func copyObject(t testing.TB, from, to storer.EncodedObjectStorer, h plumbing.Hash) {
	t.Helper()
	o, err := from.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := to.SetEncodedObject(o); err != nil {
		t.Fatal(err)
	}
}

func copyTree(t testing.TB, from *git.Repository, to storer.EncodedObjectStorer, h plumbing.Hash) {
	t.Helper()
	copyObject(t, from.Storer, to, h)
	tree, err := from.TreeObject(h)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tree.Entries {
		switch e.Mode {
		case filemode.Dir:
			copyTree(t, from, to, e.Hash)
		case filemode.Submodule:
		default:
			copyObject(t, from.Storer, to, e.Hash)
		}
	}
}

// Chain makes n commits on HEAD, each changing one file, as a long history
// for benchmarks.
func (r *Repo) Chain(n int, name string) {
	r.T.Helper()
	for i := 0; i < n; i++ {
		r.Write(name, fmt.Sprintf("commit %d\n", i))
		r.Commit(fmt.Sprintf("change %d", i))
	}
}
