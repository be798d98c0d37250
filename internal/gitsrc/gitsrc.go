// Package gitsrc reads policy sources out of a git repository: the files of
// a policy path at a revision, the provenance a table records (origin,
// commit, tree, commit time), the serial, whether the work tree differs
// from HEAD, and which commit last touched a line.
//
// It reads the object store with go-git and never runs a git binary. It
// never reads the work tree when asked for a revision, so an uncommitted
// edit cannot leak into a build of a commit, and it never guesses: history
// that is missing (a shallow clone) is an error, not a smaller serial.
package gitsrc

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/table"
)

// Repo is an open repository.
type Repo struct {
	repo *git.Repository
	// root is the absolute work tree root with symlinks resolved; empty
	// for a bare repository.
	root string
	// dir is the directory the repository was found at: the work tree
	// root, or the git directory of a bare repository.
	dir string
	// shallow holds the shallow-clone boundary commits, if any.
	shallow map[plumbing.Hash]bool
	closer  io.Closer
	// storage is the filesystem storage, when the repository has one, and
	// packs its pack files opened for the serial's walk.
	storage *filesystem.Storage
	packs   *packWalker
}

// Close releases the files the repository keeps open.
func (r *Repo) Close() error {
	if r.packs != nil {
		r.packs.Close()
	}
	if r.closer == nil {
		return nil
	}
	return r.closer.Close()
}

// NotRepositoryError reports a directory that is not inside a git
// repository. It states the fact only: what to do instead depends on the
// command and its flags, so the command says it.
type NotRepositoryError struct {
	Dir string
}

func (e *NotRepositoryError) Error() string {
	return fmt.Sprintf("not a git repository: %s (nor any of its parent directories)", e.Dir)
}

// BareError reports a bare repository where a work tree is needed.
type BareError struct {
	// Dir is the repository's directory.
	Dir string
}

func (e *BareError) Error() string {
	return fmt.Sprintf("%s is a bare repository: it has no work tree", e.Dir)
}

// Open opens the repository that holds dir, searching upward from it as git
// does: at each level a work tree (a .git entry) or a bare repository (the
// directory itself is a git directory). dir need not exist: the search
// starts at its nearest existing ancestor, so a policy path that exists
// only in an older revision still finds its repository.
func Open(dir string) (*Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	found, ok := discover(existingAncestor(abs))
	if !ok {
		return nil, &NotRepositoryError{Dir: abs}
	}
	// go-git's own upward search (DetectDotGit) looks for .git only and
	// would pass over a bare repository, so the search above is ours and
	// go-git opens the directory it found.
	r, err := git.PlainOpenWithOptions(found, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, &NotRepositoryError{Dir: abs}
	}
	if err != nil {
		return nil, fmt.Errorf("open repository at %s: %w", abs, err)
	}
	var closer io.Closer
	var storage *filesystem.Storage
	// Reopen the same storage keeping pack files open: the serial reads
	// one commit per step of history, and go-git would otherwise open the
	// pack again for each.
	if fsys, ok := r.Storer.(*filesystem.Storage); ok {
		var wtfs billy.Filesystem
		if wt, err := r.Worktree(); err == nil {
			wtfs = wt.Filesystem
		}
		st := filesystem.NewStorageWithOptions(fsys.Filesystem(), cache.NewObjectLRUDefault(), filesystem.Options{KeepDescriptors: true})
		if r, err = git.Open(st, wtfs); err != nil {
			st.Close()
			return nil, fmt.Errorf("open repository at %s: %w", abs, err)
		}
		closer, storage = st, st
	}
	repo := &Repo{repo: r, closer: closer, storage: storage, dir: found}
	if resolved, err := filepath.EvalSymlinks(found); err == nil {
		repo.dir = resolved
	}
	if wt, err := r.Worktree(); err == nil {
		root := wt.Filesystem.Root()
		if resolved, err := filepath.EvalSymlinks(root); err == nil {
			root = resolved
		}
		repo.root, repo.dir = root, root
	} else if !errors.Is(err, git.ErrIsBareRepository) {
		return nil, fmt.Errorf("open repository at %s: %w", abs, err)
	}
	shallow, err := r.Storer.Shallow()
	if err != nil {
		return nil, fmt.Errorf("read shallow boundary of %s: %w", abs, err)
	}
	for _, h := range shallow {
		if repo.shallow == nil {
			repo.shallow = map[plumbing.Hash]bool{}
		}
		repo.shallow[h] = true
	}
	return repo, nil
}

// discover returns the directory of the repository that holds start,
// searching upward as git does: at each level a .git entry (a work tree,
// or a linked work tree's .git file) comes first, then the directory
// itself as a git directory, which is how a bare repository is found.
func discover(start string) (string, bool) {
	dir := start
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		dir = filepath.Dir(dir)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, git.GitDirName)); err == nil {
			return dir, true
		}
		if isGitDir(dir) {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// isGitDir reports whether dir is a git directory, by the test git itself
// applies: a HEAD file and the objects and refs directories.
func isGitDir(dir string) bool {
	head, err := os.Stat(filepath.Join(dir, "HEAD"))
	if err != nil || !head.Mode().IsRegular() {
		return false
	}
	for _, sub := range []string{"objects", "refs"} {
		st, err := os.Stat(filepath.Join(dir, sub))
		if err != nil || !st.IsDir() {
			return false
		}
	}
	return true
}

func existingAncestor(abs string) string {
	for {
		if _, err := os.Stat(abs); err == nil {
			return abs
		}
		parent := filepath.Dir(abs)
		if parent == abs {
			return abs
		}
		abs = parent
	}
}

// Git returns the go-git repository, for readers this package does not
// cover (the index, for lint --staged).
func (r *Repo) Git() *git.Repository { return r.repo }

// Root returns the absolute path of the work tree, or "" for a bare
// repository.
func (r *Repo) Root() string { return r.root }

// Dir returns where the repository is, for messages: the work tree root,
// or the directory of a bare repository.
func (r *Repo) Dir() string { return r.dir }

// Shallow reports whether the repository is a shallow clone.
func (r *Repo) Shallow() bool { return len(r.shallow) > 0 }

// RelPath turns a directory on disk into the policy path a table records:
// relative to the work tree root, slash-separated, "." for the root. It does
// not require dir to exist. In a bare repository, which has no work tree,
// it returns a *BareError.
func (r *Repo) RelPath(dir string) (string, error) {
	if r.root == "" {
		return "", &BareError{Dir: r.dir}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	// Resolve symlinks in the part that exists, so a repository reached
	// through a link still yields a path inside it.
	base := existingAncestor(abs)
	rest, _ := filepath.Rel(base, abs)
	if resolved, err := filepath.EvalSymlinks(base); err == nil {
		abs = filepath.Join(resolved, rest)
	}
	rel, err := filepath.Rel(r.root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%s is outside the repository at %s", dir, r.root)
	}
	return CleanPath(filepath.ToSlash(rel))
}

// CleanPath checks a repository-relative policy path and returns its clean
// slash form ("." for the root).
func CleanPath(p string) (string, error) {
	p = strings.ReplaceAll(p, "\\", "/")
	c := path.Clean(p)
	if c == "" {
		c = "."
	}
	if path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("policy path %q is not inside the repository: with --repo, PATH is relative to the repository root", p)
	}
	return c, nil
}

// RevisionError reports a revision that names no commit.
type RevisionError struct {
	Rev string
	Err error
}

func (e *RevisionError) Error() string {
	if errors.Is(e.Err, ErrNoCommits) {
		return fmt.Sprintf("revision %q: %v", e.Rev, e.Err)
	}
	return fmt.Sprintf("unknown revision %q: no branch, tag or commit by that name (%v); check the name, or fetch it first", e.Rev, e.Err)
}

func (e *RevisionError) Unwrap() error { return e.Err }

// Resolve returns the commit a revision names: a branch, a tag (an
// annotated tag is peeled to its commit), a full or abbreviated hash, HEAD,
// and the suffixes go-git understands (~N, ^N).
func (r *Repo) Resolve(rev string) (*object.Commit, error) {
	if rev == "" {
		return nil, &RevisionError{Rev: rev, Err: errors.New("empty revision")}
	}
	if err := checkRevisionForm(rev); err != nil {
		return nil, &RevisionError{Rev: rev, Err: err}
	}
	h, err := r.repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		if _, herr := r.Head(); errors.Is(herr, ErrNoCommits) && !r.hasRefs() {
			// Nothing can be named before the first commit: say that,
			// not that this name is unknown.
			return nil, &RevisionError{Rev: rev, Err: fmt.Errorf("%w: commit the policy first (git add, git commit)", ErrNoCommits)}
		}
		if errors.Is(err, plumbing.ErrObjectNotFound) && r.Shallow() {
			return nil, &ShallowError{Rev: rev, Err: err}
		}
		if errors.Is(err, io.EOF) {
			// go-git's way of saying ~N or ^N went past the parents.
			err = errors.New("it names a parent the history does not have")
		}
		return nil, &RevisionError{Rev: rev, Err: err}
	}
	c, err := r.repo.CommitObject(*h)
	if err != nil {
		return nil, &RevisionError{Rev: rev, Err: err}
	}
	return c, nil
}

// hasRefs reports whether the repository has a branch or a tag: an unborn
// HEAD (a new repository, or an orphan branch) alone does not mean there
// is no commit to name.
func (r *Repo) hasRefs() bool {
	refs, err := r.repo.References()
	if err != nil {
		return true // say nothing of what cannot be read
	}
	defer refs.Close()
	found := false
	refs.ForEach(func(ref *plumbing.Reference) error {
		if n := ref.Name(); n.IsBranch() || n.IsTag() || n.IsRemote() {
			found = true
			return storer.ErrStop
		}
		return nil
	})
	return found
}

// checkRevisionForm refuses the revision forms go-git parses but does not
// apply as git does: it would resolve HEAD@{1} or main@{upstream} to HEAD or
// main, v1^{tree} to the commit, and HEAD^{/text} skipping HEAD itself,
// silently answering another question.
func checkRevisionForm(rev string) error {
	switch {
	case strings.Contains(rev, "@{"):
		return errors.New("reflog, upstream and date forms (@{...}) are not supported; name a branch, tag or commit")
	case strings.Contains(rev, ":"):
		return errors.New("the REV:path and :/text forms are not supported; name a commit, and give the policy path as PATH")
	case strings.Contains(rev, ".."):
		return errors.New("a range names more than one commit; name one branch, tag or commit")
	}
	for rest := rev; ; {
		i := strings.Index(rest, "^{")
		if i < 0 {
			return nil
		}
		rest = rest[i+2:]
		if !strings.HasPrefix(rest, "}") && !strings.HasPrefix(rest, "commit}") {
			return errors.New("of the ^{...} forms only ^{} and ^{commit} are supported; name a branch, tag or commit")
		}
	}
}

// ErrNoCommits reports a repository whose HEAD names no commit yet.
var ErrNoCommits = errors.New("the repository has no commits yet (HEAD is unborn)")

// Head returns the commit HEAD points at, or ErrNoCommits.
func (r *Repo) Head() (*object.Commit, error) {
	ref, err := r.repo.Head()
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return nil, ErrNoCommits
	}
	if err != nil {
		return nil, fmt.Errorf("read HEAD: %w", err)
	}
	return r.repo.CommitObject(ref.Hash())
}

// PathError reports a revision without the policy path.
type PathError struct {
	Rev    string
	Commit plumbing.Hash
	Path   string
	// NotDir is set when the path exists but is not a directory.
	NotDir bool
	// Candidates are directories of that revision that hold .cue files.
	Candidates []string
}

func (e *PathError) Error() string {
	what := "has no directory"
	if e.NotDir {
		what = "has a file, not a directory, at"
	}
	msg := fmt.Sprintf("revision %q (commit %s) %s %q", e.Rev, short(e.Commit), what, e.Path)
	switch {
	case len(e.Candidates) > 0:
		msg += fmt.Sprintf("; directories with .cue files in that revision: %s (was the policy moved? pass its path there as PATH)", strings.Join(e.Candidates, ", "))
	default:
		msg += "; that revision holds no .cue files at all"
	}
	return msg
}

// Tree returns the tree of a policy path ("." for the root) at commit c.
func (r *Repo) Tree(c *object.Commit, rev, policyPath string) (*object.Tree, error) {
	root, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of commit %s: %w", c.Hash, err)
	}
	if policyPath == "." {
		return root, nil
	}
	e, err := root.FindEntry(policyPath)
	if err != nil || e.Mode != filemode.Dir {
		pe := &PathError{Rev: rev, Commit: c.Hash, Path: policyPath, NotDir: err == nil}
		pe.Candidates = cueDirs(root, 5)
		return nil, pe
	}
	return r.repo.TreeObject(e.Hash)
}

// cueDirs lists up to limit directories of t that directly hold .cue
// files, in the order of a tree walk.
func cueDirs(t *object.Tree, limit int) []string {
	var dirs []string
	seen := map[string]bool{}
	w := object.NewTreeWalker(t, true, nil)
	defer w.Close()
	for len(dirs) < limit {
		name, e, err := w.Next()
		if err != nil {
			break
		}
		if !e.Mode.IsFile() || !strings.HasSuffix(name, ".cue") {
			continue
		}
		d := path.Dir(name)
		if !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	sort.Strings(dirs)
	return dirs
}

// IsPolicyFile reports whether a file name directly in the policy path is a
// policy source: a .cue file that is not the lint configuration. It is the
// rule compiler.ReadDir applies to a directory on disk.
func IsPolicyFile(name string) bool {
	return strings.HasSuffix(name, ".cue") && !compiler.IsConfigFile(name)
}

// TreeFiles reads the files directly in t whose names want accepts,
// sorted by name, as compiler.ReadDir reads a directory. A symbolic link or
// submodule so named is refused: its blob is not the file's content.
func (r *Repo) TreeFiles(t *object.Tree, want func(name string) bool) ([]compiler.File, error) {
	var files []compiler.File
	for _, e := range t.Entries {
		if e.Mode == filemode.Dir || !want(e.Name) {
			continue
		}
		if !regular(e.Mode) {
			return nil, fmt.Errorf("%s is a %s in the repository, not a regular file; policyc reads files from the object store and cannot follow it", e.Name, modeName(e.Mode))
		}
		data, err := r.blob(e.Hash)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", e.Name, err)
		}
		files = append(files, compiler.File{Name: e.Name, Data: data})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, nil
}

// regular reports whether a tree or index entry of mode m is a file whose
// blob is its content.
func regular(m filemode.FileMode) bool {
	return m == filemode.Regular || m == filemode.Executable || m == filemode.Deprecated
}

// blob returns the content of the blob h.
func (r *Repo) blob(h plumbing.Hash) ([]byte, error) {
	b, err := r.repo.BlobObject(h)
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", h, err)
	}
	rd, err := b.Reader()
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", h, err)
	}
	defer rd.Close()
	data, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", h, err)
	}
	return data, nil
}

func modeName(m filemode.FileMode) string {
	switch m {
	case filemode.Symlink:
		return "symbolic link"
	case filemode.Submodule:
		return "submodule"
	}
	return "entry of mode " + m.String()
}

// Origin returns the URL of the remote named origin with any credentials
// removed, or "" when there is no such remote. A table records it, and a
// table is published: a token in a clone URL must not end up in it.
func (r *Repo) Origin() (string, error) {
	rem, err := r.repo.Remote("origin")
	if errors.Is(err, git.ErrRemoteNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read remote origin: %w", err)
	}
	urls := rem.Config().URLs
	if len(urls) == 0 {
		return "", nil
	}
	return StripCredentials(urls[0]), nil
}

// StripCredentials removes the user information of a URL with a scheme
// (https://user:token@host/... becomes https://host/...). An scp-like
// address (git@host:path) has no password and is kept as written.
func StripCredentials(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" || u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}

// Snapshot is a policy read from git: its files and what the table records
// about them.
type Snapshot struct {
	Files  []compiler.File
	Source table.Source
	Serial uint64
	// Commit is the commit the files came from (for a dirty work tree, the
	// HEAD it differs from; nil when there is no commit).
	Commit *object.Commit
	// Changed says how a dirty work tree differs from HEAD, one entry per
	// file ("p.cue (modified)").
	Changed []string
}

// Read reads the policy at policyPath (repository-relative, see CleanPath)
// in revision rev from the object store, with its provenance and serial.
func (r *Repo) Read(rev, policyPath string) (*Snapshot, error) {
	c, err := r.Resolve(rev)
	if err != nil {
		return nil, err
	}
	return r.ReadCommit(c, rev, policyPath)
}

// ReadCommit is Read for a resolved commit; rev is only used in messages.
func (r *Repo) ReadCommit(c *object.Commit, rev, policyPath string) (*Snapshot, error) {
	t, err := r.Tree(c, rev, policyPath)
	if err != nil {
		return nil, err
	}
	files, err := r.TreeFiles(t, IsPolicyFile)
	if err != nil {
		return nil, fmt.Errorf("revision %q, %s: %w", rev, policyPath, err)
	}
	src, serial, err := r.provenance(c, rev, policyPath)
	if err != nil {
		return nil, err
	}
	src.Tree = t.Hash.String()
	return &Snapshot{Files: files, Source: src, Serial: serial, Commit: c}, nil
}

func (r *Repo) provenance(c *object.Commit, rev, policyPath string) (table.Source, uint64, error) {
	origin, err := r.Origin()
	if err != nil {
		return table.Source{}, 0, err
	}
	serial, err := r.Serial(c, rev)
	if err != nil {
		return table.Source{}, 0, err
	}
	return table.Source{
		Commit:     c.Hash.String(),
		CommitTime: CommitTime(c),
		PolicyPath: policyPath,
		Repository: origin,
	}, serial, nil
}

// CommitTime is the committer time of c in RFC 3339, UTC: the time a table
// records, taken from history rather than the clock, so it is the same on
// every machine.
func CommitTime(c *object.Commit) string {
	return c.Committer.When.UTC().Format(time.RFC3339)
}

// WorkTree reads the policy in the directory dir of the work tree and
// compares it with HEAD. When the files equal HEAD's, the snapshot is the
// one Read(HEAD) gives, so a clean work tree and its commit build identical
// tables. Otherwise Source.Dirty is set, Source names HEAD as the commit
// the work started from (no tree: the content is not HEAD's), and the
// serial is 0: a table of no commit is never newer than one of a commit.
func (r *Repo) WorkTree(dir string) (*Snapshot, error) {
	policyPath, err := r.RelPath(dir)
	if err != nil {
		return nil, err
	}
	files, err := compiler.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{Files: files, Source: table.Source{PolicyPath: policyPath, Dirty: true}}
	head, err := r.Head()
	if errors.Is(err, ErrNoCommits) {
		snap.Changed = []string{"no commit yet"}
		return snap, nil
	}
	if err != nil {
		return nil, err
	}
	snap.Commit = head
	committed, err := r.committedFiles(head, policyPath)
	if err != nil {
		return nil, err
	}
	if snap.Changed = changedFiles(files, committed); len(snap.Changed) > 0 {
		origin, err := r.Origin()
		if err != nil {
			return nil, err
		}
		snap.Source.Commit = head.Hash.String()
		snap.Source.CommitTime = CommitTime(head)
		snap.Source.Repository = origin
		return snap, nil
	}
	clean, err := r.ReadCommit(head, "HEAD", policyPath)
	if err != nil {
		return nil, err
	}
	clean.Files = files
	return clean, nil
}

// committedFiles maps the policy files of policyPath at c to their blob
// hashes; a missing path has none.
func (r *Repo) committedFiles(c *object.Commit, policyPath string) (map[string]plumbing.Hash, error) {
	t, err := r.Tree(c, "HEAD", policyPath)
	var pe *PathError
	if errors.As(err, &pe) {
		return map[string]plumbing.Hash{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]plumbing.Hash{}
	for _, e := range t.Entries {
		if e.Mode != filemode.Dir && IsPolicyFile(e.Name) {
			out[e.Name] = e.Hash
		}
	}
	return out, nil
}

// changedFiles lists how the work tree's policy files differ from the
// committed ones, sorted by name; empty when they are the same.
func changedFiles(files []compiler.File, committed map[string]plumbing.Hash) []string {
	var out []string
	onDisk := map[string]bool{}
	for _, f := range files {
		onDisk[f.Name] = true
		h, ok := committed[f.Name]
		switch {
		case !ok:
			out = append(out, f.Name+" (not in HEAD)")
		case h != plumbing.ComputeHash(plumbing.BlobObject, f.Data):
			out = append(out, f.Name+" (modified)")
		}
	}
	for name := range committed {
		if !onDisk[name] {
			out = append(out, name+" (deleted)")
		}
	}
	sort.Strings(out)
	return out
}

func short(h plumbing.Hash) string { return h.String()[:12] }
