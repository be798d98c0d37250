// Package glob implements the glob patterns that policyc access rules use to
// name MCP tools, prompts and resources.
//
// It does three things:
//
//   - Parse turns a glob into a Pattern (with a *SyntaxError on bad input).
//   - Compile turns an ordered list of patterns into a Set, used on the
//     gateway's hot path: a table of the exact names and up to three automata
//     of the globs, walked side by side. Set.First finds the first pattern
//     matching a name with zero allocations.
//   - Witness, Covered and Example answer language questions for the static
//     analyser, e.g. "is every name matched by P also matched by Q1..Qn?".
//
// Matching and analysis are exact: there are no heuristics or sampling. The
// analysis decides questions over a finite partition of the rune space in
// which every pattern treats all runes of one cell alike, so an answer is
// either exact or explicitly reported as incomplete (state budget exceeded).
//
// # Syntax
//
// A pattern is matched against the whole name, case-sensitively. Names are
// opaque strings (get_issue, repo://owner/x, a:b), not paths.
//
//   - `*` matches any sequence of runes, including the empty one and
//     including '/' and ':'.
//   - `?` matches exactly one rune.
//   - `[...]` matches one rune from a class of runes and ranges (a-z). A
//     leading '!' or '^' negates it; ']' first is literal; '-' first or last
//     is literal; '\' escapes inside a class too.
//   - `\x` matches the rune x literally (`\*`, `\[`, `\\`).
//
// Everything else is a literal rune. The empty pattern, invalid UTF-8, an
// unclosed '[', a range whose low end exceeds its high end, a trailing
// lone '\' and more than MaxPatternLen elements are syntax errors.
//
// # Runes
//
// Names are decoded with utf8.DecodeRuneInString: an invalid byte is the rune
// utf8.RuneError (U+FFFD) and consumes one byte, everywhere in this package.
// Surrogate code points (U+D800..U+DFFF) cannot be decoded from any string,
// so they are not part of any name and classes never contain them; a class
// such as [!\x00-\U0010FFFF] (written with the literal runes) is empty and a
// pattern containing it matches nothing (see Pattern.Empty).
package glob

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/policyc/policyc/internal/clip"
)

// Surrogate code points: never produced by decoding, so never in a name.
const (
	surrogateMin = 0xD800
	surrogateMax = 0xDFFF
)

// SyntaxError reports an invalid glob.
type SyntaxError struct {
	Pattern string // the pattern as given
	Offset  int    // byte offset in Pattern where the problem is
	Msg     string // what is wrong
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid glob %s: %s at offset %d", clip.Quote(e.Pattern), e.Msg, e.Offset)
}

// MaxPatternLen is the most elements a pattern may have: runes, wildcards
// and classes, each counting one. The automata and the analysis of a
// pattern grow with its length, and no name a policy needs to match comes
// near it: MCP advises tool names of at most 128 characters.
const MaxPatternLen = 4096

type elemKind uint8

const (
	kindLit   elemKind = iota // one given rune
	kindAny                   // ?
	kindClass                 // [...]
	kindStar                  // *
)

// runeRange is the inclusive range [lo, hi].
type runeRange struct{ lo, hi rune }

// elem is one element of a parsed pattern. Every element but a star consumes
// exactly one rune.
type elem struct {
	kind elemKind
	r    rune // kindLit
	// kindClass: the positive, sorted, disjoint, non-adjacent ranges of the
	// class, surrogates removed. Empty when the class matches no rune.
	ranges []runeRange
}

// matches reports whether a rune-consuming element accepts r.
func (e *elem) matches(r rune) bool {
	switch e.kind {
	case kindLit:
		return r == e.r
	case kindClass:
		return inRanges(e.ranges, r)
	}
	return e.kind == kindAny
}

// inRanges reports whether r lies in one of the sorted disjoint ranges rs.
func inRanges(rs []runeRange, r rune) bool {
	lo, hi := 0, len(rs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch {
		case r < rs[m].lo:
			hi = m
		case r > rs[m].hi:
			lo = m + 1
		default:
			return true
		}
	}
	return false
}

// Pattern is a parsed glob. It is immutable and safe for concurrent use.
type Pattern struct {
	src   string
	elems []elem // consecutive stars are collapsed into one
	lit   string // the unescaped text, when isLit
	isLit bool
	empty bool // some class matches no rune
}

// Parse parses a glob. On failure the error is a *SyntaxError.
func Parse(s string) (*Pattern, error) {
	if s == "" {
		return nil, &SyntaxError{Pattern: s, Msg: "empty pattern"}
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return nil, &SyntaxError{Pattern: s, Offset: i, Msg: "invalid UTF-8"}
			}
		}
	}
	p := &Pattern{src: s, isLit: true}
	for i := 0; i < len(s); {
		var e elem
		start := i
		switch s[i] {
		case '*':
			i++
			if n := len(p.elems); n > 0 && p.elems[n-1].kind == kindStar {
				continue // ** is *; the NFA relies on stars never being adjacent
			}
			e.kind = kindStar
		case '?':
			i++
			e.kind = kindAny
		case '[':
			var err error
			e, i, err = parseClass(s, i)
			if err != nil {
				return nil, err
			}
			p.empty = p.empty || len(e.ranges) == 0
		default:
			var err error
			e.kind = kindLit
			e.r, i, err = parseRune(s, i)
			if err != nil {
				return nil, err
			}
		}
		if len(p.elems) == MaxPatternLen {
			return nil, &SyntaxError{Pattern: s, Offset: start, Msg: fmt.Sprintf("more than %d characters, the most a pattern may have (match a shorter part of the name, ending with *)", MaxPatternLen)}
		}
		p.isLit = p.isLit && e.kind == kindLit
		p.elems = append(p.elems, e)
	}
	if p.isLit {
		var b strings.Builder
		for _, e := range p.elems {
			b.WriteRune(e.r)
		}
		p.lit = b.String()
	}
	return p, nil
}

// MustParse is like Parse but panics on a syntax error.
func MustParse(s string) *Pattern {
	p, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return p
}

// parseRune reads the possibly escaped rune at s[i:] (s is valid UTF-8) and
// returns it with the offset just past it.
func parseRune(s string, i int) (rune, int, error) {
	if s[i] == '\\' {
		if i+1 == len(s) {
			return 0, 0, &SyntaxError{Pattern: s, Offset: i, Msg: "trailing backslash"}
		}
		i++
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	return r, i + size, nil
}

// parseClass parses the class whose '[' is at s[start] and returns it with the
// offset just past its ']'.
func parseClass(s string, start int) (elem, int, error) {
	i := start + 1
	neg := false
	if i < len(s) && (s[i] == '!' || s[i] == '^') {
		neg = true
		i++
	}
	var rs []runeRange
	for first := true; ; first = false {
		if i >= len(s) {
			return elem{}, 0, &SyntaxError{Pattern: s, Offset: start, Msg: "unclosed character class"}
		}
		if s[i] == ']' && !first {
			i++
			break
		}
		loOff := i
		lo, next, err := parseRune(s, i)
		if err != nil {
			return elem{}, 0, err
		}
		i = next
		hi := lo
		// A '-' followed by ']' is a literal last member, not a range.
		if i+1 < len(s) && s[i] == '-' && s[i+1] != ']' {
			if hi, i, err = parseRune(s, i+1); err != nil {
				return elem{}, 0, err
			}
			if lo > hi {
				return elem{}, 0, &SyntaxError{Pattern: s, Offset: loOff,
					Msg: fmt.Sprintf("invalid character class range %q-%q", lo, hi)}
			}
		}
		rs = append(rs, runeRange{lo, hi})
	}
	return elem{kind: kindClass, ranges: normalize(rs, neg)}, i, nil
}

// normalize sorts and merges rs, complements it over [0, MaxRune] when neg,
// and removes the surrogates, which no name contains.
func normalize(rs []runeRange, neg bool) []runeRange {
	slices.SortFunc(rs, func(a, b runeRange) int { return cmp.Compare(a.lo, b.lo) })
	merged := rs[:0]
	for _, r := range rs {
		if n := len(merged); n > 0 && r.lo <= merged[n-1].hi+1 {
			merged[n-1].hi = max(merged[n-1].hi, r.hi)
			continue
		}
		merged = append(merged, r)
	}
	if neg {
		var comp []runeRange
		next := rune(0)
		for _, r := range merged {
			if r.lo > next {
				comp = append(comp, runeRange{next, r.lo - 1})
			}
			next = r.hi + 1
		}
		if next <= utf8.MaxRune {
			comp = append(comp, runeRange{next, utf8.MaxRune})
		}
		merged = comp
	}
	var out []runeRange
	for _, r := range merged {
		if r.hi < surrogateMin || r.lo > surrogateMax {
			out = append(out, r)
			continue
		}
		if r.lo < surrogateMin {
			out = append(out, runeRange{r.lo, surrogateMin - 1})
		}
		if r.hi > surrogateMax {
			out = append(out, runeRange{surrogateMax + 1, r.hi})
		}
	}
	return out
}

// String returns the source text of the pattern.
func (p *Pattern) String() string { return p.src }

// Literal returns the unescaped text of p and true when p has no wildcard and
// no class (so it matches exactly one name), e.g. `a\*b` gives "a*b", true.
func (p *Pattern) Literal() (string, bool) { return p.lit, p.isLit }

// Empty reports whether p matches no name at all, which happens exactly when
// it contains a class that matches no rune.
func (p *Pattern) Empty() bool { return p.empty }

// Match reports whether p matches the whole of name. It is the reference
// matcher: a backtracking matcher that needs only one backtrack point (the
// latest star), since every other element consumes exactly one rune. It does
// not allocate and runs in O(len(p)*len(name)) time.
func (p *Pattern) Match(name string) bool {
	els := p.elems
	i, j := 0, 0          // element index, byte offset in name
	starI, starJ := -1, 0 // latest star and where its match ends
	for {
		if i < len(els) && els[i].kind == kindStar {
			starI, starJ = i, j
			i++
			continue
		}
		if j == len(name) {
			// Letting a star consume more cannot help: nothing is left.
			return i == len(els)
		}
		if i < len(els) {
			r, size := utf8.DecodeRuneInString(name[j:])
			if els[i].matches(r) {
				i++
				j += size
				continue
			}
		}
		if starI < 0 {
			return false
		}
		// Backtrack: the latest star swallows one more rune.
		_, size := utf8.DecodeRuneInString(name[starJ:])
		starJ += size
		i, j = starI+1, starJ
	}
}
