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
	"regexp"
	"sort"
	"strings"
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

// Surfaces are the names Text takes, each the file of one input policyc
// reads: the policy, the gateway configuration, the lint configuration,
// the policy's test cases.
var Surfaces = []string{"policy", "gateway", "lint", "test"}

// Text returns the schema of one surface (see Surfaces) as CUE that stands
// alone: its file, followed by the definitions of the policy schema it
// refers to, each with its comment. ok is false for an unknown surface.
func Text(surface string) (text []byte, ok bool) {
	if surface == "policy" {
		return Source, true
	}
	data, err := files.ReadFile(surface + ".cue")
	if err != nil {
		return nil, false
	}
	defined := map[string]bool{}
	for _, m := range defRE.FindAllSubmatch(data, -1) {
		defined[string(m[1])] = true
	}
	var extra [][]byte
	for _, m := range refRE.FindAllSubmatch(data, -1) {
		name := string(m[1])
		if defined[name] {
			continue
		}
		defined[name] = true
		if block := definitionBlock(Source, name); block != nil {
			extra = append(extra, block)
		}
	}
	if len(extra) == 0 {
		return data, true
	}
	out := append([]byte(nil), data...)
	out = append(out, "\n// Definitions of the policy schema (policyc schema policy) used above.\n"...)
	for _, b := range extra {
		out = append(append(out, '\n'), b...)
	}
	return out, true
}

var (
	defRE = regexp.MustCompile(`(?m)^(#[A-Za-z][A-Za-z0-9]*):`)
	refRE = regexp.MustCompile(`(#[A-Za-z][A-Za-z0-9]*)\b`)
)

// definitionBlock returns the top-level definition of name in src with the
// comment lines right above it, when it is written on one line; else nil.
func definitionBlock(src []byte, name string) []byte {
	lines := strings.Split(string(src), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, name+":") {
			continue
		}
		if strings.Count(l, "{") != strings.Count(l, "}") {
			return nil
		}
		start := i
		for start > 0 && strings.HasPrefix(lines[start-1], "//") {
			start--
		}
		return []byte(strings.Join(lines[start:i+1], "\n") + "\n")
	}
	return nil
}
