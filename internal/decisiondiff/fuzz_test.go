package decisiondiff

import (
	"strings"
	"testing"

	"github.com/policyc/policyc/internal/glob"
)

// FuzzAffixes checks the invariant the search relies on to leave patterns
// out: every name a glob matches starts with its literal prefix and ends
// with its literal suffix. Patterns come from table files, which diff reads
// from anywhere.
func FuzzAffixes(f *testing.F) {
	for _, s := range []string{"get_*", "*_issue", `a\*b?c`, "[]a]*z", `[\]]q*r`, "[!a-]b*c", "é*ü", "ui://apps/*", "**", "?", `x\\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		p, err := glob.Parse(src)
		if err != nil {
			return
		}
		a := affixes(src)
		if lit, ok := p.Literal(); ok && (a.prefix != lit || a.suffix != lit) {
			t.Fatalf("literal %q: affixes %+v", src, a)
		}
		name, ok := glob.Example(p)
		if !ok {
			return
		}
		if !p.Match(name) {
			t.Fatalf("example %q of %q does not match it", name, src)
		}
		if !strings.HasPrefix(name, a.prefix) || !strings.HasSuffix(name, a.suffix) {
			t.Fatalf("%q matches %q, which lacks its affixes %+v", src, name, a)
		}
		// A glob always meets itself.
		if !a.meets(a) {
			t.Fatalf("%q does not meet itself", src)
		}
	})
}
