package glob

import (
	"cmp"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxWitnessStates is the number of product states Witness may visit before
// giving up and reporting an incomplete search.
const maxWitnessStates = 200000

// universe is every rune a name can contain.
var universe = []runeRange{{0, surrogateMin - 1}, {surrogateMax + 1, utf8.MaxRune}}

// Witness searches for a name matched by p such that accept(m) is true, where
// m[i] reports whether others[i] matches that name.
//
// The search is breadth-first over the product of the patterns' automata, one
// representative rune per cell of their rune partition, so the name found is
// a shortest one. Among names of that length it prefers readable runes: the
// patterns' own literal runes, then lowercase ASCII letters, digits,
// uppercase letters, other printable ASCII, and lastly the lowest rune of a
// cell.
//
// ok is false when no such name exists. complete is false when the search
// visited maxWitnessStates states without an answer; then ok is false too and
// the caller must treat the question as undecided.
//
// accept may be called many times, always with the same slice: it must not
// retain or modify m.
func Witness(p *Pattern, others []*Pattern, accept func(m []bool) bool) (name string, ok bool, complete bool) {
	return witness(p, others, accept, maxWitnessStates)
}

func witness(p *Pattern, others []*Pattern, accept func(m []bool) bool, limit int) (string, bool, bool) {
	if p.empty {
		return "", false, true
	}
	a := newAutomaton(append([]*Pattern{p}, others...))

	// Try cells in order of preference of their representatives; BFS then
	// finds, among the shortest names, the first in this order.
	order := make([]int, len(a.reps))
	for c := range order {
		order[c] = c
	}
	slices.SortFunc(order, func(x, y int) int {
		rx, ry := a.reps[x], a.reps[y]
		if d := cmp.Compare(litRank(a.lits, rx), litRank(a.lits, ry)); d != 0 {
			return d
		}
		return compareRunes(rx, ry)
	})

	// p owns positions 0..accept[0]; a state without any of them cannot
	// lead to a name matched by p.
	pMask := make([]uint64, a.words)
	for q := 0; q <= a.accept[0]; q++ {
		setBit(pMask, q)
	}
	m := make([]bool, len(others))
	found := func(st []uint64) bool {
		if !hasBit(st, a.accept[0]) {
			return false
		}
		for i := range m {
			m[i] = hasBit(st, a.accept[i+1])
		}
		return accept(m)
	}

	// Visited states are stored back to back in slab; state i was reached
	// from parent[i] on a rune of cell via[i]. The BFS queue is the visiting
	// order itself.
	w := a.words
	slab := a.initial()
	parent, via := []int{-1}, []int{-1}
	var key []byte
	seen := map[string]bool{string(appendKey(key, slab)): true}
	if found(slab) {
		return "", true, true
	}
	next := make([]uint64, w)
	for i := 0; i < len(parent); i++ {
		cur := slab[i*w : (i+1)*w]
		for _, c := range order {
			a.step(next, cur, c)
			alive := false
			for j, x := range next {
				alive = alive || x&pMask[j] != 0
			}
			key = appendKey(key[:0], next)
			if !alive || seen[string(key)] {
				continue
			}
			if len(parent) >= limit {
				return "", false, false
			}
			seen[string(key)] = true
			slab = append(slab, next...)
			parent = append(parent, i)
			via = append(via, c)
			if found(next) {
				return a.spell(parent, via, len(parent)-1), true, true
			}
		}
	}
	return "", false, true
}

// litRank is 0 if r is a literal rune of the patterns, else 1.
func litRank(lits []rune, r rune) int {
	if slices.Contains(lits, r) {
		return 0
	}
	return 1
}

// spell returns the name along the BFS path to state i.
func (a *automaton) spell(parent, via []int, i int) string {
	var rs []rune
	for ; parent[i] >= 0; i = parent[i] {
		rs = append(rs, a.reps[via[i]])
	}
	slices.Reverse(rs)
	return string(rs)
}

// Covered reports whether every name matched by p is matched by at least one
// of by. When it is not, witness is a shortest name matched by p and by none
// of them. complete is false when the search gave up (see Witness): then
// covered is false and the answer is unknown.
func Covered(p *Pattern, by []*Pattern) (covered bool, witness string, complete bool) {
	name, ok, complete := Witness(p, by, func(m []bool) bool {
		return !slices.Contains(m, true)
	})
	return !ok && complete, name, complete
}

// Example returns a shortest readable name matched by p, or ok=false when p
// is Empty. A shortest name has one rune per non-star element; each is chosen
// as Witness would choose it for p alone.
func Example(p *Pattern) (name string, ok bool) {
	if p.empty {
		return "", false
	}
	var lits []rune
	for _, e := range p.elems {
		if e.kind == kindLit {
			lits = append(lits, e.r)
		}
	}
	slices.SortFunc(lits, compareRunes)
	var b strings.Builder
	for _, e := range p.elems {
		switch e.kind {
		case kindLit:
			b.WriteRune(e.r)
		case kindAny:
			b.WriteRune(bestRune(universe, lits))
		case kindClass:
			b.WriteRune(bestRune(e.ranges, lits))
		}
	}
	return b.String(), true
}
