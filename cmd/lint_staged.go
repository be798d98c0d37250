package cmd

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/policyc/policyc/compiler"
)

// noteUnstaged says, in one line on standard error, which policy files of
// dir differ between the work tree and the index, when any do: lint
// --staged judges what is staged, so a fix that is not yet 'git add'ed
// does not count, and whoever reads the findings should know. staged are
// the policy files read from the index, stagedCfg its lint configuration.
// A work tree that cannot be read says nothing: the lint goes on.
func noteUnstaged(w io.Writer, dir string, staged []compiler.File, stagedCfg *compiler.File) {
	disk, err := compiler.ReadDir(dir)
	if err != nil {
		return
	}
	if b, err := os.ReadFile(filepath.Join(dir, compiler.ConfigFileName)); err == nil {
		disk = append(disk, compiler.File{Name: compiler.ConfigFileName, Data: b})
	}
	index := slices.Clone(staged)
	if stagedCfg != nil {
		index = append(index, *stagedCfg)
	}
	content := func(fs []compiler.File) map[string][]byte {
		m := map[string][]byte{}
		for _, f := range fs {
			m[f.Name] = f.Data
		}
		return m
	}
	onDisk, inIndex := content(disk), content(index)
	var differ []string
	for name, b := range onDisk {
		s, ok := inIndex[name]
		switch {
		case !ok:
			differ = append(differ, name+" (not staged)")
		case !bytes.Equal(s, b):
			differ = append(differ, name)
		}
	}
	for name := range inIndex {
		if _, ok := onDisk[name]; !ok {
			differ = append(differ, name+" (deleted, not staged)")
		}
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
	fmt.Fprintf(w, "policyc: note: the work tree differs from the index in %s: --staged lints what is staged; 'git add' a change for it to count\n", list)
}
