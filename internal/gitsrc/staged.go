package gitsrc

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"

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
	if r.root == "" {
		return nil, nil, fmt.Errorf("repository is bare: it has no index, so there is nothing staged to lint")
	}
	policyPath, err = CleanPath(policyPath)
	if err != nil {
		return nil, nil, err
	}
	idx, err := r.repo.Storer.Index()
	if err != nil {
		return nil, nil, fmt.Errorf("read the git index: %w", err)
	}
	prefix := ""
	if policyPath != "." {
		prefix = policyPath + "/"
	}
	for _, e := range idx.Entries {
		name, ok := strings.CutPrefix(e.Name, prefix)
		if !ok || strings.Contains(name, "/") || !strings.HasSuffix(name, ".cue") {
			continue
		}
		if e.Stage != 0 {
			return nil, nil, fmt.Errorf("%s has unresolved merge conflicts in the index; resolve them and stage the result (git add %s)", e.Name, e.Name)
		}
		if e.IntentToAdd {
			continue // git add -N: recorded, but no content staged yet
		}
		if e.Mode != filemode.Regular && e.Mode != filemode.Executable && e.Mode != filemode.Deprecated {
			return nil, nil, fmt.Errorf("%s is a %s in the index, not a regular file; policyc reads staged policy files from the object store and cannot follow it", e.Name, modeName(e.Mode))
		}
		data, err := r.stagedBlob(e)
		if err != nil {
			return nil, nil, err
		}
		f := compiler.File{Name: name, Data: data}
		if compiler.IsConfigFile(name) {
			config = &f
			continue
		}
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, config, nil
}

func (r *Repo) stagedBlob(e *index.Entry) ([]byte, error) {
	b, err := r.repo.BlobObject(e.Hash)
	if err != nil {
		return nil, fmt.Errorf("read staged %s (blob %s): %w", e.Name, e.Hash, err)
	}
	rd, err := b.Reader()
	if err != nil {
		return nil, fmt.Errorf("read staged %s (blob %s): %w", e.Name, e.Hash, err)
	}
	defer rd.Close()
	data, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("read staged %s (blob %s): %w", e.Name, e.Hash, err)
	}
	return data, nil
}
