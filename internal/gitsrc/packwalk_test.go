package gitsrc

import (
	"bytes"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/policyc/policyc/internal/gitsrc/gittest"
)

// The pack walker reads packed commits' headers itself, identical to the
// start of the commit object, and declines what it cannot read.
func TestPackWalkerHeaders(t *testing.T) {
	g := gittest.New(t, t.TempDir())
	g.Write("p.cue", "package policy\n")
	g.Commit("one")
	g.Chain(10, "CHANGELOG")
	head := g.Head()
	if err := g.Git.RepackObjects(&git.RepackConfig{}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(g.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w := openPackWalker(r.storage)
	if w == nil {
		t.Fatal("no pack walker on a packed repository")
	}
	defer w.Close()
	c, _ := r.repo.CommitObject(head)
	for c != nil {
		o, err := r.repo.Storer.EncodedObject(plumbing.AnyObject, c.Hash)
		if err != nil {
			t.Fatal(err)
		}
		rd, _ := o.Reader()
		var full bytes.Buffer
		full.ReadFrom(rd)
		rd.Close()
		head, err := w.header(c.Hash)
		if err != nil {
			t.Fatalf("header of packed commit %s: %v", c.Hash, err)
		}
		if !bytes.HasPrefix(full.Bytes(), head) || len(head) < 90 {
			t.Fatalf("header %q is not the start of %q", head, full.Bytes())
		}
		if len(c.ParentHashes) == 0 {
			break
		}
		c, _ = r.repo.CommitObject(c.ParentHashes[0])
	}
	// A blob is not a commit: declined.
	tree, _ := c.Tree()
	if _, err := w.header(tree.Entries[0].Hash); err != errNotHere {
		t.Errorf("blob header: %v, want errNotHere", err)
	}
}
