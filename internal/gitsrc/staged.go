package gitsrc

import (
	"fmt"
	"sort"
	"strings"

	"github.com/policyc/policyc/compiler"
)

// Staged reads the policy at policyPath (repository-relative, see CleanPath)
// as it is staged in the git index: the content of each file is the blob the
// index records, not the work tree's, so a fix that is not yet staged does
// not count and a file removed from the index is gone even if it is still
// on disk. It returns the policy sources and, when one is staged, the lint
// configuration (compiler.ConfigFileName); both sorted and named relative to
// the policy path, as compiler.ReadDir names them.
//
// A file with unresolved merge conflicts, a symbolic link or a submodule
// where a policy file is expected, and a bare repository (it has no index)
// are errors: none has a staged content policyc could judge.
func (r *Repo) Staged(policyPath string) (files []compiler.File, config *compiler.File, err error) {
	policyPath, err = CleanPath(policyPath)
	if err != nil {
		return nil, nil, err
	}
	all, err := r.StagedFiles(policyPath, func(name string) bool { return strings.HasSuffix(name, ".cue") })
	if err != nil {
		return nil, nil, err
	}
	for _, f := range all {
		if compiler.IsConfigFile(f.Name) {
			config = &f
			continue
		}
		files = append(files, f)
	}
	return files, config, nil
}

// StagedFiles reads the files staged directly in dir (repository-relative
// and clean, "." for the root) whose names want accepts, sorted and named
// relative to dir. A file added with git add -N has no staged content and
// is left out; a file with unresolved merge conflicts, a symbolic link or
// a submodule so named, and a bare repository are errors.
func (r *Repo) StagedFiles(dir string, want func(name string) bool) ([]compiler.File, error) {
	if r.root == "" {
		return nil, fmt.Errorf("repository is bare: it has no index, so there is nothing staged to read")
	}
	idx, err := r.repo.Storer.Index()
	if err != nil {
		return nil, fmt.Errorf("read the git index: %w", err)
	}
	prefix := ""
	if dir != "." {
		prefix = dir + "/"
	}
	var files []compiler.File
	for _, e := range idx.Entries {
		name, ok := strings.CutPrefix(e.Name, prefix)
		if !ok || strings.Contains(name, "/") || !want(name) {
			continue
		}
		if e.Stage != 0 {
			return nil, fmt.Errorf("%s has unresolved merge conflicts in the index; resolve them and stage the result (git add %s)", e.Name, e.Name)
		}
		if e.IntentToAdd {
			continue // git add -N: recorded, but no content staged yet
		}
		if !regular(e.Mode) {
			return nil, fmt.Errorf("%s is a %s in the index, not a regular file; policyc reads staged files from the object store and cannot follow it", e.Name, modeName(e.Mode))
		}
		data, err := r.blob(e.Hash)
		if err != nil {
			return nil, fmt.Errorf("read staged %s: %w", e.Name, err)
		}
		files = append(files, compiler.File{Name: name, Data: data})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, nil
}
