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
// one by one. At the cap an automaton takes about 4*(cells+1)*maxDFAStates
// bytes.
const maxDFAStates = 20000

// Set is an immutable matcher compiled from an ordered list of patterns. It is
// safe for concurrent use.
//
// Wildcard-free patterns (literals) are found by a 9-bit signature of a
// name's length and end bytes: a 512-bit set of the literals' signatures
// turns most other names away, and a set bit's rank is the position of the
// literal with that signature, so a lookup is a popcount, one load and one
// comparison, with no hashing of the name. Once the DFA is built it holds
// the Set's whole answer for each literal, so a name the policy spells out
// needs no walk. In the DFA literals would form a trie: for a 50-server
// policy with 40% exact names that was a third of the automata's size, and
// the automata stay in cache better without it. The other patterns form up
// to three automata (see part) over the cells of their rune partitions,
// walked side by side, so matching costs one table step per automaton and
// rune of the name, independent of the number of patterns. Until the DFA is
// built (see CompileDeferred), and if an automaton would exceed maxDFAStates
// states, the Set calls Pattern.Match on each of those patterns in order
// instead: still exact and allocation-free, but linear in their number.
type Set struct {
	// The fields First reads come first.
	dfa      atomic.Pointer[dfa]
	litSigs  [8]uint64 // the bit of each literal's signature
	litRanks [8]uint16 // set bits of litSigs in the words before each word
	// lits holds the literal patterns: first, in signature order, one per
	// signature, so that a signature's rank among litSigs' bits is the
	// index of its first literal; after them the literals whose signature
	// an earlier one already has, chained from that one by next.
	lits []literal

	n int // number of patterns

	// globs are the patterns the DFA is built from, with their indices; the
	// fallback matcher tries them in order.
	globs []*Pattern
	index []int32

	build sync.Once
}

// literal is a wildcard-free pattern of a Set.
type literal struct {
	text  string
	index int32 // the lowest index of a pattern with this text
	next  int32 // the next literal with the same signature, or 0
}

// maxParts is the most automata a Set's globs are split into; see part.
const maxParts = 3

// dfa is the compiled form of a Set's globs: up to maxParts automata, one
// per group of globs (see part), in one table and walked side by side. A
// walk reads the fields up to ascii, which come first so that they share as
// few cache lines as possible.
type dfa struct {
	// Each automaton has one row of width = cells+1 values per state: a
	// transition per cell, then 1 + the lowest index of a pattern of the
	// automaton accepting in that state (0 for none). A transition is the
	// offset of the next state's row, so a step is one load with no
	// multiply. Final states, where the answer can no longer change (the
	// dead state, where none of the automaton's patterns can match any
	// extension of what was read, or a glob's trailing star with no earlier
	// glob alive), have one row per answer, looping to itself; layout puts
	// them after all the others, so a walk can tell that every automaton
	// is final by comparing offsets with limit. Exactly one of trans16 and
	// trans32 is set: the table is 16-bit when every value fits, which
	// halves it and keeps more of it in cache. trans32 comes last, where a
	// 16-bit walk does not read.
	trans16 []uint16
	limit   int // the offset of the first final row
	// start is the row of each automaton's start state: an unused
	// automaton starts, and stays, in a row of width 2 that accepts
	// nothing.
	start [maxParts]int32
	cells [maxParts]int32
	// ascii is the cell of each ASCII rune in each automaton, side by
	// side, so that a step of all three reads one place. A cell fits a
	// byte: cells are numbered in the order of the partition's intervals,
	// from rune 0 up, and the at most 128 intervals that start below
	// utf8.RuneSelf take at most the numbers 0 to 127.
	ascii [utf8.RuneSelf][maxParts]uint8
	// answers holds the Set's answer for each of its lits: the literal's
	// index or, when a glob before it matches the same name, the glob's. A
	// name that the policy spells out is thus answered with no walk.
	answers  []int32
	alphabet [maxParts]alphabet
	trans32  []uint32
}

// part returns the group of a glob. One automaton over all of a Set's globs
// is the product of their trackers: a glob anchored at its start multiplies
// the states of every glob that may match anywhere, and a glob starting with
// a class doubles them again. Split by how a glob starts, the automata are
// several times smaller in all (docs/performance.md has the figures), and a
// walk steps them side by side: the steps of different automata do not wait
// for one another. The anchored group
// mostly dies within a few runes.
func part(p *Pattern) int {
	switch p.elems[0].kind {
	case kindLit:
		return 0
	case kindStar:
		return 1
	}
	return 2
}

// Compile compiles patterns, in order, into a Set, DFA included. The
// patterns must not be nil.
func Compile(patterns []*Pattern) *Set {
	s := CompileDeferred(patterns)
	s.Build()
	return s
}

// CompileDeferred prepares a Set without building its DFA: it matches
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
			// would miss; such literals stay in the DFA.
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
	if len(lits) == 0 {
		return
	}
	slices.SortStableFunc(lits, func(a, b literal) int { return cmp.Compare(signature(a.text), signature(b.text)) })
	var firsts, rest []literal
	for i, l := range lits {
		if i > 0 && signature(l.text) == signature(lits[i-1].text) {
			rest = append(rest, l)
			continue
		}
		firsts = append(firsts, l)
		sig := signature(l.text)
		s.litSigs[sig>>6] |= 1 << (sig & 63)
	}
	for w := 1; w < len(s.litRanks); w++ {
		s.litRanks[w] = s.litRanks[w-1] + uint16(bits.OnesCount64(s.litSigs[w-1]))
	}
	s.lits = append(firsts, rest...)
	// Chain each signature's further literals behind its first. Both parts
	// are in signature order, so one pass over rest finds every first.
	last := map[uint32]int{}
	for i := range firsts {
		last[signature(s.lits[i].text)] = i
	}
	for i := len(firsts); i < len(s.lits); i++ {
		sig := signature(s.lits[i].text)
		s.lits[last[sig]].next = int32(i)
		last[sig] = i
	}
}

// Build builds the Set's DFA if it has not been built. It is safe to call
// concurrently with First and with itself.
func (s *Set) Build() {
	s.build.Do(func() {
		if d := buildDFA(s.globs, s.index, maxDFAStates); d != nil {
			d.answers = make([]int32, len(s.lits))
			for k, l := range s.lits {
				d.answers[k] = l.index
				if g := d.first(l.text); g >= 0 && g < int(l.index) {
					d.answers[k] = int32(g)
				}
			}
			s.dfa.Store(d)
		}
	})
}

// buildDFA builds the automata of globs, one per group (see part), or
// returns nil if one of them would have more than limit states.
func buildDFA(globs []*Pattern, index []int32, limit int) *dfa {
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

// layout lays out the transition table of the minimized automata: first
// every automaton's rows of non-final states, then every automaton's final
// rows, one per answer, which loop to themselves on every cell, then the
// row that unused automata start and stay in. A walk thus steps every
// automaton on every rune, with no branch, and stops when all are final.
// Rows are 16-bit when every value fits, which halves the table and keeps
// more of it in cache.
func layout(parts []*minDFA) *dfa {
	s := &dfa{}
	// rows[k] maps the classes of automaton k's non-final states to their
	// row offsets, reps[k] lists a state of each, in row order; finals[k]
	// maps its answers to their final rows, answers[k] lists them in order.
	rows := make([]map[int32]int, len(parts))
	reps := make([][]int, len(parts))
	finals := make([]map[int32]int, len(parts))
	answers := make([][]int32, len(parts))
	for k, m := range parts {
		rows[k] = map[int32]int{}
		for id, c := range m.class {
			if m.final[id] != 0 {
				continue
			}
			if _, ok := rows[k][c]; !ok {
				rows[k][c] = s.limit
				s.limit += m.cells + 1
				reps[k] = append(reps[k], id)
			}
		}
	}
	end := s.limit
	for k, m := range parts {
		finals[k] = map[int32]int{}
		for _, f := range m.final {
			if f == 0 {
				continue
			}
			ans := -f - 2 // -1 for the dead state
			if _, ok := finals[k][ans]; !ok {
				finals[k][ans] = end
				end += m.cells + 1
				answers[k] = append(answers[k], ans)
			}
		}
	}
	unused := end // [unused, 0]: loops on cell 0, accepts nothing
	trans := make([]int, 0, end+2)
	for k, m := range parts {
		target := func(t int32) int {
			if f := m.final[t]; f != 0 {
				return finals[k][-f-2]
			}
			return rows[k][m.class[t]]
		}
		for _, id := range reps[k] {
			for _, t := range m.succ[id*m.cells : (id+1)*m.cells] {
				trans = append(trans, target(t))
			}
			trans = append(trans, int(m.acc[id])+1)
		}
		s.start[k] = int32(target(m.start))
		s.cells[k] = int32(m.cells)
		s.alphabet[k] = m.alphabet
	}
	for k, m := range parts {
		for _, ans := range answers[k] {
			row := finals[k][ans]
			for range m.cells {
				trans = append(trans, row)
			}
			trans = append(trans, int(ans)+1)
		}
	}
	trans = append(trans, unused, 0)
	for k := len(parts); k < maxParts; k++ {
		s.start[k] = int32(unused)
		s.cells[k] = 1
		s.alphabet[k] = alphabet{starts: []rune{0}, cellOf: []int32{0}}
	}
	for k := range maxParts {
		for b := range s.ascii {
			s.ascii[b][k] = uint8(s.alphabet[k].cell(rune(b)))
		}
	}
	// Every value must fit, the acceptance columns' pattern indices too:
	// a block may hold more than 65,535 rules.
	top := 0
	for _, v := range trans {
		top = max(top, v)
	}
	if top > math.MaxInt32 {
		return nil
	}
	if top <= math.MaxUint16 {
		s.trans16 = make([]uint16, len(trans))
		for i, v := range trans {
			s.trans16[i] = uint16(v)
		}
		return s
	}
	s.trans32 = make([]uint32, len(trans))
	for i, v := range trans {
		s.trans32[i] = uint32(v)
	}
	return s
}

// Len returns the number of patterns the Set was compiled from.
func (s *Set) Len() int { return s.n }

// First returns the index of the first pattern (lowest index) that matches
// name, or -1 if none does. It does not allocate.
func (s *Set) First(name string) int {
	d := s.dfa.Load()
	if sig := signature(name); s.litSigs[sig>>6]&(1<<(sig&63)) != 0 {
		if k := s.literal(name, sig); k >= 0 {
			if d != nil {
				return int(d.answers[k])
			}
			return s.firstByPattern(name, k)
		}
	}
	// Not a literal: the globs decide.
	switch {
	case d == nil:
		return s.firstByPattern(name, -1)
	case d.trans16 != nil:
		return walk(d, d.trans16, name)
	default:
		return walk(d, d.trans32, name)
	}
}

// FirstPair returns s.First(name) and t.First(name). When both need a walk
// of 16-bit automata, it walks the six side by side, so that the second
// walk does not wait for the first: a principal's narrowing layer is then
// nearly free. It does not allocate.
func FirstPair(s, t *Set, name string) (int, int) {
	ds, dt := s.dfa.Load(), t.dfa.Load()
	if ds == nil || dt == nil || ds.trans16 == nil || dt.trans16 == nil {
		return s.First(name), t.First(name)
	}
	sig := signature(name)
	rs, ws := s.literalAnswer(ds, name, sig)
	rt, wt := t.literalAnswer(dt, name, sig)
	switch {
	case ws && wt:
		return rs, rt
	case ws:
		return rs, walk(dt, dt.trans16, name)
	case wt:
		return walk(ds, ds.trans16, name), rt
	}
	return walkPair(ds, dt, name)
}

// literalAnswer returns the answer d holds for name if name is one of s's
// literals. sig is name's signature.
func (s *Set) literalAnswer(d *dfa, name string, sig uint32) (int, bool) {
	if s.litSigs[sig>>6]&(1<<(sig&63)) != 0 {
		if k := s.literal(name, sig); k >= 0 {
			return int(d.answers[k]), true
		}
	}
	return 0, false
}

// walkPair is walk over the 16-bit automata of s and t at once.
func walkPair(s, t *dfa, name string) (int, int) {
	ts, tt := s.trans16, t.trans16
	a0, a1, a2 := int(s.start[0]), int(s.start[1]), int(s.start[2])
	b0, b1, b2 := int(t.start[0]), int(t.start[1]), int(t.start[2])
	for i := 0; i < len(name) && (min(a0, a1, a2) < s.limit || min(b0, b1, b2) < t.limit); {
		for end := min(i+16, len(name)); i < end; {
			if c := name[i]; c < utf8.RuneSelf {
				x, y := &s.ascii[c], &t.ascii[c]
				a0 = int(ts[a0+int(x[0])])
				a1 = int(ts[a1+int(x[1])])
				a2 = int(ts[a2+int(x[2])])
				b0 = int(tt[b0+int(y[0])])
				b1 = int(tt[b1+int(y[1])])
				b2 = int(tt[b2+int(y[2])])
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(name[i:])
			a0 = int(ts[a0+s.alphabet[0].cell(r)])
			a1 = int(ts[a1+s.alphabet[1].cell(r)])
			a2 = int(ts[a2+s.alphabet[2].cell(r)])
			b0 = int(tt[b0+t.alphabet[0].cell(r)])
			b1 = int(tt[b1+t.alphabet[1].cell(r)])
			b2 = int(tt[b2+t.alphabet[2].cell(r)])
			i += size
		}
	}
	return answer(s, ts, a0, a1, a2), answer(t, tt, b0, b1, b2)
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

// firstByPattern is First before the DFA is built: it tries the globs one
// by one. k is the position in s.lits of the literal that name is, or -1.
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

// first runs the automata over name.
func (s *dfa) first(name string) int {
	if s.trans16 != nil {
		return walk(s, s.trans16, name)
	}
	return walk(s, s.trans32, name)
}

// walk runs the automata of s, whose table is trans, side by side over
// name, and returns the lowest of their answers. Every automaton steps on
// every rune, with no branch: final rows loop to themselves. Every 16 bytes
// the walk stops if all automata are final, so that a long name costs no
// more than it must.
func walk[T uint16 | uint32](s *dfa, trans []T, name string) int {
	a0, a1, a2 := int(s.start[0]), int(s.start[1]), int(s.start[2])
	for i := 0; i < len(name) && min(a0, a1, a2) < s.limit; {
		for end := min(i+16, len(name)); i < end; {
			if b := name[i]; b < utf8.RuneSelf {
				c := &s.ascii[b]
				a0 = int(trans[a0+int(c[0])])
				a1 = int(trans[a1+int(c[1])])
				a2 = int(trans[a2+int(c[2])])
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(name[i:])
			a0 = int(trans[a0+s.alphabet[0].cell(r)])
			a1 = int(trans[a1+s.alphabet[1].cell(r)])
			a2 = int(trans[a2+s.alphabet[2].cell(r)])
			i += size
		}
	}
	return answer(s, trans, a0, a1, a2)
}

// answer is the lowest answer of the automata of s in rows a0, a1 and a2.
// Each acceptance column holds 1 + a pattern index, or 0: as a uint, no
// match is the largest value, and min picks a match if any.
func answer[T uint16 | uint32](s *dfa, trans []T, a0, a1, a2 int) int {
	return int(min(uint(trans[a0+int(s.cells[0])])-1, uint(trans[a1+int(s.cells[1])])-1, uint(trans[a2+int(s.cells[2])])-1))
}
