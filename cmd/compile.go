package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/spf13/cobra"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/fileio"
	"github.com/policyc/policyc/internal/gitsrc"
	"github.com/policyc/policyc/runtime/table"
)

func init() { register(newCompileCmd) }

func newCompileCmd() *cobra.Command {
	var out, rev, repoDir string
	var requireClean bool
	var sign *signOptions
	c := &cobra.Command{
		Use:   "compile [PATH]",
		Short: "Check a policy and freeze it into a decision table",
		Long: `Compile the CUE policy in PATH (default: the current directory) into a frozen
decision table: canonical JSON, byte-identical for the same sources and
compiler version.

Every error is reported, each with file:line:col and a code
(docs/rules/<code>.md); on any error nothing is written and the exit code is 1.
Warnings and infos (rules that can never take effect, holds longer than hosts
wait, ...) are policyc lint's to report, with the repository's policyc.cue.
Output files are written atomically: a reader never sees a partial table.

With --rev REV the policy is read from the git object store at REV (a branch,
a tag, a commit hash, HEAD, HEAD~2, ...), never from the work tree, so an
uncommitted edit cannot leak into a build. The table records where it came
from: the origin URL (without credentials), the commit, the tree hash of the
policy path, the policy path inside the repository and the commit time; its
serial is the commit's depth on the first-parent line (docs/git.md). The same
commit gives the same bytes in every clone.

Without --rev the work tree is compiled. Inside a repository the table is
compared with HEAD: when the policy files equal HEAD's it is exactly the table
--rev HEAD gives; otherwise it is marked "dirty", names HEAD as the commit it
started from and has serial 0. --require-clean refuses a dirty work tree (with
--rev it has nothing to check: a revision build never reads the work tree).

The repository is found by searching upward from PATH. With --repo DIR it is
the repository at DIR, and PATH is relative to the repository root.

Exit codes: 0 written; 1 the policy has problems; 2 not a repository, unknown
revision, no such policy path at the revision, or a dirty tree with
--require-clean; 3 the tool failed (including history missing from a shallow
clone, which the serial needs).

When the policy has a catalog/ directory (snapshots written by policyc
catalog pull; from the revision with --rev), the table also records the
decision for every catalogued tool, prompt and resource, with the rule or
default that decides it and each tool's input-schema digest; policyc diff
then compares every catalogued item. A work-tree catalogue that differs from
HEAD's makes the table dirty, as a changed policy file does.

With --sign KEY (or --sign-env VAR naming an environment variable that holds
the private key) the table is signed in the same step and written as a DSSE
envelope, as policyc sign would (docs/signing.md); --expires sets its expiry.

Examples:
  policyc compile examples/team -o table.json
  policyc compile -o - | jq .digest
  policyc compile --rev HEAD policy --sign-env POLICYC_SIGNING_KEY --expires 720h -o table.signed.json
  policyc compile --rev HEAD policy -o table.json
  policyc compile --rev v1.4.0 --repo ../policies team -o table.json
  policyc compile --require-clean policy -o table.json`,
		Args: argsRange(0, 1),
		RunE: func(c *cobra.Command, args []string) error {
			arg := "."
			if len(args) == 1 {
				arg = args[0]
			}
			var src *policySource
			var err error
			if rev != "" {
				src, err = revisionSource(repoDir, arg, rev)
			} else {
				src, err = workTreeSource(repoDir, arg, requireClean)
			}
			if err != nil {
				return err
			}
			res, err := src.compile(c.ErrOrStderr())
			if err != nil {
				return err
			}
			if src.Source.Dirty {
				fmt.Fprintf(c.ErrOrStderr(), "policyc: note: the policy differs from HEAD (%s); the table is marked dirty and has serial 0\n", strings.Join(src.changed, ", "))
			}
			b, err := table.Encode(res.Table)
			if err != nil {
				return failuref("encode table: %v", err)
			}
			env, signed, done, err := sign.seal(b, c.ErrOrStderr())
			if err != nil {
				return err
			}
			if signed {
				b = env
			}
			if err := writeOutput(c.OutOrStdout(), out, b, 0o644); err != nil {
				return err
			}
			if signed {
				fmt.Fprintln(c.ErrOrStderr(), done)
			}
			return nil
		},
	}
	sign = addSignFlags(c.Flags())
	f := c.Flags()
	f.StringVarP(&out, "output", "o", "-", "write the table to `FILE` (- for standard output)")
	f.StringVar(&rev, "rev", "", "compile the policy as committed at `REV`, read from the git object store")
	f.StringVar(&repoDir, "repo", "", "the git repository (`DIR`); PATH is then relative to its root")
	f.BoolVar(&requireClean, "require-clean", false, "refuse to compile a work tree whose policy differs from HEAD")
	return c
}

// policySource is a policy to compile and what its table records.
type policySource struct {
	Files  []compiler.File
	Source table.Source
	Serial uint64
	// root is what diagnostic positions are joined to: the directory as
	// the user named it, or REV:path for a revision.
	root string
	// revision is set when the files came from the object store.
	revision bool
	// changed lists the files that make a work tree dirty.
	changed []string
	// Catalog is the policy's catalogue snapshot (catalog/), nil when it
	// has none: the table then records every catalogued item's decision.
	Catalog *catalog.Catalog
}

// compile compiles the source and prints its diagnostics.
func (s *policySource) compile(stderr io.Writer) (*compiler.Result, error) {
	res := compiler.Compile(compiler.Input{Files: s.Files, Source: s.Source, Serial: s.Serial, Catalog: s.Catalog})
	ds := res.Diagnostics
	root := s.root
	if s.revision {
		// REV:path/file.cue:3:5, the way git names a file of a revision:
		// the positions are in the commit, not in the work tree.
		ds = make([]compiler.Diagnostic, len(res.Diagnostics))
		for i, d := range res.Diagnostics {
			ds[i] = d.Rooted(func(file string) string { return s.root + path.Join(s.Source.PolicyPath, file) })
		}
		root = ""
	}
	if err := printDiagnostics(stderr, root, ds); err != nil {
		return nil, err
	}
	return res, nil
}

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
			files, err := compiler.ReadDir(arg)
			if err != nil {
				return nil, failuref("read policy directory: %v", err)
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
		return nil, failuref("read policy directory: %v", err)
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

// compileDir compiles the policy in dir, prints its diagnostics to stderr
// and returns errSilent with ExitProblems when there is an error. It reads
// the work tree only and records no provenance: explain and lint use it.
func compileDir(dir string, stderr io.Writer) (*compiler.Result, error) {
	files, err := compiler.ReadDir(dir)
	if err != nil {
		return nil, failuref("read policy directory: %v", err)
	}
	res := compiler.Compile(compiler.Input{
		Files:  files,
		Source: table.Source{PolicyPath: filepath.ToSlash(filepath.Clean(dir))},
	})
	if err := printDiagnostics(stderr, dir, res.Diagnostics); err != nil {
		return nil, err
	}
	return res, nil
}

// printDiagnostics prints the errors among diagnostics and a summary; it
// returns errSilent with ExitProblems when there is any.
//
// Warnings and infos are policyc lint's to report: lint applies the
// repository's policyc.cue (levels, ignored files, inline ignores), which a
// compile does not read, so printing them here would contradict it.
func printDiagnostics(w io.Writer, root string, ds []compiler.Diagnostic) error {
	errs := 0
	for _, d := range ds {
		if d.Severity == compiler.Error {
			errs++
			fmt.Fprintln(w, d.Format(root))
		}
	}
	if errs > 0 {
		fmt.Fprintf(w, "%s: nothing written\n", count(errs, "error"))
		return withCode(ExitProblems, errSilent)
	}
	return nil
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// writeOutput writes b to stdout for "-", else atomically to the file.
func writeOutput(stdout io.Writer, path string, b []byte, perm fs.FileMode) error {
	if path == "-" || path == "" {
		_, err := stdout.Write(b)
		return err
	}
	if err := fileio.WriteAtomic(path, b, perm); err != nil {
		return withCode(ExitFailure, err)
	}
	return nil
}
