package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/fileio"
	"github.com/policyc/policyc/internal/gitsrc"
	"github.com/policyc/policyc/runtime/table"
)

// openRepo finds the repository and the repository-relative policy path
// for PATH: with --repo, PATH is relative to that repository's root;
// otherwise the repository is found upward from PATH.
//
// A bare repository has no work tree to place PATH in: it is named with
// --repo, and PATH is then relative to its root like any other.
func openRepo(repoDir, arg string) (*gitsrc.Repo, string, error) {
	if repoDir != "" {
		repo, err := gitsrc.Open(repoDir)
		if err != nil {
			return nil, "", gitError(notRepoAdvice(err, repoAdvice(repoDir)))
		}
		rel, err := gitsrc.CleanPath(arg)
		if err != nil {
			repo.Close()
			return nil, "", usageErrorf("%v", err)
		}
		return repo, rel, nil
	}
	repo, err := gitsrc.Open(arg)
	if err != nil {
		return nil, "", gitError(notRepoAdvice(err, repoAdvice(repoDir)))
	}
	rel, err := repo.RelPath(arg)
	var be *gitsrc.BareError
	if errors.As(err, &be) {
		repo.Close()
		return nil, "", usageErrorf("%s is inside the bare repository %s, which has no work tree to place it in; name the repository with --repo %s and give PATH relative to its root", arg, be.Dir, be.Dir)
	}
	if err != nil {
		repo.Close()
		return nil, "", usageErrorf("%v", err)
	}
	return repo, rel, nil
}

// repoAdvice is what to do when no repository was found, for a command
// with --repo: pass it, or, when it was passed, name a repository with it.
func repoAdvice(repoDir string) string {
	if repoDir != "" {
		return "--repo must name a repository: a clone's work tree or a bare repository"
	}
	return "run policyc inside the policy repository or pass --repo DIR"
}

// notRepoAdvice adds to a *gitsrc.NotRepositoryError what to do instead,
// in terms of the command's own flags; other errors are returned as they
// are.
func notRepoAdvice(err error, advice string) error {
	var ne *gitsrc.NotRepositoryError
	if errors.As(err, &ne) {
		return fmt.Errorf("%w; %s", err, advice)
	}
	return err
}

// revisionSource reads the policy at rev from the object store.
func revisionSource(repoDir, arg, rev string) (*policySource, error) {
	repo, rel, err := openRepo(repoDir, arg)
	if err != nil {
		return nil, err
	}
	defer repo.Close()
	snap, err := repo.Read(rev, rel)
	if err != nil {
		return nil, gitError(err)
	}
	cat, err := revisionCatalogue(repo, snap.Commit, rev, rel)
	if err != nil {
		return nil, err
	}
	return &policySource{Files: snap.Files, Source: snap.Source, Serial: snap.Serial, root: rev + ":", revision: true, Catalog: cat}, nil
}

// workTreeSource reads the policy from disk, with provenance when it is in
// a repository.
func workTreeSource(repoDir, arg string, requireClean bool) (*policySource, error) {
	dir := arg
	var repo *gitsrc.Repo
	var err error
	if repoDir != "" {
		var rel string
		if repo, rel, err = openRepo(repoDir, arg); err != nil {
			return nil, err
		}
		if repo.Root() == "" {
			repo.Close()
			return nil, usageErrorf("%s is a bare repository: it has no work tree to compile; compile a revision with --rev REV", repo.Dir())
		}
		dir = filepath.Join(repo.Root(), filepath.FromSlash(rel))
	} else {
		repo, err = gitsrc.Open(arg)
		var ne *gitsrc.NotRepositoryError
		if errors.As(err, &ne) {
			if requireClean {
				return nil, usageErrorf("--require-clean: %s is not in a git repository, so there is no commit to compare it with", arg)
			}
			// Outside git: the policy path as given, no provenance.
			files, err := readPolicyDir(arg)
			if err != nil {
				return nil, err
			}
			cat, _, err := workTreeCatalogue(arg)
			if err != nil {
				return nil, err
			}
			return &policySource{Files: files, Source: table.Source{PolicyPath: filepath.ToSlash(filepath.Clean(arg))}, root: arg, Catalog: cat}, nil
		}
		if err != nil {
			return nil, gitError(err)
		}
		if repo.Root() == "" {
			repo.Close()
			return nil, usageErrorf("%s is inside the bare repository %s: it has no work tree to compile; compile a revision with --rev REV --repo %s, PATH relative to the repository root", arg, repo.Dir(), repo.Dir())
		}
	}
	defer repo.Close()
	snap, err := repo.WorkTree(dir)
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return nil, policyDirError(dir, err)
	}
	if err != nil {
		return nil, gitError(err)
	}
	cat, catFiles, err := workTreeCatalogue(dir)
	if err != nil {
		return nil, err
	}
	if snap.Commit != nil {
		// The table records the catalogue's decisions: a catalogue that
		// differs from HEAD's makes the work tree dirty like a policy file.
		committed, err := treeCatalogueFiles(repo, snap.Commit, "HEAD", snap.Source.PolicyPath)
		if err != nil {
			return nil, err
		}
		if changed := changedCatalogue(catFiles, committed); len(changed) > 0 {
			snap.Changed = append(snap.Changed, changed...)
			if !snap.Source.Dirty {
				snap.Source.Dirty, snap.Source.Tree, snap.Serial = true, "", 0
			}
		}
	}
	if snap.Source.Dirty && requireClean {
		head := "there is no commit yet"
		if snap.Commit != nil {
			head = "HEAD is " + snap.Commit.Hash.String()[:12]
		}
		return nil, usageErrorf("--require-clean: the policy in %s differs from HEAD (%s; %s): commit or stash the changes, or compile a commit with --rev HEAD",
			snap.Source.PolicyPath, strings.Join(snap.Changed, ", "), head)
	}
	return &policySource{Files: snap.Files, Source: snap.Source, Serial: snap.Serial, root: dir, changed: snap.Changed, Catalog: cat}, nil
}

// workTreeCatalogue reads the catalogue snapshot beside a policy on disk
// (DIR/catalog/*.json): nil when there is none. A snapshot that does not
// read is a tool failure naming its file.
func workTreeCatalogue(dir string) (*catalog.Catalog, []catalog.File, error) {
	cdir := filepath.Join(dir, catalog.Dir)
	files, err := readCatalogueDir(cdir)
	if err != nil {
		return nil, nil, err
	}
	cat, err := parseCatalogue(filepath.ToSlash(cdir), files)
	return cat, files, err
}

// readCatalogueDir reads the snapshot files of a catalogue directory; none
// when it does not exist.
func readCatalogueDir(cdir string) ([]catalog.File, error) {
	entries, err := os.ReadDir(cdir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, failuref("read catalogue: %v", err)
	}
	var files []catalog.File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := fileio.ReadRegular(filepath.Join(cdir, e.Name()))
		if errors.Is(err, fileio.ErrDirectory) {
			continue
		}
		if err != nil {
			return nil, failuref("read catalogue: %v; the catalogue directory holds one snapshot file per server: make it a regular file, or remove it", err)
		}
		files = append(files, catalog.File{Name: e.Name(), Data: b})
	}
	return files, nil
}

// parseCatalogue reads snapshot files; nil when there are none.
func parseCatalogue(where string, files []catalog.File) (*catalog.Catalog, error) {
	if len(files) == 0 {
		return nil, nil
	}
	// Each file is named by its whole path (or REV:path), which an editor or
	// a CI annotation can follow to its line.
	named := make([]catalog.File, len(files))
	for i, f := range files {
		named[i] = catalog.File{Name: where + "/" + f.Name, Data: f.Data}
	}
	cat, err := catalog.Parse(named)
	if err != nil {
		return nil, failuref("catalogue %v; pull it again with policyc catalog pull, or fix the file", err)
	}
	return cat, nil
}

// treeCatalogueFiles reads the snapshot files of the policy at policyPath
// in commit c; none when the commit has no catalogue there.
func treeCatalogueFiles(repo *gitsrc.Repo, c *object.Commit, rev, policyPath string) ([]catalog.File, error) {
	t, err := repo.Tree(c, rev, policyPath)
	var pe *gitsrc.PathError
	if errors.As(err, &pe) {
		return nil, nil
	}
	if err != nil {
		return nil, gitError(err)
	}
	ct, err := t.Tree(catalog.Dir)
	if errors.Is(err, object.ErrDirectoryNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, withCode(ExitFailure, fmt.Errorf("revision %q: read %s: %w", rev, path.Join(policyPath, catalog.Dir), err))
	}
	files, err := repo.TreeFiles(ct, isSnapshotFile)
	if err != nil {
		return nil, failuref("revision %q: %s: %v", rev, path.Join(policyPath, catalog.Dir), err)
	}
	return catalogFiles(files), nil
}

// isSnapshotFile reports whether a file in catalog/ is a snapshot.
func isSnapshotFile(name string) bool { return strings.HasSuffix(name, ".json") }

func catalogFiles(files []compiler.File) []catalog.File {
	out := make([]catalog.File, len(files))
	for i, f := range files {
		out[i] = catalog.File{Name: f.Name, Data: f.Data}
	}
	return out
}

// revisionCatalogue reads the catalogue of the policy at policyPath in
// commit c; nil when there is none.
func revisionCatalogue(repo *gitsrc.Repo, c *object.Commit, rev, policyPath string) (*catalog.Catalog, error) {
	files, err := treeCatalogueFiles(repo, c, rev, policyPath)
	if err != nil {
		return nil, err
	}
	return parseCatalogue(rev+":"+path.Join(policyPath, catalog.Dir), files)
}

// stagedCatalogueFiles reads the snapshot files staged in the git index
// under policyPath/catalog/.
func stagedCatalogueFiles(repo *gitsrc.Repo, policyPath string) ([]catalog.File, error) {
	files, err := repo.StagedFiles(path.Join(policyPath, catalog.Dir), isSnapshotFile)
	if err != nil {
		return nil, failuref("%v", err)
	}
	return catalogFiles(files), nil
}

// changedCatalogue lists how the work tree's snapshot files differ from
// the committed ones ("catalog/github.json (modified)"), sorted.
func changedCatalogue(files, committed []catalog.File) []string {
	was := map[string][]byte{}
	for _, f := range committed {
		was[f.Name] = f.Data
	}
	var out []string
	for _, f := range files {
		name := path.Join(catalog.Dir, f.Name)
		old, ok := was[f.Name]
		switch {
		case !ok:
			out = append(out, name+" (not in HEAD)")
		case !bytes.Equal(old, f.Data):
			out = append(out, name+" (modified)")
		}
		delete(was, f.Name)
	}
	for n := range was {
		out = append(out, path.Join(catalog.Dir, n)+" (deleted)")
	}
	sort.Strings(out)
	return out
}

// gitError gives a git error its exit code: what the user named that does
// not exist is a usage error; history the repository lacks, or a broken
// repository, is a tool failure.
func gitError(err error) error {
	var ne *gitsrc.NotRepositoryError
	var re *gitsrc.RevisionError
	var pe *gitsrc.PathError
	if errors.As(err, &ne) || errors.As(err, &re) || errors.As(err, &pe) {
		return withCode(ExitUsage, err)
	}
	return withCode(ExitFailure, err)
}

// readPolicyDir reads the policy files of the work tree directory dir.
func readPolicyDir(dir string) ([]compiler.File, error) {
	files, err := compiler.ReadDir(dir)
	if err != nil {
		return nil, policyDirError(dir, err)
	}
	return files, nil
}

// policyDirError is the refusal of err, met reading the policy directory
// dir: a usage error when dir is a file (see fileNotDir) or is not there.
func policyDirError(dir string, err error) error {
	if err := fileNotDir(dir); err != nil {
		return err
	}
	if errors.Is(err, fs.ErrNotExist) {
		return usageErrorf("no policy directory %s: give the directory that holds the policy's .cue files (policyc init writes them at the top of the repository: '.')", dir)
	}
	return failuref("read policy directory: %v", err)
}

// fileNotDir refuses a policy path that is a file, as a newcomer's
// policy.cue is, since a policy is every .cue file of a directory; it
// returns nil for anything else.
func fileNotDir(dir string) error {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return usageErrorf("%s is a file, not a policy directory: a policy is every .cue file of one directory, compiled together; give the directory, %s", dir, filepath.Dir(dir))
	}
	return nil
}
