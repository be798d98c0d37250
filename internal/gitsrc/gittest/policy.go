package gittest

import (
	"fmt"
	"strings"

	"github.com/policyc/policyc/compiler"
)

// Revise returns the files of a generated policy (internal/policygen) as a
// later revision might have them: every 40th server moves its first rule to
// its last list, and a new file adds a global deny of purge_*, which
// touches the decisions of every server. The input is not modified.
func Revise(files []compiler.File) []compiler.File {
	out := make([]compiler.File, 0, len(files)+1)
	n := 0
	for _, f := range files {
		if strings.HasPrefix(f.Name, "srv") {
			if n%40 == 0 {
				f = compiler.File{Name: f.Name, Data: []byte(moveFirstRule(string(f.Data)))}
			}
			n++
		}
		out = append(out, f)
	}
	return append(out, compiler.File{Name: "hardening.cue", Data: []byte(`package policy

// Nothing purges through the gateway.
global: access: tool: deny_list: ["purge_*"]
`)})
}

// moveFirstRule moves the first pattern line of a generated server file to
// the end of its last list.
func moveFirstRule(src string) string {
	lines := strings.Split(src, "\n")
	first, lastClose := -1, -1
	for i, l := range lines {
		if first < 0 && strings.HasPrefix(l, "\t\t\"") {
			first = i
		}
		if l == "\t]" {
			lastClose = i
		}
	}
	if first < 0 || lastClose < 0 {
		panic(fmt.Sprintf("not a generated server file:\n%s", src))
	}
	moved := lines[first]
	rest := append(append([]string{}, lines[:first]...), lines[first+1:]...)
	lastClose--
	rest = append(rest[:lastClose], append([]string{moved}, rest[lastClose:]...)...)
	return strings.Join(rest, "\n")
}

// Write writes files into dir (slash-separated, relative to the work
// tree) and stages them.
func (r *Repo) WriteFiles(dir string, files []compiler.File) {
	r.T.Helper()
	for _, f := range files {
		r.Write(dir+"/"+f.Name, string(f.Data))
	}
}
