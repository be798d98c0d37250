package glob

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCoveredCases(t *testing.T) {
	tests := []struct {
		p       string
		by      []string
		covered bool
		witness string
	}{
		{"get_issue", []string{"get_*"}, true, ""},
		{"get_?ssue", []string{"get_*"}, true, ""},
		{"get_*", []string{"*_issue"}, false, "get_"},
		{"*_issue", []string{"get_*"}, false, "_issue"},
		{"[a-z]x", []string{"[a-m]*", "[n-z]*"}, true, ""},
		{"[a-z]x", []string{"[a-m]*", "[o-z]*"}, false, "nx"},
		// "" is matched by * and by neither a* nor *b.
		{"*", []string{"a*", "*b"}, false, ""},
		{"?*", []string{"a*", "*b"}, false, "c"},
		{"*", []string{"*"}, true, ""},
		{"*", []string{"?*"}, false, ""},
		{"*", []string{"?*", "[!\x00-\U0010FFFF]"}, false, ""},
		{"?", []string{"a"}, false, "b"},
		{"??", []string{"a*", "*a"}, false, "bb"},
		{"?", []string{"[!a]", "a"}, true, ""},
		{"?", []string{"[!a]"}, false, "a"},
		// Surrogates are in no name: these cover all one-rune names.
		{"?", []string{"[\x00-\uD7FF]", "[\uE000-\U0010FFFF]"}, true, ""},
		{"?", []string{"[\x00-\uD7FF]", "[\uE001-\U0010FFFF]"}, false, "\uE000"},
		{"[!\x00-\U0010FFFF]", nil, true, ""},
		{"a*", nil, false, "a"},
		{"repo://*", []string{"repo://owner/*"}, false, "repo://"},
		{"repo://owner/*", []string{"repo://*"}, true, ""},
		{"*:*", []string{"?*:*"}, false, ":"},
		{"[ab]*[!c]", []string{"a*", "b*?"}, true, ""},
		{"*ab*", []string{"*a*"}, true, ""},
		{"*a*", []string{"*ab*"}, false, "a"},
	}
	for _, tt := range tests {
		covered, witness, complete := Covered(MustParse(tt.p), parseAll(t, tt.by...))
		if !complete || covered != tt.covered || witness != tt.witness {
			t.Errorf("Covered(%q, %q) = %v, %q, %v; want %v, %q, true",
				tt.p, tt.by, covered, witness, complete, tt.covered, tt.witness)
		}
	}
}

func TestWitness(t *testing.T) {
	// A name matched by get_* and *_issue but not by get_issue.
	name, ok, complete := Witness(MustParse("get_*"), parseAll(t, "get_issue", "*_issue"),
		func(m []bool) bool { return !m[0] && m[1] })
	if name != "get__issue" || !ok || !complete {
		t.Errorf("Witness = %q, %v, %v; want \"get__issue\", true, true", name, ok, complete)
	}
	// Two disjoint patterns never match together.
	name, ok, complete = Witness(MustParse("a*"), parseAll(t, "b*"),
		func(m []bool) bool { return m[0] })
	if ok || !complete {
		t.Errorf("Witness(a*, b*, both) = %q, %v, %v; want none", name, ok, complete)
	}
	if _, ok, complete := Witness(MustParse("[!\x00-\U0010FFFF]"), nil, func([]bool) bool { return true }); ok || !complete {
		t.Error("Witness found a name for an empty pattern")
	}
}

func TestWitnessBudget(t *testing.T) {
	// Deciding that "the 23rd rune from the end is an a" covers itself
	// means visiting 2^23 product states.
	p := MustParse("*a" + strings.Repeat("?", 22))
	covered, name, complete := Covered(p, []*Pattern{p})
	if covered || name != "" || complete {
		t.Errorf("Covered = %v, %q, %v; want false, \"\", false", covered, name, complete)
	}
	// The same question with a small budget, and one the budget suffices for.
	small := MustParse("*a???")
	if _, ok, complete := (Search{}).witness(small, []*Pattern{small}, func(m []bool) bool { return !m[0] }, 10); ok || complete {
		t.Error("witness with a budget of 10 states was complete")
	}
	if _, ok, complete := (Search{}).witness(small, []*Pattern{small}, func(m []bool) bool { return !m[0] }, 100); ok || !complete {
		t.Error("witness with a budget of 100 states was not complete")
	}
}

func TestExample(t *testing.T) {
	tests := []struct{ p, want string }{
		{"*", ""},
		{"get_issue", "get_issue"},
		{"get_?ssue", "get_essue"},
		{"get_*", "get_"},
		{"a?", "aa"},
		{"?", "a"},
		{"[xy]?", "xa"},
		{"[!a-z0-9]", "A"},
		{"[!a-z]", "0"},
		{"[A-Z]", "A"},
		{"[ -/]", "!"},
		{"[\x00-\x1f]", "\x00"},
		{"[é-ü]", "é"},
		{"[!a]x", "xx"},
		{"repo://*/x", "repo:///x"},
		{`\*\?`, "*?"},
	}
	for _, tt := range tests {
		got, ok := Example(MustParse(tt.p))
		if !ok || got != tt.want {
			t.Errorf("Example(%q) = %q, %v; want %q, true", tt.p, got, ok, tt.want)
		}
	}
}

func TestFilled(t *testing.T) {
	tests := []struct{ p, want string }{
		{"*", "a"},
		{"get_issue", "get_issue"},
		{"get_*", "get_a"},
		{"*_issue", "a_issue"},
		{"file:///srv/projects/*/.env", "file:///srv/projects/a/.env"},
		{"repo://*/x", "repo://a/x"},
		{"get_?ssue", "get_essue"},
		{"[!a-z]*", "0a"},
		{`\*\?`, "*?"},
	}
	for _, tt := range tests {
		p := MustParse(tt.p)
		got, ok := Filled(p)
		if !ok || got != tt.want || !p.Match(got) {
			t.Errorf("Filled(%q) = %q, %v; want %q, true", tt.p, got, ok, tt.want)
		}
	}
	if _, ok := Filled(MustParse("[!\x00-\U0010FFFF]")); ok {
		t.Error("Filled of an empty pattern: ok")
	}
}

// names returns every name over alpha of length at most n, shortest first.
func names(alpha []rune, n int) []string {
	all := []string{""}
	level := []string{""}
	for range n {
		var next []string
		for _, s := range level {
			for _, r := range alpha {
				next = append(next, s+string(r))
			}
		}
		all = append(all, next...)
		level = next
	}
	return all
}

// TestAnalysisExhaustive checks Witness, Covered and Example against brute
// force. The patterns use only a, b and c, so every rune other than those
// behaves like x, and the names over {a, b, c, x} cover every case.
func TestAnalysisExhaustive(t *testing.T) {
	const maxLen = 6
	rng := rand.New(rand.NewPCG(3, 4))
	tokens := []string{"a", "b", "c", "*", "?", "[ab]", "[!a]", "[b-c]"}
	universe := names([]rune{'a', 'b', 'c', 'x'}, maxLen)
	always := func([]bool) bool { return true }
	for range 400 {
		p := MustParse(randGlob(rng, tokens, 4))
		var srcs []string
		for range 1 + rng.IntN(3) {
			srcs = append(srcs, randGlob(rng, tokens, 3))
		}
		others := parseAll(t, srcs...)
		table := rng.Uint32() // accept(m) is bit m of table
		accept := func(m []bool) bool {
			i := 0
			for j, v := range m {
				if v {
					i |= 1 << j
				}
			}
			return table>>i&1 == 1
		}
		none := func(m []bool) bool { return !slices.Contains(m, true) }

		// brute returns the length of the shortest name matched by p
		// that accept takes, or -1.
		brute := func(accept func([]bool) bool) int {
			m := make([]bool, len(others))
			for _, name := range universe {
				if !p.Match(name) {
					continue
				}
				for i, o := range others {
					m[i] = o.Match(name)
				}
				if accept(m) {
					return utf8.RuneCountInString(name)
				}
			}
			return -1
		}
		check := func(what string, accept func([]bool) bool, name string, ok, complete bool) {
			t.Helper()
			want := brute(accept)
			if !complete {
				t.Fatalf("%s(%q, %q): incomplete", what, p, srcs)
			}
			if !ok {
				if want >= 0 {
					t.Fatalf("%s(%q, %q): none; brute force found a name of length %d", what, p, srcs, want)
				}
				return
			}
			m := make([]bool, len(others))
			for i, o := range others {
				m[i] = o.Match(name)
			}
			if !p.Match(name) || !accept(m) {
				t.Fatalf("%s(%q, %q) = %q: not a witness", what, p, srcs, name)
			}
			if n := utf8.RuneCountInString(name); n <= maxLen && n != want || n > maxLen && want >= 0 {
				t.Fatalf("%s(%q, %q) = %q; brute force found length %d", what, p, srcs, name, want)
			}
		}

		name, ok, complete := Witness(p, others, accept)
		check("Witness", accept, name, ok, complete)

		covered, name, complete := Covered(p, others)
		check("Covered", none, name, !covered, complete)

		if covered && name != "" {
			t.Fatalf("Covered(%q, %q) = true with witness %q", p, srcs, name)
		}

		// Avoiding some of others prunes the search and changes no
		// answer: the avoided patterns must not match, and accept
		// decides the rest.
		var avoid []int
		for i := range others {
			if rng.IntN(2) == 0 {
				avoid = append(avoid, i)
			}
		}
		avoiding := func(m []bool) bool {
			for _, i := range avoid {
				if m[i] {
					return false
				}
			}
			return accept(m)
		}
		name, ok, complete = Search{Avoid: avoid}.Witness(p, others, avoiding)
		check("Witness avoiding "+fmt.Sprint(avoid), avoiding, name, ok, complete)
		if plain, pok, _ := Witness(p, others, avoiding); plain != name || pok != ok {
			t.Fatalf("Witness(%q, %q) = %q, %v; avoiding %v, %q, %v", p, srcs, plain, pok, avoid, name, ok)
		}

		ex, ok := Example(p)
		if ok == p.Empty() || ok && !p.Match(ex) {
			t.Fatalf("Example(%q) = %q, %v", p, ex, ok)
		}
		wex, wok, _ := Witness(p, nil, always)
		if ex != wex || ok != wok {
			t.Fatalf("Example(%q) = %q, %v; Witness alone gives %q, %v", p, ex, ok, wex, wok)
		}
	}
}

// Avoiding the patterns a name must not match keeps a search over a list
// of *x1*, *x2*, ... to the states where none has matched yet: without it,
// each state past an x_i is stepped on every cell. The rule *x200* after
// ? and *x0* ... *x199* is reached by "x200 x200"; a budget counts the work.
func TestCoveredStarLists(t *testing.T) {
	by := []*Pattern{MustParse("?")}
	for i := range 200 {
		by = append(by, MustParse("*"+string(rune(0x4e00+i))+"*"))
	}
	p := MustParse("*" + string(rune(0x4e00+200)) + "*")
	none := func(m []bool) bool { return !slices.Contains(m, true) }
	plain, pruned := NewBudget(1<<40), NewBudget(1<<40)
	name, ok, complete := Search{Budget: plain}.Witness(p, by, none)
	covered, cname, ccomplete := Search{Budget: pruned}.Covered(p, by)
	if !ok || !complete || covered || !ccomplete || cname != name || !p.Match(name) || slices.ContainsFunc(by, func(o *Pattern) bool { return o.Match(name) }) {
		t.Fatalf("Witness = %q, %v, %v; Covered = %v, %q, %v; want the same name, matched by p and none of by", name, ok, complete, covered, cname, ccomplete)
	}
	spentPlain, spentPruned := 1<<40-plain.left, 1<<40-pruned.left
	if spentPruned*20 > spentPlain {
		t.Errorf("the search avoiding the list spent %d units, without avoiding %d: want at most a twentieth", spentPruned, spentPlain)
	}
	t.Logf("units spent: %d avoiding, %d not", spentPruned, spentPlain)
}

// A shared budget stops every search once it is spent, and reports so; a
// budget large enough changes no answer.
func TestSearchBudget(t *testing.T) {
	p, by := MustParse("*a*b"), parseAll(t, "*a", "*b*c")
	want, wantOK, _ := Witness(p, by, func(m []bool) bool { return !m[0] })
	big := NewBudget(1 << 30)
	if got, ok, complete := (Search{Budget: big}).Witness(p, by, func(m []bool) bool { return !m[0] }); got != want || ok != wantOK || !complete || big.Exhausted() {
		t.Fatalf("with a large budget: %q, %v, %v (exhausted %v); want %q, %v, complete", got, ok, complete, big.Exhausted(), want, wantOK)
	}
	small := NewBudget(5)
	if _, ok, complete := (Search{Budget: small}).Witness(p, by, func(m []bool) bool { return !m[0] }); ok || complete || !small.Exhausted() {
		t.Fatalf("with a budget of 5: ok %v, complete %v, exhausted %v; want an incomplete search and an exhausted budget", ok, complete, small.Exhausted())
	}
	if _, _, complete := (Search{Budget: small}).Covered(MustParse("x"), nil); complete {
		t.Fatal("a search after the budget was spent was complete")
	}
	if (*Budget)(nil).Exhausted() {
		t.Fatal("no budget is exhausted")
	}
}

// A search records which bound stopped it: the state count for narrow
// patterns, the words of memory for wide ones (a state of n positions is
// n/64 words), the shared work budget when that ran out first.
func TestSearchStopped(t *testing.T) {
	never := func(m []bool) bool { return false }
	// Narrow: 2^23 states are needed, each of one word.
	narrow := MustParse("*a" + strings.Repeat("?", 22))
	b := NewBudget(DefaultBudget)
	if _, ok, complete := (Search{Budget: b}).Witness(narrow, []*Pattern{narrow}, func(m []bool) bool { return !m[0] }); ok || complete {
		t.Fatal("the narrow search was complete")
	}
	if got := b.Stopped(); got != StateLimit {
		t.Errorf("narrow: stopped by %b, want StateLimit", got)
	}
	// Wide: the same question over patterns of 3,000 positions (47 words
	// a state) reaches MaxWitnessWords before MaxWitnessStates states.
	wide := MustParse("*a" + strings.Repeat("?", 22) + "*" + strings.Repeat("b", 3000))
	b = NewBudget(DefaultBudget)
	if _, ok, complete := (Search{Budget: b}).Witness(wide, []*Pattern{wide}, func(m []bool) bool { return !m[0] }); ok || complete {
		t.Fatal("the wide search was complete")
	}
	if got := b.Stopped(); got != MemoryLimit {
		t.Errorf("wide: stopped by %b, want MemoryLimit", got)
	}
	// An automaton whose rune partition times its width passes
	// MaxWitnessWords is not built at all: ten patterns of 4,000 runes of
	// their own.
	var huge []*Pattern
	for i := range 10 {
		var distinct strings.Builder
		for r := range rune(4000) {
			distinct.WriteRune(0x4e00 + rune(i)*4000 + r)
		}
		huge = append(huge, MustParse(distinct.String()))
	}
	b = NewBudget(DefaultBudget)
	if _, ok, complete := (Search{Budget: b}).Witness(huge[0], huge[1:], never); ok || complete {
		t.Fatal("the search of the huge automaton was complete")
	}
	if got := b.Stopped(); got != MemoryLimit || b.Exhausted() {
		t.Errorf("huge: stopped by %b (exhausted %v), want MemoryLimit alone", got, b.Exhausted())
	}
	// A small work budget runs out first.
	b = NewBudget(1000)
	if _, _, complete := (Search{Budget: b}).Witness(narrow, []*Pattern{narrow}, never); complete {
		t.Fatal("the search with 1000 units was complete")
	}
	if got := b.Stopped(); got&WorkLimit == 0 || !b.Exhausted() {
		t.Errorf("small budget: stopped by %b, want WorkLimit", got)
	}
	// Spend charges work done outside the searches.
	b = NewBudget(10)
	if !b.Spend(10) || b.Spend(1) || !b.Exhausted() {
		t.Error("Spend did not exhaust a budget of 10 at the 11th unit")
	}
}
