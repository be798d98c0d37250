package glob

import (
	"errors"
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{"get_*", "*_issue", "list_?ssues", "[a-c]*_x", `a\*b`, "[]a]", "[!a-]", "[z-a]",
		"get_[", `a\`, "", "é?", "a\xffb", "[!\x00-\U0010FFFF]", "repo://*/x", `[\]-a]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Pattern != s || se.Offset < 0 || se.Offset > len(s) || se.Msg == "" {
				t.Fatalf("Parse(%q): bad error %#v", s, err)
			}
			return
		}
		if p.String() != s {
			t.Fatalf("Parse(%q).String() = %q", s, p.String())
		}
		ex, ok := Example(p)
		if ok == p.Empty() || ok && !p.Match(ex) {
			t.Fatalf("Example(%q) = %q, %v; Empty = %v", s, ex, ok, p.Empty())
		}
		if lit, ok := p.Literal(); ok {
			if !p.Match(lit) {
				t.Fatalf("literal pattern %q does not match its literal %q", s, lit)
			}
			// Compiling a literal costs O(len(s)^2); keep the fuzzer fast.
			if len(s) > 256 {
				return
			}
			if got := Compile([]*Pattern{p}).First(lit); got != 0 {
				t.Fatalf("Set of literal pattern %q: First(%q) = %d", s, lit, got)
			}
		}
	})
}

func FuzzSetFirst(f *testing.F) {
	f.Add("get_*\n*_issue\nlist_?ssues", "get_issue")
	f.Add("[a-c]*_x\n[!a]\n*", "b_x")
	f.Add("a*b*c\n?é\n\\*", "abc")
	f.Add("*\xef\xbf\xbd", "x\xff")
	f.Fuzz(func(t *testing.T, patterns, name string) {
		var pats []*Pattern
		for _, s := range strings.Split(patterns, "\n") {
			// Few short patterns keep Compile, O(states*cells*positions), fast.
			if p, err := Parse(s); err == nil && len(s) <= 64 && len(pats) < 8 {
				pats = append(pats, p)
			}
		}
		s, unbuilt := Compile(pats), CompileDeferred(pats)
		if got, want := s.First(name), firstRef(pats, name); got != want {
			t.Fatalf("patterns %q: First(%q) = %d; want %d", patterns, name, got, want)
		}
		if got, want := unbuilt.First(name), firstRef(pats, name); got != want {
			t.Fatalf("patterns %q: before Build, First(%q) = %d; want %d", patterns, name, got, want)
		}
		for _, p := range pats {
			if ex, ok := Example(p); ok {
				if got, want := s.First(ex), firstRef(pats, ex); got != want {
					t.Fatalf("patterns %q: First(%q) = %d; want %d", patterns, ex, got, want)
				}
			}
		}
	})
}
