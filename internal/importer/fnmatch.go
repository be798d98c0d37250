package importer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// FromFnmatch translates a pattern of Python's fnmatch (what MCP Hangar
// matches tool, prompt and resource names with) into a policyc glob that
// matches exactly the same names.
//
// fnmatch and policyc globs agree on '*' (any run of characters) and '?'
// (one character) but not on the rest: in fnmatch a backslash is an
// ordinary character, an unclosed '[' is a literal '[', only '!' negates a
// class ('^' is a member), and a class may hold ']' as its first member.
// Every literal character is escaped in the glob, so none of those
// differences survives. Names are matched case-sensitively, as fnmatch does
// on Linux and macOS.
//
// A class with a reversed range ("[z-a]") or a hyphen after a range
// ("[a-c-e]") is refused: fnmatch gives those meanings policyc globs do not
// have a clear counterpart for, and guessing would change a decision.
func FromFnmatch(pat string) (string, error) {
	if pat == "" {
		return "", fmt.Errorf("empty pattern")
	}
	if !utf8.ValidString(pat) {
		return "", fmt.Errorf("pattern %q is not valid UTF-8", pat)
	}
	var b strings.Builder
	rs := []rune(pat)
	n := len(rs)
	for i := 0; i < n; {
		c := rs[i]
		i++
		switch c {
		case '*':
			b.WriteRune('*')
		case '?':
			b.WriteRune('?')
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
				b.WriteString(`\[`) // no closing ']': a literal '['
				continue
			}
			class, err := translateClass(rs[i:j], pat)
			if err != nil {
				return "", err
			}
			b.WriteString(class)
			i = j + 1
		default:
			writeLiteral(&b, c)
		}
	}
	return b.String(), nil
}

// translateClass turns the members of an fnmatch class (between '[' and its
// closing ']') into a policyc class.
func translateClass(members []rune, pat string) (string, error) {
	neg := false
	if len(members) > 0 && members[0] == '!' {
		neg = true
		members = members[1:]
	}
	if len(members) == 0 {
		// "[!]" followed later by "]": fnmatch matches any one character.
		if neg {
			return "?", nil
		}
		return "", fmt.Errorf("pattern %q has an empty character class", pat)
	}
	var b strings.Builder
	b.WriteRune('[')
	if neg {
		b.WriteRune('!')
	}
	for k := 0; k < len(members); {
		lo := members[k]
		k++
		if k+1 < len(members) && members[k] == '-' {
			hi := members[k+1]
			if lo > hi {
				return "", fmt.Errorf("pattern %q has the reversed range %c-%c in a character class", pat, lo, hi)
			}
			k += 2
			if k+1 < len(members) && members[k] == '-' {
				return "", fmt.Errorf("pattern %q has a '-' right after the range %c-%c in a character class; write the '-' first or last", pat, lo, hi)
			}
			writeClassRune(&b, lo)
			b.WriteRune('-')
			writeClassRune(&b, hi)
			continue
		}
		writeClassRune(&b, lo)
	}
	b.WriteRune(']')
	return b.String(), nil
}

// writeLiteral writes c so that the glob matches it literally.
func writeLiteral(b *strings.Builder, c rune) {
	switch c {
	case '*', '?', '[', ']', '\\':
		b.WriteRune('\\')
	}
	b.WriteRune(c)
}

// writeClassRune writes a class member so that it stands for itself.
func writeClassRune(b *strings.Builder, c rune) {
	switch c {
	case ']', '\\', '-', '!', '^', '[':
		b.WriteRune('\\')
	}
	b.WriteRune(c)
}

// escapeGlob turns a literal name into a glob matching exactly it.
func escapeGlob(name string) string {
	var b strings.Builder
	for _, c := range name {
		writeLiteral(&b, c)
	}
	return b.String()
}
