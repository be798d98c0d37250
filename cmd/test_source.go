package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/fileio"
	"github.com/policyc/policyc/internal/gitsrc"
	"github.com/policyc/policyc/runtime/table"
	"github.com/policyc/policyc/testcase"
)

// testSource is a policy with its test files (testcase.Dir), read from the
// work tree, the git index or a revision.
type testSource struct {
	*policySource
	// tests are the test files, named relative to the policy root
	// (tests/github.cue).
	tests []compiler.File
	// join prints a file name relative to the policy root as the user
	// reads it: joined to DIR, or REV:path/file for a revision.
	join func(string) string
	// file names it as a workflow annotation's file property: as join
	// does, but a revision's file by its path in the repository, the
	// file GitHub attaches the annotation to.
	file func(string) string
}

// isTestFile reports whether a file of the tests directory is a test file.
func isTestFile(name string) bool { return strings.HasSuffix(name, ".cue") }

// readTestSource reads the policy in dir and its tests: from revision rev
// when it is set, from the git index with staged, else from the work tree.
// The catalogue is read with them (for --snapshot) and left out of the
// compile: the cases decide with the rules, not with frozen items.
func readTestSource(dir, rev string, staged bool, stderr io.Writer) (*testSource, error) {
	switch {
	case rev != "":
		src, err := revisionSource("", dir, rev)
		if err != nil {
			return nil, err
		}
		tests, err := revisionTests(dir, rev, src.Source)
		if err != nil {
			return nil, err
		}
		inRepo := func(f string) string { return path.Join(src.Source.PolicyPath, f) }
		return &testSource{policySource: src, tests: tests,
			join: func(f string) string { return rev + ":" + inRepo(f) }, file: inRepo}, nil
	case staged:
		return stagedTestSource(dir, stderr)
	}
	files, err := readPolicyDir(dir)
	if err != nil {
		return nil, err
	}
	tests, err := workTreeTests(dir)
	if err != nil {
		return nil, err
	}
	cat, _, err := workTreeCatalogue(dir)
	if err != nil {
		return nil, err
	}
	src := &policySource{Files: files, Source: table.Source{PolicyPath: filepath.ToSlash(filepath.Clean(dir))}, root: dir, Catalog: cat}
	join := compiler.JoinRoot(filepath.ToSlash(dir))
	return &testSource{policySource: src, tests: tests, join: join, file: join}, nil
}

// workTreeTests reads the test files of the policy in dir: none when it
// has no tests directory.
func workTreeTests(dir string) ([]compiler.File, error) {
	tdir := filepath.Join(dir, testcase.Dir)
	entries, err := os.ReadDir(tdir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, failuref("read the tests: %v", err)
	}
	var files []compiler.File
	for _, e := range entries {
		if e.IsDir() || !isTestFile(e.Name()) {
			continue
		}
		b, err := fileio.ReadRegular(filepath.Join(tdir, e.Name()))
		if errors.Is(err, fileio.ErrDirectory) {
			continue
		}
		if err != nil {
			return nil, failuref("read the tests: %v; policyc test reads every .cue file in %s: make it a regular file, or remove it or rename it so its name does not end in .cue", err, tdir)
		}
		files = append(files, compiler.File{Name: testcase.Dir + "/" + e.Name(), Data: b})
	}
	return files, nil
}

// revisionTests reads the test files committed in the revision src was
// read from (src.Commit: the same commit, whatever rev names now).
func revisionTests(dir, rev string, src table.Source) ([]compiler.File, error) {
	repo, _, err := openRepo("", dir)
	if err != nil {
		return nil, err
	}
	defer repo.Close()
	c, err := repo.Resolve(src.Commit)
	if err != nil {
		return nil, gitError(err)
	}
	t, err := repo.Tree(c, rev, src.PolicyPath)
	if err != nil {
		return nil, gitError(err)
	}
	tt, err := t.Tree(testcase.Dir)
	if errors.Is(err, object.ErrDirectoryNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, failuref("revision %q: read %s: %v", rev, path.Join(src.PolicyPath, testcase.Dir), err)
	}
	files, err := repo.TreeFiles(tt, isTestFile)
	if err != nil {
		return nil, failuref("revision %q: %s: %v", rev, path.Join(src.PolicyPath, testcase.Dir), err)
	}
	for i := range files {
		files[i].Name = testcase.Dir + "/" + files[i].Name
	}
	return files, nil
}

// stagedTestSource reads the policy in dir, its tests and its catalogue
// as staged in the git index: what the next commit holds.
func stagedTestSource(dir string, stderr io.Writer) (*testSource, error) {
	repo, err := gitsrc.Open(dir)
	if err != nil {
		return nil, withCode(ExitFailure, notRepoAdvice(err, "run policyc test --staged inside the repository, or name a policy directory in its work tree as DIR"))
	}
	defer repo.Close()
	if err := fileNotDir(dir); err != nil {
		return nil, err
	}
	rel, err := repo.RelPath(dir)
	var be *gitsrc.BareError
	if errors.As(err, &be) {
		return nil, withCode(ExitFailure, fmt.Errorf("%w and no index, so nothing is staged in it; run policyc test --staged in a clone with a work tree", err))
	}
	if err != nil {
		return nil, withCode(ExitFailure, err)
	}
	files, _, err := repo.Staged(rel)
	if err != nil {
		return nil, withCode(ExitFailure, err)
	}
	tests, err := repo.StagedFiles(path.Join(rel, testcase.Dir), isTestFile)
	if err != nil {
		return nil, withCode(ExitFailure, err)
	}
	for i := range tests {
		tests[i].Name = testcase.Dir + "/" + tests[i].Name
	}
	cfiles, err := stagedCatalogueFiles(repo, rel)
	if err != nil {
		return nil, err
	}
	cat, err := parseCatalogue(filepath.ToSlash(filepath.Join(dir, catalog.Dir))+" (staged)", cfiles)
	if err != nil {
		return nil, err
	}
	noteUnstagedTests(stderr, dir, files, tests)
	src := &policySource{Files: files, Source: table.Source{PolicyPath: rel}, root: dir, Catalog: cat}
	join := compiler.JoinRoot(filepath.ToSlash(dir))
	return &testSource{policySource: src, tests: tests, join: join, file: join}, nil
}

// noteUnstagedTests says, in one line on standard error, which policy and
// test files differ between the work tree and the index: --staged tests
// what is staged, so a change not yet 'git add'ed does not count. A work
// tree that cannot be read says nothing.
func noteUnstagedTests(w io.Writer, dir string, files, tests []compiler.File) {
	disk, err := compiler.ReadDir(dir)
	if err != nil {
		return
	}
	diskTests, err := workTreeTests(dir)
	if err != nil {
		return
	}
	staged := map[string][]byte{}
	for _, f := range append(slices.Clone(files), tests...) {
		staged[f.Name] = f.Data
	}
	var differ []string
	for _, f := range append(disk, diskTests...) {
		s, ok := staged[f.Name]
		switch {
		case !ok:
			differ = append(differ, f.Name+" (not staged)")
		case !bytes.Equal(s, f.Data):
			differ = append(differ, f.Name)
		}
		delete(staged, f.Name)
	}
	for name := range staged {
		differ = append(differ, name+" (deleted, not staged)")
	}
	if len(differ) == 0 {
		return
	}
	slices.Sort(differ)
	const shown = 3
	list := strings.Join(differ[:min(shown, len(differ))], ", ")
	if len(differ) > shown {
		list += fmt.Sprintf(" and %d more", len(differ)-shown)
	}
	fmt.Fprintf(w, "policyc: note: the work tree differs from the index in %s: --staged tests what is staged; 'git add' a change for it to count\n", list)
}
