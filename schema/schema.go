// Package schema embeds the CUE definitions policyc checks its inputs
// against: #Policy (policy.cue), and the definitions of the other CUE files
// policyc reads (the lint configuration, the gateway configuration), each in
// its own file of this package.
//
// It is data only: the compiler unifies inputs with it, `policyc schema`
// prints it. The gateway never evaluates it at run time.
package schema

import (
	"embed"
	"io/fs"
	"sort"
)

// Filename is the name the policy schema is reported under.
const Filename = "schema/policy.cue"

// Source is the CUE text of the policy schema; #Policy is the whole policy.
//
//go:embed policy.cue
var Source []byte

//go:embed *.cue
var files embed.FS

// File is one embedded schema file.
type File struct {
	// Name is the file's path as reported in positions, e.g.
	// "schema/policy.cue".
	Name string
	Data []byte
}

// Files returns every embedded schema file, sorted by name. Together they
// are one CUE package.
func Files() []File {
	names, err := fs.Glob(files, "*.cue")
	if err != nil {
		panic(err)
	}
	sort.Strings(names)
	out := make([]File, 0, len(names))
	for _, n := range names {
		data, err := files.ReadFile(n)
		if err != nil {
			panic(err)
		}
		out = append(out, File{Name: "schema/" + n, Data: data})
	}
	return out
}
