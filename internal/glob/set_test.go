package glob

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// firstRef is the reference for Set.First.
func firstRef(pats []*Pattern, name string) int {
	for i, p := range pats {
		if p.Match(name) {
			return i
		}
	}
	return -1
}

func parseAll(t testing.TB, ss ...string) []*Pattern {
	t.Helper()
	pats := make([]*Pattern, len(ss))
	for i, s := range ss {
		p, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		pats[i] = p
	}
	return pats
}

// randGlob builds a random pattern of 1..maxTokens tokens.
func randGlob(rng *rand.Rand, tokens []string, maxTokens int) string {
	var b strings.Builder
	for range 1 + rng.IntN(maxTokens) {
		b.WriteString(tokens[rng.IntN(len(tokens))])
	}
	return b.String()
}

// randName builds a random name of 0..maxLen pieces.
func randName(rng *rand.Rand, pieces []string, maxLen int) string {
	var b strings.Builder
	for range rng.IntN(maxLen + 1) {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

func TestSetMatchTable(t *testing.T) {
	for _, tt := range matchTests {
		s := Compile(parseAll(t, tt.pattern))
		want := -1
		if tt.want {
			want = 0
		}
		if got := s.First(tt.name); got != want {
			t.Errorf("Compile(%q).First(%q) = %d; want %d", tt.pattern, tt.name, got, want)
		}
	}
}

func TestSetFirstOrder(t *testing.T) {
	s := Compile(parseAll(t, "get_issue", "get_*", "*_issue", "[!\x00-\U0010FFFF]", "*"))
	for name, want := range map[string]int{
		"get_issue":  0,
		"get_me":     1,
		"list_issue": 2,
		"other":      4,
		"":           4,
	} {
		if got := s.First(name); got != want {
			t.Errorf("First(%q) = %d; want %d", name, got, want)
		}
	}
	if s.Len() != 5 {
		t.Errorf("Len() = %d; want 5", s.Len())
	}

	// Literals (in the literal table) and globs (in the automata)
	// interleave; a literal with U+FFFD also matches an invalid byte.
	s = Compile(parseAll(t, "list_*", "get_issue", "*_issue", "get_issue", "x\uFFFD", "x\uFFFD", "*"))
	for name, want := range map[string]int{
		"get_issue":  1,
		"list_issue": 0,
		"my_issue":   2,
		"x\uFFFD":    4,
		"x\xff":      4,
		"x\xfe":      4,
		"get_":       6,
	} {
		if got := s.First(name); got != want {
			t.Errorf("First(%q) = %d; want %d", name, got, want)
		}
	}
}

func TestSetEdgeCases(t *testing.T) {
	empty := Compile(nil)
	if empty.Len() != 0 || empty.First("") != -1 || empty.First("a") != -1 {
		t.Error("empty Set matched something")
	}
	none := Compile(parseAll(t, "[!\x00-\U0010FFFF]"))
	if none.Len() != 1 || none.First("") != -1 || none.First("a") != -1 {
		t.Error("Set of an empty pattern matched something")
	}
}

// TestSetParts checks that the automata of the three groups of globs (see
// part) decide together as one: the answer is the lowest index across them,
// whichever automaton finds it, whatever the others read after they become
// final, and across the walk's 16-byte checks.
func TestSetParts(t *testing.T) {
	srcs := []string{
		"[a-c]*_z",  // 0: starts with a class
		"*_x*",      // 1: starts with a star
		"get_*",     // 2: anchored, final once "get_" is read
		"?et_y",     // 3: starts with a class-like ?
		"*é*",       // 4
		"get_exact", // 5: a literal
		"*_z",       // 6
		"list_*_x",  // 7
	}
	pats := parseAll(t, srcs...)
	s := Compile(pats)
	d := s.built()
	if d == nil {
		t.Fatal("no matcher")
	}
	for k := range maxParts {
		if d.final[k] == 0 {
			t.Errorf("automaton %d is unused; want one per group", k)
		}
	}
	long := strings.Repeat("q", 15)
	names := []string{
		"a_z", "b_x_z", "get_z", "get_x", "get_exact", "get_exact_x", "bet_y", "get_y",
		"x_z", "_x", "list_a_x", "list_x", "é", "get_é", "d_z", "c",
		"get_" + long + "é" + long, "c" + long + "_x" + long, "list_" + long + "_x",
		long + "é", long + "_z", "b" + long + "é_z", "get_" + strings.Repeat("é", 40),
	}
	for _, name := range names {
		if got, want := s.First(name), firstRef(pats, name); got != want {
			t.Errorf("First(%q) = %d; want %d", name, got, want)
		}
	}
}

func TestSetFirstRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tokens := []string{"a", "b", "/", ":", "é", "*", "?", "[ab]", "[!a]", `\*`, "[é-ü]", "\uFFFD"}
	pieces := []string{"a", "b", "/", ":", "é", "ö", "x", "*", "\xff", ""}
	for trial := range 2000 {
		maxTokens := 5
		if trial%10 == 0 {
			maxTokens = 40 // more than 64 NFA positions in all
		}
		var srcs []string
		for range 1 + rng.IntN(8) {
			srcs = append(srcs, randGlob(rng, tokens, maxTokens))
		}
		pats := parseAll(t, srcs...)
		dfa, slow := Compile(pats), CompileDeferred(pats)
		if dfa.built() == nil && len(dfa.globs) > 0 && len(srcs) < 4 {
			t.Fatalf("patterns %q: no matcher", srcs)
		}
		if slow.built() != nil {
			t.Fatal("CompileDeferred built a matcher")
		}
		maxPieces := 10
		if trial%5 == 0 {
			maxPieces = 40 // past the walk's 16-byte checks
		}
		for range 50 {
			name := randName(rng, pieces, maxPieces)
			want := firstRef(pats, name)
			if got := dfa.First(name); got != want {
				t.Fatalf("patterns %q: First(%q) = %d; want %d", srcs, name, got, want)
			}
			if got := slow.First(name); got != want {
				t.Fatalf("patterns %q: fallback First(%q) = %d; want %d", srcs, name, got, want)
			}
		}
	}
}

func TestSetDFACap(t *testing.T) {
	// The DFA for "the 21st rune from the end is an a" needs 2^21 states.
	blowup := "*a" + strings.Repeat("?", 20)
	pats := parseAll(t, "get_*", blowup)
	s := Compile(pats)
	if d := s.built(); d != nil {
		t.Fatalf("Compile(%q) built a table of %d entries", blowup, len(d.rows8)+len(d.rows16))
	}
	for _, name := range []string{"get_x", "a" + strings.Repeat("b", 20), "ba" + strings.Repeat("b", 20), "b" + strings.Repeat("b", 20)} {
		if got, want := s.First(name), firstRef(pats, name); got != want {
			t.Errorf("First(%q) = %d; want %d", name, got, want)
		}
	}
	name := "xa" + strings.Repeat("b", 20)
	if n := testing.AllocsPerRun(100, func() { s.First(name) }); n != 0 {
		t.Errorf("fallback First allocates %v times", n)
	}
}

// TestSetBuildConcurrent matches from several goroutines while the DFA is
// being built: every answer is exact before, during and after (run with
// -race).
func TestSetBuildConcurrent(t *testing.T) {
	pats := benchPatterns(t)
	// Literal names too: their answers are published with the DFA.
	names := []string{"get_issue", "list_issues", "zzz", "a_x", "delete_repo", "", "list_commits", "push_files", "get_file_contents", "run_workflow"}
	s := CompileDeferred(pats)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g == 0 {
				s.Build()
			}
			for range 200 {
				for _, n := range names {
					if got, want := s.First(n), firstRef(pats, n); got != want {
						t.Errorf("First(%q) = %d; want %d", n, got, want)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if s.built() == nil {
		t.Fatal("Build built no matcher")
	}
}

// TestSetBuildConcurrentLiterals asks for literal names while Build runs on
// a block with thousands of them, so that readers are there while their
// answers are computed: an automaton published before its answers is
// caught (run with -race).
func TestSetBuildConcurrentLiterals(t *testing.T) {
	srcs := []string{"lit1*", "*_x"}
	for i := range 3000 {
		srcs = append(srcs, "lit"+strconv.Itoa(i))
	}
	pats := parseAll(t, srcs...)
	names := []string{"lit0", "lit1", "lit17", "lit2999", "lit2", "a_x", "lit"}
	want := make([]int, len(names))
	for i, n := range names {
		want[i] = firstRef(pats, n)
	}
	s := CompileDeferred(pats)
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for after := 0; after < 100; {
				select {
				case <-done:
					after++
				default:
				}
				for i, n := range names {
					if got := s.First(n); got != want[i] {
						t.Errorf("First(%q) = %d; want %d", n, got, want[i])
						return
					}
				}
			}
		}()
	}
	s.Build()
	close(done)
	wg.Wait()
	if s.built() == nil {
		t.Fatal("Build built no matcher")
	}
}

func TestSetFirstAllocs(t *testing.T) {
	s := Compile(benchPatterns(t))
	names := benchNames()
	names = append(names, "é/ü:\xff日本")
	if n := testing.AllocsPerRun(100, func() {
		for _, name := range names {
			s.First(name)
		}
	}); n != 0 {
		t.Errorf("First allocates %v times", n)
	}
}

func TestSetConcurrent(t *testing.T) {
	pats := benchPatterns(t)
	s := Compile(pats)
	names := benchNames()
	done := make(chan bool)
	for range 8 {
		go func() {
			ok := true
			for range 100 {
				for _, name := range names {
					ok = ok && s.First(name) == firstRef(pats, name)
				}
			}
			done <- ok
		}()
	}
	for range 8 {
		if !<-done {
			t.Error("concurrent First disagreed with the reference")
		}
	}
}

// TestSetASCIICells: the byte-wide ASCII table agrees with the partition
// even when the partition has more cells than a byte can number.
func TestSetASCIICells(t *testing.T) {
	var srcs []string
	for r := rune(1); r < utf8.RuneSelf; r++ {
		if !strings.ContainsRune(`*?[\`, r) {
			srcs = append(srcs, "*"+string(r)+"*")
		}
	}
	for r := rune(0x4e00); r < 0x4e00+300; r++ {
		srcs = append(srcs, "x"+string(r)+"*")
	}
	s := Compile(parseAll(t, srcs...))
	d := s.built()
	if d == nil {
		t.Fatal("no matcher")
	}
	if cells := slices.Max(d.alphabet[0].cellOf) + 1; cells < 256 {
		t.Fatalf("only %d cells", cells)
	}
	for k := range maxParts {
		if d.alphabet[k].starts == nil {
			continue // unused
		}
		for b := range rune(utf8.RuneSelf) {
			if c := d.ascii[asciiSlot[b]][k]; int(c) != d.alphabet[k].cell(b) {
				t.Errorf("automaton %d: ascii[asciiSlot[%q]] = %d; cell = %d", k, b, c, d.alphabet[k].cell(b))
			}
		}
	}
	pats := parseAll(t, srcs...)
	for _, name := range []string{"abc", "x丅yz", "丅", "~", "x~"} {
		if got, want := s.First(name), firstRef(pats, name); got != want {
			t.Errorf("First(%q) = %d; want %d", name, got, want)
		}
	}
}

// TestSetIndexPast16Bits: a glob whose index does not fit 16 bits, behind
// exact names (which go to the literal table and leave the automata
// tiny), must still be answered with its own index; a 16-bit acceptance would
// wrap it to a rule of the wrong effect. Rules per block are not capped.
func TestSetIndexPast16Bits(t *testing.T) {
	for _, n := range []int{65533, 65534, 65535, 65536} {
		pats := make([]*Pattern, 0, n+3)
		for i := range n {
			pats = append(pats, MustParse("lit"+strconv.Itoa(i)))
		}
		// "a?" accepts in a state that is not final, "b*" in a final
		// one: both indices are in acceptance columns, of a state's row
		// and of a final row.
		pats = append(pats, MustParse("a?"), MustParse("b*"))
		s := Compile(pats)
		d := s.built()
		if d == nil {
			t.Fatal("no matcher")
		}
		// The largest value is b*'s acceptance, n+2: the table is 8-bit,
		// with 16-bit acceptance, exactly when it fits.
		if wide := n+2 > math.MaxUint16; wide != (d.rows16 != nil) || wide == (d.rows8 != nil) {
			t.Errorf("%d literals first: 16-bit table %t; want %t", n, d.rows16 != nil, wide)
		}
		for _, name := range []string{"ab", "lit7", "a", "abc", "b", "bcd"} {
			if got, want := s.First(name), firstRef(pats, name); got != want {
				t.Errorf("%d literals first: First(%q) = %d; want %d", n, name, got, want)
			}
		}
	}
}

// TestSetLiterals checks the literal index: many literals that share a
// signature (same length, first and last byte), many that do not, globs
// between them, and names with a literal's signature that are no literal.
func TestSetLiterals(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var srcs []string
	for i := range 300 {
		srcs = append(srcs, "a"+strconv.Itoa(100+i)+"z") // one signature
		srcs = append(srcs, "x"+randName(rng, []string{"a", "b", "c", "_", "/", "é"}, 12))
		if i%7 == 0 {
			srcs = append(srcs, "a1*z", "*"+strconv.Itoa(i)+"*")
		}
	}
	pats := parseAll(t, srcs...)
	names := append([]string{"", "a", "az", "a99z", "a1000z", "a400z"}, srcs...)
	for range 2000 {
		names = append(names, randName(rng, []string{"a", "b", "c", "_", "/", "é", "1", "z"}, 12))
	}
	for _, s := range []*Set{Compile(pats), CompileDeferred(pats)} {
		for _, name := range names {
			if got, want := s.First(name), firstRef(pats, name); got != want {
				t.Fatalf("built %t: First(%q) = %d; want %d", s.built() != nil, name, got, want)
			}
		}
	}
}

// TestSetWalkWaitsForEveryAutomaton: the walk may stop early only once all
// three automata are final. In each case two groups are final within the
// first rune (dead, or a trailing star with nothing before it alive) and
// the third decides on the name's last rune, past the 16-byte checks, so a
// check that ignores any one automaton answers wrongly.
func TestSetWalkWaitsForEveryAutomaton(t *testing.T) {
	for _, tt := range []struct {
		srcs   []string
		group  int // the group of srcs[0], which decides
		prefix string
	}{
		{[]string{"a*z", "*", "?*"}, 0, "a"},
		{[]string{"*z", "x*", "?*"}, 1, "a"},
		{[]string{"?*z", "x*", "*"}, 2, "a"},
	} {
		pats := parseAll(t, tt.srcs...)
		if g := part(pats[0]); g != tt.group {
			t.Fatalf("part(%q) = %d; want %d", tt.srcs[0], g, tt.group)
		}
		groups := map[int]bool{}
		for _, p := range pats {
			groups[part(p)] = true
		}
		if len(groups) != maxParts {
			t.Fatalf("%q: %d groups; want one automaton per group", tt.srcs, len(groups))
		}
		s := Compile(pats)
		if s.built() == nil {
			t.Fatal("no matcher")
		}
		for n := 14; n <= 50; n++ {
			body := tt.prefix + strings.Repeat("b", n)
			for _, name := range []string{
				body + "z", body + "y", body + "日z", body + "\xffz", body + "z\xff",
				tt.prefix + strings.Repeat("é", n) + "z", tt.prefix + strings.Repeat("b", n%16) + "日" + strings.Repeat("b", n) + "z",
			} {
				want := firstRef(pats, name)
				if strings.HasSuffix(name, "z") && want != 0 {
					t.Fatalf("%q: reference First(%q) = %d; want 0", tt.srcs, name, want)
				}
				if got := s.First(name); got != want {
					t.Errorf("%q: First(%q) = %d; want %d", tt.srcs, name, got, want)
				}
			}
		}
	}
}

// TestSetFinalRows checks the layout the walk's early stop relies on: the
// states numbered from an automaton's final on lie within its block and
// loop to themselves, and a state whose answer is settled (a trailing star
// with no earlier glob alive, or no glob alive) is such a state.
func TestSetFinalRows(t *testing.T) {
	pats := parseAll(t, "get_*", "get_x?", "[ab]c*d", "*", "?*")
	d := Compile(pats).built()
	if d == nil || d.rows8 == nil {
		t.Fatal("no 8-bit table")
	}
	// at returns the state automaton k reaches on name, checking each
	// final state it passes.
	at := func(k int, name string) int {
		end := len(d.rows8)
		if k+1 < maxParts {
			end = int(d.base[k+1])
		}
		block := d.rows8[d.base[k]:end]
		cells := int(slices.Max(d.alphabet[k].cellOf)) + 1
		final := int(d.final[k])
		next := func(s, c int) int { return int(block[s<<d.shift+c]) }
		check := func(s int) {
			if (s+1)<<d.shift > len(block) {
				t.Fatalf("automaton %d, %q: state %d outside its block", k, name, s)
			}
			if s < final {
				return
			}
			for c := range cells {
				if next(s, c) != s {
					t.Fatalf("automaton %d, %q: final state %d goes to %d on cell %d", k, name, s, next(s, c), c)
				}
			}
		}
		s := 0 // the start
		check(s)
		for _, r := range name {
			s = next(s, d.alphabet[k].cell(r))
			check(s)
		}
		return s
	}
	for _, tt := range []struct {
		k     int
		name  string
		final bool
	}{
		{0, "", false}, {0, "get", false}, {0, "get_", true}, {0, "get_x", true}, {0, "x", true},
		{1, "", true}, {1, "abc", true},
		{2, "", false}, {2, "a", false}, {2, "ac", false}, {2, "acd", false}, {2, "x", true}, {2, "b" + strings.Repeat("c", 20) + "\xff", false},
	} {
		if got := at(tt.k, tt.name) >= int(d.final[tt.k]); got != tt.final {
			t.Errorf("automaton %d after %q: final %t; want %t", tt.k, tt.name, got, tt.final)
		}
	}
}

// TestSetKinds checks First against the reference on every kind of Set:
// not yet built, built with an 8-bit table, built with a 16-bit table,
// built past the state cap (no automata), with no globs, with no patterns;
// on names that are a literal or not, invalid UTF-8, and runes across the
// walk's 16-byte checks.
func TestSetKinds(t *testing.T) {
	small := []string{"get_*", "get_issue", "*_secret", "[a-m]*_x", "a\xef\xbf\xbdb", "lit7", "é?日*", "?", "merge_pr"}
	wide := make([]string, 0, 65540)
	for i := range 65536 {
		wide = append(wide, "lit"+strconv.Itoa(i))
	}
	wide = append(wide, "get_*", "*_secret", "[a-m]*_x")
	names := []string{"", "get_issue", "lit7", "merge_pr", "x_secret", "get_x", "a_x", "z_x", "a\xffb", "a\uFFFDb", "é日日",
		"é" + strings.Repeat("b", 14) + "日_secret", strings.Repeat("a", 15) + "日_x", strings.Repeat("é", 9) + "_secret",
		"get_" + strings.Repeat("\xff", 20), strings.Repeat("z", 40), "lit65535", "lit65536", "get_issue\xff"}
	for _, tt := range []struct {
		kind     string
		srcs     []string
		deferred bool
		check    func(*matcher) bool
	}{
		{"deferred", small, true, func(m *matcher) bool { return m == nil }},
		{"8-bit", small, false, func(m *matcher) bool { return m != nil && m.rows8 != nil }},
		{"16-bit", wide, false, func(m *matcher) bool { return m != nil && m.rows16 != nil }},
		{"capped", []string{"get_*", "*a" + strings.Repeat("?", 20), "lit7"}, false, func(m *matcher) bool { return m == nil }},
		{"literals", []string{"get_issue", "lit7", "merge_pr", "x_secret"}, false, func(m *matcher) bool { return m != nil }},
		{"empty", nil, false, func(m *matcher) bool { return m != nil }},
	} {
		pats := parseAll(t, tt.srcs...)
		s := CompileDeferred(pats)
		if !tt.deferred {
			s.Build()
		}
		if !tt.check(s.built()) {
			t.Fatalf("%s: not the kind of Set the test is for", tt.kind)
		}
		for _, name := range names {
			if got, want := s.First(name), firstRef(pats, name); got != want {
				t.Errorf("%s: First(%q) = %d; want %d", tt.kind, name, got, want)
			}
		}
	}
}

// mooreClasses is the reference minimize checks against: Moore's rounds,
// each splitting the states whose answer or successors' classes differ,
// until a round splits nothing.
func mooreClasses(succ, acc, final []int32, cells int) []int32 {
	n := len(acc)
	class := make([]int32, n)
	key := func(id int, class []int32) string {
		k := fmt.Sprint(final[id])
		if final[id] == 0 {
			k += fmt.Sprint(" ", acc[id])
		}
		if class != nil && final[id] == 0 {
			k = fmt.Sprint(class[id], "|", k)
			for _, t := range succ[id*cells : (id+1)*cells] {
				k += fmt.Sprint(" ", class[t])
			}
		}
		return k
	}
	number := func(keyOf func(int) string) (int, []int32) {
		ids, out := map[string]int32{}, make([]int32, n)
		for id := range n {
			k := keyOf(id)
			if _, ok := ids[k]; !ok {
				ids[k] = int32(len(ids))
			}
			out[id] = ids[k]
		}
		return len(ids), out
	}
	classes, class := number(func(id int) string { return key(id, nil) })
	for {
		more, next := number(func(id int) string { return key(id, class) })
		if more == classes {
			return class
		}
		classes, class = more, next
	}
}

// minimize finds the same classes as Moore's rounds on random automata,
// with final states, several answers and cells, and chains that take many
// rounds.
func TestMinimizeAgreesWithMoore(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 3000 {
		n := 1 + rng.IntN(40)
		cells := 1 + rng.IntN(4)
		succ := make([]int32, n*cells)
		acc, final := make([]int32, n), make([]int32, n)
		chain := trial%3 == 0
		for id := range n {
			for c := range cells {
				if chain && c == 0 {
					succ[id*cells] = int32(min(id+1, n-1))
				} else {
					succ[id*cells+c] = int32(rng.IntN(n))
				}
			}
			acc[id] = int32(rng.IntN(3)) - 1
			if chain {
				acc[id] = -1
				if id == n-1 {
					acc[id] = 0
				}
			}
			if rng.IntN(5) == 0 {
				final[id] = -1 - int32(rng.IntN(3))
			}
		}
		got, want := minimize(succ, acc, final, cells), mooreClasses(succ, acc, final, cells)
		for i := range n {
			for j := range n {
				if (got[i] == got[j]) != (want[i] == want[j]) {
					t.Fatalf("trial %d: states %d and %d: minimize puts them in classes %d and %d, Moore in %d and %d\nsucc %v\nacc %v\nfinal %v",
						trial, i, j, got[i], got[j], want[i], want[j], succ, acc, final)
				}
			}
		}
	}
}

// The longest glob compiles, DFA and all, and matches: Moore's algorithm
// took a round per rune of it.
func TestSetLongGlob(t *testing.T) {
	long := strings.Repeat("a", MaxPatternLen-1)
	s := Compile([]*Pattern{MustParse(long + "*"), MustParse("x*y")})
	if s.built() == nil {
		t.Fatal("no matcher built")
	}
	for name, want := range map[string]int{long: 0, long[1:]: -1, "xay": 1, long + "b": 0} {
		if got := s.First(name); got != want {
			t.Errorf("First(%.20q… %d runes) = %d, want %d", name, len(name), got, want)
		}
	}
}
