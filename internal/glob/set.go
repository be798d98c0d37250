package glob

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// maxDFAStates caps the DFA built by Compile. Globs can make subset
// construction blow up exponentially (e.g. `*a??????????????????` needs 2^19
// states); past the cap a Set falls back to trying its non-literal patterns
// one by one. At the cap the DFA takes about 4*(cells+1)*maxDFAStates bytes.
const maxDFAStates = 20000

// Set is an immutable matcher compiled from an ordered list of patterns. It is
// safe for concurrent use.
//
// Wildcard-free patterns are looked up in a map. The other patterns form a
// DFA over the cells of their rune partition, so matching costs one table
// step per rune of the name, independent of the number of patterns. If that
// DFA would exceed maxDFAStates states, the Set instead calls Pattern.Match
// on each of those patterns in order: still exact and allocation-free, but
// linear in their number.
type Set struct {
	n int // number of patterns

	literals   map[string]int32 // text of each literal pattern -> its lowest index
	minLiteral int              // lowest index in literals, or n

	alphabet
	ascii [utf8.RuneSelf]int32 // cell of each ASCII rune
	// trans is the DFA, one row of width = cells+1 int32 per state. A
	// transition is a row offset (state*width) rather than a state number,
	// which spares First a multiplication per rune; a negative transition
	// is final: the answer is -t-2 whatever follows (-1 for the dead state,
	// where no pattern can match any extension of what was read). Column
	// `cells` of a row holds the lowest index of a pattern accepting in that
	// state, or -1. trans is nil when the DFA cap was hit.
	trans []int32
	cells int
	start int // row offset of the start state, or a final answer as above

	// When the DFA cap was hit: the would-be DFA's patterns and their indices.
	fallback      []*Pattern
	fallbackIndex []int32
}

// Compile compiles patterns, in order, into a Set. The patterns must not be
// nil.
func Compile(patterns []*Pattern) *Set { return compile(patterns, maxDFAStates) }

func compile(patterns []*Pattern, limit int) *Set {
	s := &Set{n: len(patterns), minLiteral: len(patterns)}
	var globs []*Pattern
	var index []int32 // index in patterns of each glob
	for i, p := range patterns {
		switch lit, ok := p.Literal(); {
		case p.empty:
			// Left out, so that every NFA position can reach acceptance
			// and a DFA state is dead iff it is empty.
		case ok && !strings.ContainsRune(lit, utf8.RuneError):
			// U+FFFD also matches invalid bytes, which a map lookup
			// would miss; such literals stay in the DFA.
			if s.literals == nil {
				s.literals = map[string]int32{}
			}
			if _, dup := s.literals[lit]; !dup {
				s.literals[lit] = int32(i)
			}
			s.minLiteral = min(s.minLiteral, i)
		default:
			globs = append(globs, p)
			index = append(index, int32(i))
		}
	}
	a := newAutomaton(globs)
	s.alphabet = a.alphabet
	s.cells = len(a.adv)
	for b := range s.ascii {
		s.ascii[b] = int32(s.cell(rune(b)))
	}
	width := s.cells + 1

	// Subset construction, breadth-first. State 0 is the empty set.
	ids := map[string]int{}
	var states [][]uint64
	var key []byte
	lookup := func(st []uint64) int {
		key = appendKey(key[:0], st)
		if id, ok := ids[string(key)]; ok {
			return id
		}
		id := len(states)
		ids[string(key)] = id
		states = append(states, slices.Clone(st))
		return id
	}
	// Only the first matching glob counts, which keeps the DFA small: once
	// a state holds the trailing star of glob k, glob k matches whatever
	// follows, so no later glob can ever be first and k's other positions
	// add nothing. Such states are cut down to the globs before k plus k's
	// star, which merges the many states that differ only in what they
	// track for globs that can no longer win.
	sticky := make([]int, len(globs))
	for k, p := range globs {
		sticky[k] = -1
		if n := len(p.elems); n > 0 && p.elems[n-1].kind == kindStar {
			sticky[k] = a.base[k] + n - 1
		}
	}
	prune := func(st []uint64) []uint64 {
		for k, q := range sticky {
			if q < 0 || !hasBit(st, q) {
				continue
			}
			clearFrom(st, a.base[k])
			setBit(st, q)
			setBit(st, a.accept[k])
			break
		}
		return st
	}
	lookup(make([]uint64, a.words))
	s.start = lookup(prune(a.initial())) * width

	next := make([]uint64, a.words)
	for id := 0; id < len(states); id++ {
		st := states[id]
		for c := range s.cells {
			a.step(next, st, c)
			s.trans = append(s.trans, int32(lookup(prune(next))*width))
		}
		if len(states) > limit {
			s.alphabet, s.trans = alphabet{}, nil
			s.fallback, s.fallbackIndex = globs, index
			return s
		}
		acc := int32(-1)
		for k, q := range a.accept {
			if hasBit(st, q) {
				acc = index[k] // globs are in order: the first is the lowest
				break
			}
		}
		s.trans = append(s.trans, acc)
	}
	// A state is final when its answer can no longer change: it is dead, or
	// a glob's trailing star holds and no earlier glob is still alive.
	// Transitions into final states carry the answer, so First stops there.
	final := make([]int32, len(states))
	for id, st := range states {
		final[id] = 0
		if id == 0 {
			final[id] = -1
			continue
		}
		for k, q := range sticky {
			if q >= 0 && hasBit(st, q) && isClearBelow(st, a.base[k]) {
				final[id] = -(index[k] + 2)
			}
			if hasAnyIn(st, a.base[k], a.accept[k]) {
				break // glob k is alive: only it could be the final one
			}
		}
	}
	for i, t := range s.trans {
		if i%width != s.cells {
			if f := final[int(t)/width]; f != 0 {
				s.trans[i] = f
			}
		}
	}
	if f := final[s.start/width]; f != 0 {
		s.start = int(f)
	}
	return s
}

// Len returns the number of patterns the Set was compiled from.
func (s *Set) Len() int { return s.n }

// First returns the index of the first pattern (lowest index) that matches
// name, or -1 if none does. It does not allocate.
func (s *Set) First(name string) int {
	g := s.firstGlob(name)
	if g >= 0 && g < s.minLiteral {
		return g // no literal can come first: skip hashing name
	}
	if i, ok := s.literals[name]; ok && (g < 0 || int(i) < g) {
		return int(i)
	}
	return g
}

// firstGlob is First restricted to the patterns that are not in literals.
func (s *Set) firstGlob(name string) int {
	if s.trans == nil {
		for i, p := range s.fallback {
			if p.Match(name) {
				return int(s.fallbackIndex[i])
			}
		}
		return -1
	}
	trans := s.trans
	row := s.start
	for i := 0; i < len(name) && row >= 0; {
		var c int
		if b := name[i]; b < utf8.RuneSelf {
			c = int(s.ascii[b])
			i++
		} else {
			r, size := utf8.DecodeRuneInString(name[i:])
			c = s.cell(r)
			i += size
		}
		row = int(trans[row+c])
	}
	if row < 0 {
		return -row - 2
	}
	return int(trans[row+s.cells])
}
