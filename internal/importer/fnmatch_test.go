package importer

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/policyc/policyc/internal/glob"
)

// pyTranslate is a port of CPython's fnmatch.translate (3.12) to Go's
// regexp syntax: the reference FromFnmatch is checked against.
func pyTranslate(pat string) string {
	rs := []rune(pat)
	n := len(rs)
	var res []string
	for i := 0; i < n; {
		c := rs[i]
		i++
		switch c {
		case '*':
			if len(res) == 0 || res[len(res)-1] != ".*" {
				res = append(res, ".*")
			}
		case '?':
			res = append(res, ".")
		case '[':
			j := i
			if j < n && rs[j] == '!' {
				j++
			}
			if j < n && rs[j] == ']' {
				j++
			}
			for j < n && rs[j] != ']' {
				j++
			}
			if j >= n {
				res = append(res, `\[`)
				continue
			}
			stuff := string(rs[i:j])
			if !strings.Contains(stuff, "-") {
				stuff = strings.ReplaceAll(stuff, `\`, `\\`)
			} else {
				var chunks []string
				k := i + 1
				if rs[i] == '!' {
					k = i + 2
				}
				for {
					k = indexRune(rs, '-', k, j)
					if k < 0 {
						break
					}
					chunks = append(chunks, string(rs[i:k]))
					i = k + 1
					k = k + 3
				}
				chunk := string(rs[i:j])
				if chunk != "" {
					chunks = append(chunks, chunk)
				} else {
					chunks[len(chunks)-1] += "-"
				}
				for k := len(chunks) - 1; k > 0; k-- {
					prev, cur := []rune(chunks[k-1]), []rune(chunks[k])
					if prev[len(prev)-1] > cur[0] {
						chunks[k-1] = string(prev[:len(prev)-1]) + string(cur[1:])
						chunks = append(chunks[:k], chunks[k+1:]...)
					}
				}
				for k := range chunks {
					chunks[k] = strings.ReplaceAll(strings.ReplaceAll(chunks[k], `\`, `\\`), "-", `\-`)
				}
				stuff = strings.Join(chunks, "-")
			}
			// Go's regexp needs '[' escaped inside a class ("[:" starts a
			// POSIX class there); Python escapes its set operators instead.
			stuff = strings.ReplaceAll(stuff, "[", `\[`)
			i = j + 1
			switch {
			case stuff == "":
				res = append(res, `[^\x00-\x{10FFFF}]`) // never matches
			case stuff == "!":
				res = append(res, ".")
			default:
				if stuff[0] == '!' {
					stuff = "^" + stuff[1:]
				} else if stuff[0] == '^' {
					stuff = `\` + stuff
				}
				res = append(res, "["+stuff+"]")
			}
		default:
			res = append(res, regexp.QuoteMeta(string(c)))
		}
	}
	return `(?s)^(?:` + strings.Join(res, "") + `)$`
}

func indexRune(rs []rune, r rune, from, to int) int {
	for k := from; k < to; k++ {
		if rs[k] == r {
			return k
		}
	}
	return -1
}

func TestFromFnmatchExamples(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"get_*", "get_*"},
		{"file_?", "file_?"},
		{`a\b`, `a\\b`},
		{"[!.]*", "[!.]*"},
		{"[^a]", `[\^a]`},
		{"[]a]", `[\]a]`},
		{"[a-z]x", "[a-z]x"},
		{"lone[", `lone\[`},
		{"x]", `x\]`},
		{"[!]]", `[!\]]`},
		{"[a-]", `[a\-]`},
	} {
		got, err := FromFnmatch(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("FromFnmatch(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "[z-a]", "[a-c-e]"} {
		if g, err := FromFnmatch(bad); err == nil {
			t.Errorf("FromFnmatch(%q) = %q, want an error", bad, g)
		}
	}
}

// Every translated pattern matches exactly the names Python's fnmatch
// matches (on a case-sensitive system), over random patterns and names
// made of the characters the two syntaxes disagree about.
func TestFromFnmatchAgreesWithPython(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	patChars := []rune(`ab-*?[]!^\.`)
	nameChars := []rune(`ab-[]!^\.`)
	gen := func(chars []rune, max int) string {
		n := rng.IntN(max + 1)
		rs := make([]rune, n)
		for i := range rs {
			rs[i] = chars[rng.IntN(len(chars))]
		}
		return string(rs)
	}
	names := []string{""}
	for range 400 {
		names = append(names, gen(nameChars, 5))
	}
	checked := 0
	for range 4000 {
		pat := gen(patChars, 7)
		if pat == "" {
			continue
		}
		g, err := FromFnmatch(pat)
		if err != nil {
			if !strings.Contains(err.Error(), "reversed range") && !strings.Contains(err.Error(), "right after the range") {
				t.Errorf("FromFnmatch(%q): unexpected refusal: %v", pat, err)
			}
			continue
		}
		gp, err := glob.Parse(g)
		if err != nil {
			t.Fatalf("FromFnmatch(%q) = %q, which policyc does not parse: %v", pat, g, err)
		}
		re := regexp.MustCompile(pyTranslate(pat))
		for _, name := range names {
			if want := re.MatchString(name); gp.Match(name) != want {
				t.Fatalf("fnmatch %q (glob %q) on %q: policyc %v, Python %v", pat, g, name, !want, want)
			}
		}
		checked++
	}
	if checked < 2000 {
		t.Errorf("only %d patterns checked", checked)
	}
}
