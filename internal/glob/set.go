package glob

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// maxDFAStates caps each automaton built by Compile. Globs can make subset
// construction blow up exponentially (e.g. `*a??????????????????` needs 2^19
// states); past the cap a Set falls back to trying its non-literal patterns
// one by one.
const maxDFAStates = 20000

// Set is an immutable matcher compiled from an ordered list of patterns. It is
// safe for concurrent use.
//
// Wildcard-free patterns (literals) are found by a 9-bit signature of a
// name's length and end bytes: a 512-bit set of the literals' signatures
// turns most other names away, and a set bit's rank is the position of the
// literal with that signature, so a lookup is a popcount, one load and one
// comparison, with no hashing of the name. Once built, the matcher holds the
// Set's whole answer for each literal, so a name the policy spells out needs
// no walk. The other patterns form up to three automata (see part) over the
// cells of their rune partitions, walked side by side, so matching costs one
// table step per automaton and rune of the name, independent of the number
// of patterns. Until the matcher is built (see CompileDeferred), and if an
// automaton would exceed maxDFAStates states, the Set calls Pattern.Match on
// each of those patterns in order instead: still exact and allocation-free,
// but linear in their number.
type Set struct {
	// The fields First reads come first: m is held by value, so that a
	// walk finds its rows one load from the Set, and published by ready.
	ready    atomic.Bool
	m        matcher   // valid once ready
	litRanks [8]uint16 // set bits of litSigs in the words before each word
	litSigs  [8]uint64 // the bit of each literal's signature
	// lits holds the literal patterns, each with the lowest index of a
	// pattern with its text: first, in signature order, one per
	// signature, so that a signature's rank among litSigs' bits is the
	// index of its first literal; after them the literals whose signature
	// an earlier one already has, chained from that one by next.
	lits []literal

	n int // number of patterns

	// globs are the patterns the automata are built from, with their
	// indices; the fallback matcher tries them in order.
	globs []*Pattern
	index []int32

	build sync.Once
}

// literal is a wildcard-free pattern of a Set.
type literal struct {
	text  string
	index int32 // the answer for text: in a Set, the literal's own index; in a matcher, the Set's
	next  int32 // the next literal with the same signature, or 0
}

// asciiSlot numbers the ASCII bytes for a matcher's ascii table: those
// that names are mostly made of (_, lowercase letters, digits, - . : /)
// first, the others after them in order, so that a walk reads two or three
// cache lines of the table rather than one for each group of them.
var asciiSlot = func() (slot [utf8.RuneSelf]uint8) {
	first := "_abcdefghijklmnopqrstuvwxyz0123456789-.:/"
	next := uint8(len(first))
	for b := range uint8(utf8.RuneSelf) {
		if i := strings.IndexByte(first, b); i >= 0 {
			slot[b] = uint8(i)
		} else {
			slot[b], next = next, next+1
		}
	}
	return slot
}()

// maxParts is the most automata a Set's globs are split into; see part.
const maxParts = 3

// matcher is the built form of a Set: its literals with their answers and
// up to maxParts automata, one per group of globs (see part), in one table
// and walked side by side. The fields a walk reads come first.
type matcher struct {
	// Each automaton's rows lie in one block of the table, from base, one
	// row of 1<<shift entries per state: the automaton's next state on
	// each cell, and in the last two entries, low first, 1 + the lowest
	// index of a pattern of the automaton accepting in that state (0 for
	// none). States are numbered in each automaton from 0, the start, so
	// entries fit a byte when every automaton has at most 256 states; a
	// row is found with a shift, not a multiply. The non-final states run
	// depth first from the start, so a walk reads nearby rows. Final
	// states, where the answer can no longer change (the dead state, where
	// none of the automaton's patterns can match any extension of what was
	// read, or a glob's trailing star with no earlier glob alive), have one
	// row per answer, looping to itself, numbered from final on, so a walk
	// can tell that every automaton is final by comparing state numbers.
	// Exactly one of rows8 and rows16 is set.
	rows8 []uint8
	base  [maxParts]int32
	final [maxParts]int32
	shift uint8
	// ascii is the cell of each ASCII rune in each automaton, side by
	// side, so that a step of all three reads one place, in the order of
	// asciiSlot, right after the fields above. A cell fits a byte: cells
	// are numbered in the order of the partition's intervals, from rune 0
	// up, and the at most 128 intervals that start below utf8.RuneSelf
	// take at most the numbers 0 to 127.
	ascii    [utf8.RuneSelf][maxParts]uint8
	rows16   []uint16
	lits     []literal // the Set's lits, each with the Set's answer
	alphabet [maxParts]alphabet
}

// part returns the group of a glob. One automaton over all of a Set's globs
// is the product of their trackers: a glob anchored at its start multiplies
// the states of every glob that may match anywhere, and a glob starting with
// a class doubles them again. Split by how a glob starts, the automata are
// several times smaller in all, and a walk steps them side by side: the
// steps of different automata do not wait for one another. The anchored
// group mostly dies within a few runes.
func part(p *Pattern) int {
	switch p.elems[0].kind {
	case kindLit:
		return 0
	case kindStar:
		return 1
	}
	return 2
}

// Compile compiles patterns, in order, into a Set, matcher included. The
// patterns must not be nil.
func Compile(patterns []*Pattern) *Set {
	s := CompileDeferred(patterns)
	s.Build()
	return s
}

// CompileDeferred prepares a Set without building its matcher: it matches
// exactly at once, pattern by pattern, and becomes fast when Build runs.
// A loader uses it to start serving before every automaton is built.
func CompileDeferred(patterns []*Pattern) *Set {
	s := new(Set)
	s.Init(patterns)
	return s
}

// Init is CompileDeferred for a Set the caller holds, such as a field of a
// larger structure: s must be the zero Set.
func (s *Set) Init(patterns []*Pattern) {
	s.n = len(patterns)
	seen := map[string]bool{}
	var lits []literal
	for i, p := range patterns {
		switch lit, ok := p.Literal(); {
		case p.empty:
			// Left out, so that every NFA position can reach acceptance
			// and a DFA state is dead iff it is empty.
		case ok && !strings.ContainsRune(lit, utf8.RuneError):
			// U+FFFD also matches invalid bytes, which a comparison
			// would miss; such literals stay in the automata.
			if !seen[lit] {
				seen[lit] = true
				lits = append(lits, literal{text: lit, index: int32(i)})
			}
		default:
			s.globs = append(s.globs, p)
			s.index = append(s.index, int32(i))
		}
	}
	s.indexLiterals(lits)
}

// indexLiterals lays out lits as the lits field describes.
func (s *Set) indexLiterals(lits []literal) {
	slices.SortStableFunc(lits, func(a, b literal) int { return cmp.Compare(signature(a.text), signature(b.text)) })
	var rest []literal
	last := map[uint32]int{} // the last literal of each signature
	for _, l := range lits {
		sig := signature(l.text)
		if _, ok := last[sig]; ok {
			rest = append(rest, l)
			continue
		}
		last[sig] = len(s.lits)
		s.lits = append(s.lits, l)
		s.litSigs[sig>>6] |= 1 << (sig & 63)
	}
	for w := 1; w < len(s.litRanks); w++ {
		s.litRanks[w] = s.litRanks[w-1] + uint16(bits.OnesCount64(s.litSigs[w-1]))
	}
	for _, l := range rest {
		sig := signature(l.text)
		s.lits[last[sig]].next = int32(len(s.lits))
		last[sig] = len(s.lits)
		s.lits = append(s.lits, l)
	}
}

// Build builds the Set's matcher if it has not been built. It is safe to
// call concurrently with First and with itself.
func (s *Set) Build() {
	s.build.Do(func() {
		if m := buildMatcher(s.globs, s.index, maxDFAStates); m != nil {
			m.lits = slices.Clone(s.lits)
			for k, l := range m.lits {
				g := 0
				if m.rows8 != nil {
					g = walk(m, m.rows8, l.text)
				} else {
					g = walk(m, m.rows16, l.text)
				}
				if g >= 0 && g < int(l.index) {
					m.lits[k].index = int32(g)
				}
			}
			s.m = *m
			s.ready.Store(true)
		}
	})
}

// buildMatcher builds the automata of globs, one per group (see part), or
// returns nil if one of them would have more than limit states.
func buildMatcher(globs []*Pattern, index []int32, limit int) *matcher {
	var groups [maxParts]struct {
		globs []*Pattern
		index []int32
	}
	for i, g := range globs {
		k := part(g)
		groups[k].globs = append(groups[k].globs, g)
		groups[k].index = append(groups[k].index, index[i])
	}
	var parts []*minDFA
	for _, g := range groups {
		if len(g.globs) == 0 {
			continue
		}
		m := buildPart(g.globs, g.index, limit)
		if m == nil {
			return nil
		}
		parts = append(parts, m)
	}
	return layout(parts)
}

// minDFA is the minimized automaton of one group of globs, before layout:
// per state, its successor on each cell, the lowest index of a glob
// accepting in it (or -1), whether it is final (see buildPart) and its
// class of equivalent states.
type minDFA struct {
	alphabet
	cells                   int
	succ, acc, final, class []int32
	start                   int32
}

// buildPart builds the minimized automaton of globs, or returns nil past
// limit states.
func buildPart(globs []*Pattern, index []int32, limit int) *minDFA {
	a := newAutomaton(globs)
	if len(a.adv) > math.MaxUint16 {
		return nil // rows this wide would make any table huge: match pattern by pattern
	}
	m := &minDFA{alphabet: a.alphabet, cells: len(a.adv)}

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
	start := lookup(prune(a.initial()))

	// succ[id*cells+c] is the state reached from id on cell c; acc[id] the
	// lowest index of a glob accepting in id, or -1.
	var succ, acc []int32
	next := make([]uint64, a.words)
	for id := 0; id < len(states); id++ {
		st := states[id]
		for c := range m.cells {
			a.step(next, st, c)
			succ = append(succ, int32(lookup(prune(next))))
		}
		if len(states) > limit {
			return nil
		}
		ac := int32(-1)
		for k, q := range a.accept {
			if hasBit(st, q) {
				ac = index[k] // globs are in order: the first is the lowest
				break
			}
		}
		acc = append(acc, ac)
	}
	// A state is final when its answer can no longer change: it is dead, or
	// a glob's trailing star holds and no earlier glob is still alive.
	// layout gives final states one row per answer, and a walk stops when
	// every automaton is in one.
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
	m.succ, m.acc, m.final, m.start = succ, acc, final, int32(start)
	m.class = minimize(succ, acc, final, m.cells)
	return m
}

// minimize merges equivalent states: states with the same answer now and,
// on every cell, successors in the same class. Final states are
// equivalent when their answers are. It returns the class of each state.
//
// It is Hopcroft's partition refinement, in O(cells·n·log n) for n
// states: Moore's rounds, one per rune of the longest distinction, take
// O(n²) on a long glob.
func minimize(succ, acc, final []int32, cells int) []int32 {
	n := len(acc)
	// The blocks of the partition: elems holds the states block by block,
	// block b at elems[first[b]:end[b]]; pos is each state's place in
	// elems. A state marked while a splitter is applied moves to the front
	// of its block, which marked counts.
	elems := make([]int32, n)
	pos := make([]int32, n)
	block := make([]int32, n)
	var first, end, marked []int32

	// The first partition: by final answer, else by answer now.
	byKey := map[[2]int32]int32{}
	for id := range n {
		k := [2]int32{final[id], -1}
		if final[id] == 0 {
			k[1] = acc[id]
		}
		b, ok := byKey[k]
		if !ok {
			b = int32(len(first))
			byKey[k] = b
			first, end, marked = append(first, 0), append(end, 0), append(marked, 0)
		}
		block[id] = b
		end[b]++
	}
	for b, at := 0, int32(0); b < len(first); b++ {
		first[b], at = at, at+end[b]
		end[b] = first[b]
	}
	for id := range n {
		b := block[id]
		elems[end[b]], pos[id] = int32(id), end[b]
		end[b]++
	}

	// pred lists, per cell and state, the non-final states that step to
	// it on that cell: pred[predAt[c*n+t]:predAt[c*n+t+1]]. Final states
	// have no successors to agree on.
	predAt := make([]int32, cells*n+1)
	for id := range n {
		if final[id] == 0 {
			for c, t := range succ[id*cells : (id+1)*cells] {
				predAt[c*n+int(t)+1]++
			}
		}
	}
	for i := 1; i < len(predAt); i++ {
		predAt[i] += predAt[i-1]
	}
	pred := make([]int32, predAt[len(predAt)-1])
	fill := slices.Clone(predAt[:len(predAt)-1])
	for id := range n {
		if final[id] == 0 {
			for c, t := range succ[id*cells : (id+1)*cells] {
				pred[fill[c*n+int(t)]] = int32(id)
				fill[c*n+int(t)]++
			}
		}
	}

	// The splitters still to apply, (block, cell); pending[b*cells+c]
	// says whether (b, c) is among them.
	type splitter struct{ b, c int32 }
	var work []splitter
	pending := make([]bool, len(first)*cells)
	noneOfBlock := make([]bool, cells)
	push := func(b, c int32) {
		if i := int(b)*cells + int(c); !pending[i] {
			pending[i] = true
			work = append(work, splitter{b, c})
		}
	}
	for b := range first {
		for c := range cells {
			push(int32(b), int32(c))
		}
	}
	var x, touched []int32
	seen := make([]bool, n)
	for len(work) > 0 {
		sp := work[len(work)-1]
		work = work[:len(work)-1]
		pending[int(sp.b)*cells+int(sp.c)] = false
		// x: the states stepping into block sp.b on cell sp.c, collected
		// before any state moves.
		x = x[:0]
		for _, t := range elems[first[sp.b]:end[sp.b]] {
			for _, s := range pred[predAt[int(sp.c)*n+int(t)]:predAt[int(sp.c)*n+int(t)+1]] {
				if !seen[s] {
					seen[s] = true
					x = append(x, s)
				}
			}
		}
		touched = touched[:0]
		for _, s := range x {
			seen[s] = false
			b := block[s]
			if marked[b] == 0 {
				touched = append(touched, b)
			}
			// Swap s with the first unmarked state of its block.
			at := first[b] + marked[b]
			o := elems[at]
			elems[at], elems[pos[s]] = s, o
			pos[o], pos[s] = pos[s], at
			marked[b]++
		}
		for _, b := range touched {
			m := marked[b]
			marked[b] = 0
			if m == end[b]-first[b] {
				continue // all of b steps into the splitter: no split
			}
			// The marked states become a new block.
			nb := int32(len(first))
			first, end, marked = append(first, first[b]), append(end, first[b]+m), append(marked, 0)
			pending = append(pending, noneOfBlock...)
			first[b] += m
			for _, s := range elems[first[nb]:end[nb]] {
				block[s] = nb
			}
			smaller := nb
			if end[b]-first[b] < m {
				smaller = b
			}
			for c := range int32(cells) {
				if pending[int(b)*cells+int(c)] {
					push(nb, c)
				} else {
					push(smaller, c)
				}
			}
		}
	}
	return block
}

// layout lays out the minimized automata in one table, each automaton's
// rows in a block: depth first from the start state those of its non-final
// states the start reaches, then one row per final answer, looping to
// itself on every cell, the start's first. Unused automata get a block of
// one final row that accepts nothing, so a walk steps every automaton on
// every rune, with no branch, and stops when all are final. It returns nil
// if the table would not fit int32 offsets.
func layout(parts []*minDFA) *matcher {
	m := &matcher{}
	unused := &minDFA{alphabet: alphabet{starts: []rune{0}, cellOf: []int32{0}}, cells: 1,
		succ: []int32{0}, acc: []int32{-1}, final: []int32{-1}, class: []int32{0}}
	for len(parts) < maxParts {
		parts = append(parts, unused)
	}
	// rows[k] lists automaton k's rows, a state of each class in row
	// order; num[k] maps its classes to their row numbers.
	var rows [maxParts][]int32
	var num [maxParts]map[int32]int32
	var nonFinal [maxParts]int
	wide := false
	for k, a := range parts {
		num[k] = map[int32]int32{}
		add := func(id int32) {
			if _, ok := num[k][a.class[id]]; !ok {
				num[k][a.class[id]] = int32(len(rows[k]))
				rows[k] = append(rows[k], id)
			}
		}
		// Depth first over the non-final states, lower cells first.
		stack := []int32{a.start}
		for len(stack) > 0 {
			id := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if _, ok := num[k][a.class[id]]; ok || a.final[id] != 0 {
				continue
			}
			add(id)
			for c := a.cells - 1; c >= 0; c-- {
				stack = append(stack, a.succ[int(id)*a.cells+c])
			}
		}
		nonFinal[k] = len(rows[k])
		add(a.start) // if final, it is the first final row
		for id, f := range a.final {
			if f != 0 {
				add(int32(id))
			}
		}
		m.shift = max(m.shift, uint8(bits.Len(uint(a.cells+1))))
		wide = wide || len(rows[k]) > 1<<8
		for _, id := range rows[k] {
			wide = wide || a.answer(id) >= 1<<16
		}
		m.alphabet[k] = a.alphabet
		for b := range rune(utf8.RuneSelf) {
			m.ascii[asciiSlot[b]][k] = uint8(a.cell(b))
		}
	}
	width, size := 1<<m.shift, 0
	for k := range parts {
		if size+len(rows[k])*width > math.MaxInt32 {
			return nil
		}
		m.base[k], m.final[k] = int32(size), int32(nonFinal[k])
		size += len(rows[k]) * width
	}
	// Entries of a byte, or of 16 bits; the acceptance column's two
	// entries hold twice their bits.
	bits := 8
	if wide {
		bits = 16
	}
	table := make([]uint32, size)
	for k, a := range parts {
		for r, id := range rows[k] {
			row := table[int(m.base[k])+r*width:][:width]
			for c, t := range a.succ[int(id)*a.cells : (int(id)+1)*a.cells] {
				if a.final[id] != 0 {
					t = id
				}
				row[c] = uint32(num[k][a.class[t]])
			}
			acc := a.answer(id)
			row[width-2], row[width-1] = acc&(1<<bits-1), acc>>bits
		}
	}
	if wide {
		m.rows16 = make([]uint16, size)
		for i, v := range table {
			m.rows16[i] = uint16(v)
		}
		return m
	}
	m.rows8 = make([]uint8, size)
	for i, v := range table {
		m.rows8[i] = uint8(v)
	}
	return m
}

// answer returns 1 + the lowest index of a glob of a accepting in state id,
// or 0 for none.
func (a *minDFA) answer(id int32) uint32 {
	if f := a.final[id]; f != 0 {
		return uint32(-f - 1) // the dead state's -1 is none
	}
	return uint32(a.acc[id] + 1)
}

// Len returns the number of patterns the Set was compiled from.
func (s *Set) Len() int { return s.n }

// First returns the index of the first pattern (lowest index) that matches
// name, or -1 if none does. It does not allocate.
func (s *Set) First(name string) int {
	m := s.built()
	if sig := signature(name); s.litSigs[sig>>6]&(1<<(sig&63)) != 0 {
		if k := s.literal(name, sig); k >= 0 {
			if m != nil {
				return int(m.lits[k].index)
			}
			return s.firstByPattern(name, k)
		}
	}
	switch {
	case m == nil:
		return s.firstByPattern(name, -1)
	case m.rows8 != nil:
		return walk(m, m.rows8, name)
	}
	return walk(m, m.rows16, name)
}

// built returns the Set's matcher, or nil before Build (or past the cap).
func (s *Set) built() *matcher {
	if s.ready.Load() {
		return &s.m
	}
	return nil
}

// literal returns the position in s.lits of the literal that is name, or
// -1. sig is name's signature, and its bit in litSigs is set.
func (s *Set) literal(name string, sig uint32) int {
	word := s.litSigs[sig>>6]
	i := int(s.litRanks[sig>>6]) + bits.OnesCount64(word&(1<<(sig&63)-1))
	for {
		if s.lits[i].text == name {
			return i
		}
		if i = int(s.lits[i].next); i == 0 {
			return -1
		}
	}
}

// firstByPattern is First before the matcher is built: it tries the globs
// one by one. k is the position in s.lits of the literal that name is, or
// -1.
func (s *Set) firstByPattern(name string, k int) int {
	for i, p := range s.globs {
		if p.Match(name) {
			if k >= 0 && s.lits[k].index < s.index[i] {
				break
			}
			return int(s.index[i])
		}
	}
	if k >= 0 {
		return int(s.lits[k].index)
	}
	return -1
}

// signature is a 9-bit digest of a name's length and its first and last
// bytes: cheaper than hashing the whole name, and for a few dozen literals
// enough to turn most other names away before any comparison.
func signature(name string) uint32 {
	h := uint32(len(name))
	if len(name) > 0 {
		h ^= uint32(name[0])<<8 ^ uint32(name[len(name)-1])<<16
	}
	return (h * 0x9e3779b1) >> 23
}

// walk runs the automata of m, whose table is rows, side by side over name.
// Every automaton steps on every rune, with no branch: final rows loop to
// themselves. Every 16 bytes the walk stops if all automata are final, so
// that a long name costs no more than it must. A step reads the row of a
// state from the automaton's block offset by the rune's cell, so that only
// the shift waits for the previous step's load.
func walk[T uint8 | uint16](m *matcher, rows []T, name string) int {
	h := m.shift & 63
	var s0, s1, s2 int
	for i := 0; i < len(name) && (s0 < int(m.final[0]) || s1 < int(m.final[1]) || s2 < int(m.final[2])); {
		for end := min(i+16, len(name)); i < end; {
			if b := name[i]; b < utf8.RuneSelf {
				c := &m.ascii[asciiSlot[b]]
				s0 = int(rows[s0<<h+(int(m.base[0])+int(c[0]))])
				s1 = int(rows[s1<<h+(int(m.base[1])+int(c[1]))])
				s2 = int(rows[s2<<h+(int(m.base[2])+int(c[2]))])
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(name[i:])
			s0 = int(rows[s0<<h+(int(m.base[0])+m.alphabet[0].cell(r))])
			s1 = int(rows[s1<<h+(int(m.base[1])+m.alphabet[1].cell(r))])
			s2 = int(rows[s2<<h+(int(m.base[2])+m.alphabet[2].cell(r))])
			i += size
		}
	}
	// Acceptance holds 1 + a pattern index, or 0: as a uint, no match is
	// the largest value, and min picks a match if any.
	acc := func(k, s int) uint {
		o := int(m.base[k]) + (s+1)<<h - 2
		return (uint(rows[o]) | uint(rows[o+1])*(uint(^T(0))+1)) - 1
	}
	return int(min(acc(0, s0), acc(1, s1), acc(2, s2)))
}
