package glob

import (
	"slices"
	"unicode/utf8"
)

// maxDFAStates caps the DFA built by Compile. Globs can make subset
// construction blow up exponentially (e.g. `*a??????????????????`); past the
// cap a Set falls back to trying its patterns one by one.
const maxDFAStates = 20000

// Set is an immutable matcher compiled from an ordered list of patterns. It is
// safe for concurrent use.
//
// Normally a Set is a DFA over the cells of the patterns' rune partition, so
// First costs one table step per rune of the name, independent of the number
// of patterns. If the DFA would exceed maxDFAStates states, the Set instead
// calls Pattern.Match on each pattern in order: still exact and
// allocation-free, but linear in the number of patterns.
type Set struct {
	n int // number of patterns
	alphabet
	ascii [utf8.RuneSelf]int32 // cell of each ASCII rune

	// trans is the DFA, one row of width = cells+1 int32 per state. Values
	// are row offsets (state*width) rather than state numbers, which spares
	// First a multiplication per rune. Column `cells` of a row holds the
	// lowest index of a pattern accepting in that state, or -1. Row 0 is the
	// dead state: no pattern can match any extension of what was read.
	trans []int32
	cells int
	start int

	fallback []*Pattern // non-nil when the DFA cap was hit
}

// Compile compiles patterns, in order, into a Set. The patterns must not be
// nil.
func Compile(patterns []*Pattern) *Set { return compile(patterns, maxDFAStates) }

func compile(patterns []*Pattern, limit int) *Set {
	s := &Set{n: len(patterns)}
	// Patterns that match nothing are left out, so that every NFA position
	// can reach acceptance and a state is dead iff it is empty.
	var live []*Pattern
	var index []int32 // index in patterns of each live pattern
	for i, p := range patterns {
		if !p.empty {
			live = append(live, p)
			index = append(index, int32(i))
		}
	}
	a := newAutomaton(live)
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
	lookup(make([]uint64, a.words))
	s.start = lookup(a.initial()) * width

	next := make([]uint64, a.words)
	for id := 0; id < len(states); id++ {
		st := states[id]
		for c := range s.cells {
			a.step(next, st, c)
			s.trans = append(s.trans, int32(lookup(next)*width))
		}
		if len(states) > limit {
			return &Set{n: len(patterns), fallback: patterns}
		}
		acc := int32(-1)
		for k, q := range a.accept {
			if hasBit(st, q) {
				acc = index[k] // live patterns are in order: the first is the lowest
				break
			}
		}
		s.trans = append(s.trans, acc)
	}
	return s
}

// Len returns the number of patterns the Set was compiled from.
func (s *Set) Len() int { return s.n }

// First returns the index of the first pattern (lowest index) that matches
// name, or -1 if none does. It does not allocate.
func (s *Set) First(name string) int {
	if s.fallback != nil {
		for i, p := range s.fallback {
			if p.Match(name) {
				return i
			}
		}
		return -1
	}
	trans := s.trans
	row := s.start
	for i := 0; i < len(name); {
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
		if row == 0 {
			return -1
		}
	}
	return int(trans[row+s.cells])
}
