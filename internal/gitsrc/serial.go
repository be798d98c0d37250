package gitsrc

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// ShallowError reports history the repository does not hold: a shallow
// clone's boundary, or a parent commit missing from the object store.
type ShallowError struct {
	Rev string
	// Commit is the last commit that was read; Missing its parent that is
	// not in the repository. Both are zero when a revision could not be
	// resolved for the same reason.
	Commit, Missing plumbing.Hash
	Err             error
}

func (e *ShallowError) Error() string {
	const fix = "fetch the full history (git fetch --unshallow; in GitHub Actions, actions/checkout with fetch-depth: 0)"
	if e.Commit.IsZero() {
		return fmt.Sprintf("revision %q reaches past the history this shallow clone holds (%v); %s", e.Rev, e.Err, fix)
	}
	what := fmt.Sprintf("commit %s is the boundary of a shallow clone: its parent %s was not fetched", short(e.Commit), short(e.Missing))
	if e.Err != nil {
		what = fmt.Sprintf("the parent %s of commit %s is missing from the object store", short(e.Missing), short(e.Commit))
	}
	return fmt.Sprintf("history of %q is incomplete: %s, so the serial (the commit's depth on the first-parent line) cannot be counted; %s", e.Rev, what, fix)
}

func (e *ShallowError) Unwrap() error { return e.Err }

// Serial returns the serial of a table built from commit c: its depth on
// the first-parent line, counting c itself, so a root commit has serial 1
// and every commit has serial one more than its first parent. A later commit
// on the first-parent line (each merge to main, each commit on a branch)
// therefore always has a larger serial, and the same commit has the same
// serial in every clone. Commits that only a merge brings in (second
// parents) are not counted: the serial measures the line the merge lands
// on.
//
// It reads each first-parent commit once: linear in the depth, and
// independent of everything else in the repository. In a shallow clone,
// whose history stops at a boundary, it returns a *ShallowError naming the
// missing commit rather than a serial that would be too small.
func (r *Repo) Serial(c *object.Commit, rev string) (uint64, error) {
	if r.packs == nil && r.storage != nil {
		r.packs = openPackWalker(r.storage)
	}
	n := uint64(1)
	cur, parent, ok := c.Hash, plumbing.ZeroHash, len(c.ParentHashes) > 0
	if ok {
		parent = c.ParentHashes[0]
	}
	for ; ok; n++ {
		if r.shallow[cur] {
			return 0, &ShallowError{Rev: rev, Commit: cur, Missing: parent}
		}
		next, nextParent, hasParent, err := r.firstParent(parent)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return 0, &ShallowError{Rev: rev, Commit: cur, Missing: parent, Err: err}
		}
		if err != nil {
			return 0, fmt.Errorf("read commit %s (first parent of %s): %w", parent, cur, err)
		}
		cur, parent, ok = next, nextParent, hasParent
	}
	return n, nil
}

// firstParent reads the header of commit h and returns h with its first
// parent. Only the header is read: a commit object starts with its tree
// line, then its parent lines in order; decoding the whole commit (author,
// message, signature) would cost three times as much per step.
func (r *Repo) firstParent(h plumbing.Hash) (plumbing.Hash, plumbing.Hash, bool, error) {
	var head []byte
	if r.packs != nil {
		head, _ = r.packs.header(h)
	}
	if head == nil {
		o, err := r.repo.Storer.EncodedObject(plumbing.CommitObject, h)
		if err != nil {
			return h, plumbing.ZeroHash, false, err
		}
		rd, err := o.Reader()
		if err != nil {
			return h, plumbing.ZeroHash, false, err
		}
		defer rd.Close()
		var buf [2 * (len("parent ") + 2*maxHashSize + 1)]byte
		m, err := io.ReadFull(rd, buf[:])
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return h, plumbing.ZeroHash, false, err
		}
		head = buf[:m]
	}
	nl := bytes.IndexByte(head, '\n')
	if !bytes.HasPrefix(head, []byte("tree ")) || nl < 0 {
		return h, plumbing.ZeroHash, false, fmt.Errorf("commit %s: malformed header", h)
	}
	rest := head[nl+1:]
	if !bytes.HasPrefix(rest, []byte("parent ")) {
		return h, plumbing.ZeroHash, false, nil
	}
	rest = rest[len("parent "):]
	end := bytes.IndexByte(rest, '\n')
	if end < 0 {
		return h, plumbing.ZeroHash, false, fmt.Errorf("commit %s: malformed parent line", h)
	}
	hexID := string(rest[:end])
	if !plumbing.IsHash(hexID) {
		return h, plumbing.ZeroHash, false, fmt.Errorf("commit %s: malformed parent %q", h, rest[:end])
	}
	return h, plumbing.NewHash(hexID), true, nil
}

// maxHashSize is the size in bytes of the longest object id (SHA-256).
const maxHashSize = 32
