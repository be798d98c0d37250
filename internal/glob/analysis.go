package glob

import (
	"cmp"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxWitnessStates is the number of product states a Witness search may
// visit before giving up and reporting an incomplete search.
const MaxWitnessStates = 200000

// MaxWitnessWords bounds the memory of one Witness search: the words of
// the states it holds (each state is a bitset of one word per 64 pattern
// positions, kept once in the visiting order and once as a key of the
// visited set) and of its automaton's cells. A search over wide patterns
// reaches it before MaxWitnessStates, and gives up, incomplete.
const MaxWitnessWords = 1 << 23

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
// visited MaxWitnessStates states without an answer; then ok is false too and
// the caller must treat the question as undecided.
//
// accept may be called many times, always with the same slice: it must not
// retain or modify m.
func Witness(p *Pattern, others []*Pattern, accept func(m []bool) bool) (name string, ok bool, complete bool) {
	return Search{}.Witness(p, others, accept)
}

// Search holds what bounds and prunes Witness searches beyond the fixed
// cap of MaxWitnessStates states per search. The zero Search is Witness.
type Search struct {
	// Avoid lists indexes of others that accept never wants to match: it
	// returns false whenever m[i] holds for one of them. A state in which
	// such a pattern has reached its trailing star, and so matches every
	// name that goes on from there, is not explored. For a list of
	// *x1*, *x2*, ... this keeps the search to the states where none has
	// matched yet, about as many as the patterns have runes, instead of
	// every combination of those that have.
	Avoid []int
	// Budget, when not nil, bounds the work of every search given it: a
	// search that finds it spent gives up, incomplete.
	Budget *Budget
}

// Budget bounds the total work of the searches that share it, counted in
// units of one step of one state over 64 pattern positions (a search
// over n positions spends about n/64 units for each state it steps on
// each cell of its rune partition, and n/16 for each interval of that
// partition to build its automaton). Its users charge their own work in
// the same units (Spend). It is not safe for concurrent use.
type Budget struct {
	left  int64
	spent bool
	// capped records the per-search limits that stopped a search.
	capped Limit
}

// Limit names a bound that stopped an incomplete search.
type Limit uint8

// Limits; a Budget reports them as a set (Budget.Stopped).
const (
	// StateLimit: a search visited MaxWitnessStates states.
	StateLimit Limit = 1 << iota
	// MemoryLimit: a search's automaton and states would have held more
	// than MaxWitnessWords words.
	MemoryLimit
	// WorkLimit: the searches sharing the Budget spent it.
	WorkLimit
)

// DefaultBudget is the budget of one analysis (lint's of a policy, diff's
// of two tables). A unit is meant to cost about what one step of a state
// over 64 positions does, so that the budget is a few seconds of searching
// on a small CI runner (docs/performance.md has the figures).
const DefaultBudget = 100_000_000

// NewBudget returns a budget of n units.
func NewBudget(n int64) *Budget { return &Budget{left: n} }

// Exhausted reports whether a search has given up for want of budget.
func (b *Budget) Exhausted() bool { return b != nil && b.spent }

// Stopped returns the set of limits that stopped the searches given b.
func (b *Budget) Stopped() Limit {
	if b == nil {
		return 0
	}
	if b.spent {
		return b.capped | WorkLimit
	}
	return b.capped
}

// stop records that a search gave up at limit l.
func (b *Budget) stop(l Limit) {
	if b != nil {
		b.capped |= l
	}
}

// Spend takes n units for work done outside the searches (comparing rules
// name by name, for example), and reports false, marking the budget
// exhausted, when there were not that many left.
func (b *Budget) Spend(n int) bool { return b.spend(n) }

// spend takes n units, and reports false, marking the budget exhausted,
// when there were not that many left.
func (b *Budget) spend(n int) bool {
	if b == nil {
		return true
	}
	if b.left < int64(n) {
		b.left, b.spent = 0, true
		return false
	}
	b.left -= int64(n)
	return true
}

// Witness is the package's Witness, bounded and pruned as s says.
func (s Search) Witness(p *Pattern, others []*Pattern, accept func(m []bool) bool) (name string, ok bool, complete bool) {
	return s.witness(p, others, accept, MaxWitnessStates)
}

func (s Search) witness(p *Pattern, others []*Pattern, accept func(m []bool) bool, limit int) (string, bool, bool) {
	if p.empty {
		return "", false, true
	}
	pats := append([]*Pattern{p}, others...)
	// The automaton's build compares every interval of its rune partition
	// with every position, and holds a bitset of the positions for each
	// cell: pay for both before it.
	a := automatonLayout(pats)
	positions, intervals := a.accept[len(pats)-1]+1, len(a.starts)
	if intervals*a.words > MaxWitnessWords {
		s.Budget.stop(MemoryLimit)
		return "", false, false
	}
	// A unit buys about sixteen of the build's comparisons of an interval
	// with a position.
	if !s.Budget.spend(intervals * (positions/16 + 1)) {
		return "", false, false
	}
	a.group(pats)
	// Each state visited is held twice (slab and seen).
	stateLimit := StateLimit
	if m := (MaxWitnessWords - len(a.adv)*a.words) / (2 * a.words); m < limit {
		limit, stateLimit = m, MemoryLimit
	}

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
	// lead to a name matched by p. Nor can one holding the trailing star
	// of a pattern to avoid.
	pMask := make([]uint64, a.words)
	for q := 0; q <= a.accept[0]; q++ {
		setBit(pMask, q)
	}
	avoidMask := make([]uint64, a.words)
	for _, i := range s.Avoid {
		if n := len(others[i].elems); n > 0 && others[i].elems[n-1].kind == kindStar {
			setBit(avoidMask, a.base[i+1]+n-1)
		}
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
		if !s.Budget.spend(len(order) * (w + 1)) {
			return "", false, false
		}
		cur := slab[i*w : (i+1)*w]
		for _, c := range order {
			a.step(next, cur, c)
			alive := false
			for j, x := range next {
				if x&avoidMask[j] != 0 {
					alive = false
					break
				}
				alive = alive || x&pMask[j] != 0
			}
			if !alive {
				continue
			}
			key = appendKey(key[:0], next)
			if seen[string(key)] {
				continue
			}
			if len(parent) >= limit {
				s.Budget.stop(stateLimit)
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
	return Search{}.Covered(p, by)
}

// Covered is the package's Covered, bounded as s says; every pattern of by
// is avoided (s.Avoid is not used).
func (s Search) Covered(p *Pattern, by []*Pattern) (covered bool, witness string, complete bool) {
	s.Avoid = make([]int, len(by))
	for i := range by {
		s.Avoid[i] = i
	}
	name, ok, complete := s.Witness(p, by, func(m []bool) bool {
		return !slices.Contains(m, true)
	})
	return !ok && complete, name, complete
}

// Example returns a shortest readable name matched by p, or ok=false when p
// is Empty. A shortest name has one rune per non-star element; each is chosen
// as Witness would choose it for p alone.
func Example(p *Pattern) (name string, ok bool) { return spellOne(p, false) }

// Filled returns a name matched by p as a person would write one, or
// ok=false when p is Empty: p's text, with each ? and class as Example
// fills it and each * filled with one letter where Example leaves it empty,
// so that file:///srv/*/.env gives file:///srv/a/.env, not a name with an
// empty path segment. Findings that quote a name try it before the
// shortest one a search finds.
func Filled(p *Pattern) (name string, ok bool) { return spellOne(p, true) }

// spellOne spells one name p matches, a star as one letter when fillStars
// is set and as nothing otherwise.
func spellOne(p *Pattern, fillStars bool) (string, bool) {
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
		case kindStar:
			if fillStars {
				b.WriteRune(bestRune(universe, nil))
			}
		}
	}
	return b.String(), true
}
