package glob

import (
	"encoding/binary"
	"slices"
	"unicode/utf8"
)

// alphabet partitions the rune space into cells such that every pattern it
// was built for treats all runes of one cell alike.
type alphabet struct {
	// starts are the sorted first runes of the partition's intervals;
	// starts[0] == 0. The surrogates are never a start: they belong to the
	// interval before U+E000, and no lookup ever asks for them.
	starts []rune
	cellOf []int32 // interval index -> cell; intervals that behave alike share a cell
}

// cell returns the cell of r.
func (a *alphabet) cell(r rune) int {
	// Find the last interval starting at or before r; starts[0] == 0 <= r.
	lo, hi := 0, len(a.starts)
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		if a.starts[m] <= r {
			lo = m
		} else {
			hi = m
		}
	}
	return int(a.cellOf[lo])
}

// automaton is the Thompson NFA of an ordered list of patterns, laid side by
// side over one bitset: pattern k owns positions base[k]..accept[k], where
// position base[k]+i means "elements 0..i-1 of pattern k have been matched"
// and accept[k] means "all of them". A set of positions is thus at once a
// subset state of every pattern, i.e. a product state.
type automaton struct {
	alphabet
	words  int        // length of a state bitset in uint64 words
	base   []int      // first position of each pattern
	accept []int      // accepting position of each pattern
	stars  []uint64   // positions holding a star
	adv    [][]uint64 // adv[c]: positions whose element consumes the runes of cell c
	reps   []rune     // representative rune of each cell, see bestRune
	lits   []rune     // literal runes of the patterns, in order of preference
}

// newAutomaton builds the automaton of pats.
func newAutomaton(pats []*Pattern) *automaton {
	a := automatonLayout(pats)
	a.group(pats)
	return a
}

// automatonLayout lays out the positions of pats and the intervals of
// their rune partition: the cheap part of newAutomaton, which tells how
// large the rest will be (a.words, len(a.starts)) before it is built.
func automatonLayout(pats []*Pattern) *automaton {
	a := &automaton{base: make([]int, len(pats)), accept: make([]int, len(pats))}
	n := 0
	for k, p := range pats {
		a.base[k] = n
		n += len(p.elems)
		a.accept[k] = n
		n++
	}
	a.words = (n + 63) / 64
	a.stars = make([]uint64, a.words)

	// Every literal rune and class bound starts a new interval; U+E000
	// always does so that no interval starts among the surrogates.
	bounds := []rune{0, surrogateMax + 1}
	for k, p := range pats {
		for i, e := range p.elems {
			switch e.kind {
			case kindStar:
				setBit(a.stars, a.base[k]+i)
			case kindLit:
				bounds = append(bounds, e.r, e.r+1)
				a.lits = append(a.lits, e.r)
			case kindClass:
				for _, r := range e.ranges {
					bounds = append(bounds, r.lo, r.hi+1)
				}
			}
		}
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)
	a.starts = slices.DeleteFunc(bounds, func(r rune) bool {
		// A class ending at U+D7FF yields the bound U+D800.
		return r > utf8.MaxRune || r == surrogateMin
	})
	slices.SortFunc(a.lits, compareRunes)
	a.lits = slices.Compact(a.lits)
	return a
}

// group groups the intervals of a layout of pats by the set of elements
// that accept them: each group is a cell. This keeps the DFA narrow and
// the search's branching low (e.g. all runes no pattern mentions form one
// cell).
func (a *automaton) group(pats []*Pattern) {
	a.cellOf = make([]int32, len(a.starts))
	cells := map[string]int32{}
	var members [][]runeRange // intervals of each cell
	var key []byte
	for iv, lo := range a.starts {
		sig := make([]uint64, a.words)
		for k, p := range pats {
			for i := range p.elems {
				if e := &p.elems[i]; e.kind != kindStar && e.matches(lo) {
					setBit(sig, a.base[k]+i)
				}
			}
		}
		key = appendKey(key[:0], sig)
		c, ok := cells[string(key)]
		if !ok {
			c = int32(len(a.adv))
			cells[string(key)] = c
			a.adv = append(a.adv, sig)
			members = append(members, nil)
		}
		a.cellOf[iv] = c
		hi := rune(utf8.MaxRune)
		if iv+1 < len(a.starts) {
			hi = a.starts[iv+1] - 1
		}
		if lo < surrogateMin && hi >= surrogateMin {
			hi = surrogateMin - 1
		}
		members[c] = append(members[c], runeRange{lo, hi})
	}
	a.reps = make([]rune, len(members))
	for c, rs := range members { // rs is sorted: intervals were visited in order
		a.reps[c] = bestRune(rs, a.lits)
	}
}

// initial returns the start state: every pattern at its first position.
func (a *automaton) initial() []uint64 {
	s := make([]uint64, a.words)
	for _, q := range a.base {
		setBit(s, q)
	}
	a.close(s)
	return s
}

// step sets dst to the state reached from src on a rune of cell c.
func (a *automaton) step(dst, src []uint64, c int) {
	adv := a.adv[c]
	var carry uint64
	for w, x := range src {
		moved := x & adv[w]
		dst[w] = moved<<1 | carry | x&a.stars[w] // a star also stays put
		carry = moved >> 63
	}
	a.close(dst)
}

// close adds the position after every star in s (a star may match nothing).
// One pass suffices: stars are never adjacent, and an accepting position is
// never a star, so closure neither chains nor leaks into the next pattern.
func (a *automaton) close(s []uint64) {
	var carry uint64
	for w, x := range s {
		st := x & a.stars[w]
		s[w] = x | st<<1 | carry
		carry = st >> 63
	}
}

func setBit(s []uint64, i int) { s[i>>6] |= 1 << (i & 63) }

// isClearBelow reports whether no bit of s below position i is set.
func isClearBelow(s []uint64, i int) bool {
	w := i >> 6
	for _, x := range s[:w] {
		if x != 0 {
			return false
		}
	}
	return s[w]&(1<<(i&63)-1) == 0
}

// hasAnyIn reports whether some bit of s in positions lo..hi is set.
func hasAnyIn(s []uint64, lo, hi int) bool {
	for i := lo; i <= hi; i++ {
		if hasBit(s, i) {
			return true
		}
	}
	return false
}

// clearFrom clears every bit of s from position i on.
func clearFrom(s []uint64, i int) {
	w := i >> 6
	s[w] &= 1<<(i&63) - 1
	clear(s[w+1:])
}

func hasBit(s []uint64, i int) bool { return s[i>>6]&(1<<(i&63)) != 0 }

// appendKey appends the bytes of s to b, for use as a map key.
func appendKey(b []byte, s []uint64) []byte {
	for _, w := range s {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	return b
}

// readable lists rune ranges in decreasing order of readability; runes in
// none of them are the least readable.
var readable = [...]runeRange{{'a', 'z'}, {'0', '9'}, {'A', 'Z'}, {'!', '~'}}

// readability ranks r: lower is more readable.
func readability(r rune) int {
	for i, t := range readable {
		if t.lo <= r && r <= t.hi {
			return i
		}
	}
	return len(readable)
}

// compareRunes orders runes by readability, then by value.
func compareRunes(x, y rune) int {
	if d := readability(x) - readability(y); d != 0 {
		return d
	}
	return int(x - y)
}

// bestRune picks a representative of the non-empty sorted ranges rs: the most
// readable literal rune of the patterns (lits, sorted by compareRunes) in rs if
// any, else a lowercase ASCII letter, a digit, an uppercase letter, other
// printable ASCII, and failing all that the lowest rune of rs.
func bestRune(rs []runeRange, lits []rune) rune {
	for _, r := range lits {
		if inRanges(rs, r) {
			return r
		}
	}
	for _, t := range readable {
		for _, r := range rs {
			if r.hi >= t.lo && r.lo <= t.hi {
				return max(r.lo, t.lo)
			}
		}
	}
	return rs[0].lo
}
