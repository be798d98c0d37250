package suggest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNearest(t *testing.T) {
	names := []string{"create_issue", "delete_repository", "get_issue", "list_issues"}
	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"get_isue", []string{"get_issue"}},
		{"delete_repostory", []string{"delete_repository"}},
		{"push_files", nil},
	} {
		if got := Nearest(tc.pattern, names, 3); !slices.Equal(got, tc.want) {
			t.Errorf("Nearest(%q) = %v, want %v", tc.pattern, got, tc.want)
		}
	}
	if d := editDistance("kitten", "sitting", 10); d != 3 {
		t.Errorf("editDistance = %d", d)
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"allow_list", "deny_list", "approval_list", "approval_timeout_seconds"}
	for name, want := range map[string]string{
		"allow":        "allow_list",
		"deny":         "deny_list",
		"aproval_list": "approval_list",
		"approval":     "approval_list",
		"timeout":      "",
		"":             "",
	} {
		if got := Suggest(name, known); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", name, got, want)
		}
	}
	// A near name wins over a shorter one the name extends.
	known = []string{"front", "state", "state_dir", "table", "trust"}
	for name, want := range map[string]string{
		"state_dirr": "state_dir",
		"state_di":   "state_dir",
		"stat":       "state",
		"states":     "state",
		"trusts":     "trust",
	} {
		if got := Suggest(name, known); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", name, got, want)
		}
	}
	// A name cut short is the name it starts, however near another is:
	// the flags of policyc test, blame and compile.
	for name, want := range map[string]string{
		"approval_timeout": "approval_timeout_seconds",
		"out":              "output",
		"ser":              "server",
		"ex":               "expires",
	} {
		known := []string{"allow_list", "approval_list", "approval_timeout_seconds", "at", "expires", "format", "key", "output", "rev", "run", "server"}
		if got := Suggest(name, known); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", name, got, want)
		}
	}
}

// FuzzEditDistance checks the bounded edit distance against its laws: zero
// exactly for equal strings, symmetric, at most the longer length, at
// least the difference of lengths, and limit+1 exactly when over limit.
func FuzzEditDistance(f *testing.F) {
	f.Add("kitten", "sitting", 2)
	f.Add("get_isue", "get_issue", 3)
	f.Add("", "abc", 0)
	f.Fuzz(func(t *testing.T, a, b string, limit int) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) || len(a) > 64 || len(b) > 64 || limit < 0 || limit > 64 {
			return
		}
		full := editDistance(a, b, 1000)
		la, lb := utf8.RuneCountInString(a), utf8.RuneCountInString(b)
		switch {
		case (full == 0) != (a == b):
			t.Fatalf("d(%q, %q) = %d", a, b, full)
		case full != editDistance(b, a, 1000):
			t.Fatalf("d(%q, %q) is not symmetric", a, b)
		case full > max(la, lb) || full < max(la-lb, lb-la):
			t.Fatalf("d(%q, %q) = %d out of bounds", a, b, full)
		}
		got := editDistance(a, b, limit)
		if full <= limit && got != full || full > limit && got != limit+1 {
			t.Fatalf("d(%q, %q, limit %d) = %d, full %d", a, b, limit, got, full)
		}
	})
}

// levenshtein is the whole table, for checking the banded editDistance.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
		}
	}
	return d[len(ra)][len(rb)]
}

// TestEditDistanceBand checks the banded edit distance against the whole
// table on random strings of a small alphabet (so that they are close), at
// every limit up to past their lengths.
func TestEditDistanceBand(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		r := make([]rune, rnd.IntN(40))
		for i := range r {
			r[i] = []rune("abcé")[rnd.IntN(4)]
		}
		return string(r)
	}
	for range 2000 {
		a, b := word(), word()
		full := levenshtein(a, b)
		for limit := 0; limit <= 42; limit++ {
			want := min(full, limit+1)
			if got := editDistance(a, b, limit); got != want {
				t.Fatalf("editDistance(%q, %q, %d) = %d, want %d (full %d)", a, b, limit, got, want, full)
			}
		}
	}
}

// TestNearestLongName: a name of up to MaxNameRunes runes gets suggestions
// as any other; a longer one gets none, even with a candidate one edit
// away.
func TestNearestLongName(t *testing.T) {
	for _, tc := range []struct {
		runes int
		want  bool
	}{{MaxNameRunes, true}, {MaxNameRunes + 1, false}, {1000, false}} {
		name := strings.Repeat("é", tc.runes-1) + "a"
		cand := strings.Repeat("é", tc.runes-1) + "b"
		got := Nearest(name, []string{cand}, 3)
		if (len(got) == 1) != tc.want {
			t.Errorf("Nearest of a name of %d runes = %d suggestions, want them: %v", tc.runes, len(got), tc.want)
		}
	}
	// Suggest still gives the candidate that extends a long name.
	long := strings.Repeat("x", 1000)
	if got := Suggest(long, []string{long + "_list"}); got != long+"_list" {
		t.Errorf("Suggest of a long name missed its extension")
	}
}

// BenchmarkNearest looks for the nearest of 200 candidates of the name's
// length. near: they differ from it in their last characters. far: they
// differ in the first character and in a random second half, so each is
// more edits away than the limit and the edit distance stops only late.
func BenchmarkNearest(b *testing.B) {
	rnd := rand.New(rand.NewPCG(5, 6))
	random := func(n int) string {
		r := make([]byte, n)
		for i := range r {
			r[i] = byte('a' + rnd.IntN(26))
		}
		return string(r)
	}
	for _, n := range []int{20, 128, 256, 1000} {
		base := strings.Repeat("t", n-8)
		var near []string
		for i := range 200 {
			near = append(near, fmt.Sprintf("%s%08d", base, i))
		}
		b.Run(fmt.Sprintf("near/len=%d", n), func(b *testing.B) {
			for b.Loop() {
				Nearest(base+"x0000001", near, 3)
			}
		})
		half := random(n/2 - 1)
		var far []string
		for range 200 {
			far = append(far, "y"+half+random(n-n/2))
		}
		name := "x" + half + random(n-n/2)
		b.Run(fmt.Sprintf("far/len=%d", n), func(b *testing.B) {
			for b.Loop() {
				Nearest(name, far, 3)
			}
		})
	}
}

// TestNearestOrder checks Nearest, which stops looking at candidates
// further than the n-th nearest so far, against the n first of all the
// candidates within the limit, sorted by distance (ties in their order).
func TestNearestOrder(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	word := func() string {
		b := make([]byte, 3+rnd.IntN(6))
		for i := range b {
			b[i] = "abc"[rnd.IntN(3)]
		}
		return string(b)
	}
	for range 2000 {
		name := word()
		var cands []string
		for range rnd.IntN(12) {
			cands = append(cands, word())
		}
		n := rnd.IntN(4)
		limit := max(2, len(name)/3)
		type cand struct {
			name string
			d    int
		}
		var all []cand
		for _, c := range cands {
			if d := levenshtein(name, c); d <= limit {
				all = append(all, cand{c, d})
			}
		}
		slices.SortStableFunc(all, func(a, b cand) int { return a.d - b.d })
		var want []string
		for i := 0; i < len(all) && i < n; i++ {
			want = append(want, all[i].name)
		}
		if got := Nearest(name, cands, n); !slices.Equal(got, want) {
			t.Fatalf("Nearest(%q, %q, %d) = %q, want %q", name, cands, n, got, want)
		}
	}
}
