// Package suggest finds the name a misspelt one was meant to be: every
// "did you mean" of policyc comes from here.
package suggest

import (
	"sort"
	"unicode/utf8"
)

// Suggest returns the candidate closest to name when it is close enough to
// be a misspelling of it, else "". A candidate that extends name (allow →
// allow_list, a name cut short) wins outright, the shortest first. Else a
// candidate that name extends, at any distance, and the nearest within a
// small edit distance compete, and the one of fewer edits wins (state_dirr
// is state_dir, not state); on a tie, the one name extends.
func Suggest(name string, candidates []string) string {
	if name == "" {
		return ""
	}
	best, bestD := "", -1
	for _, k := range candidates {
		if len(k) > len(name) && hasPrefix(k, name) && (best == "" || len(k) < len(best)) {
			best = k
		}
	}
	if best != "" {
		return best
	}
	for _, k := range candidates {
		if k != "" && hasPrefix(name, k) {
			// The edit distance of a prefix is the difference in length.
			d := utf8.RuneCountInString(name) - utf8.RuneCountInString(k)
			if bestD < 0 || d < bestD {
				best, bestD = k, d
			}
		}
	}
	if near := Nearest(name, candidates, 1); len(near) > 0 {
		if bestD < 0 || editDistance(name, near[0], bestD) < bestD {
			return near[0]
		}
	}
	return best
}

func hasPrefix(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }

// MaxNameRunes is the longest name Nearest looks for a misspelling of.
// The edit distance of a name of r runes costs r × (2×limit+1) cells per
// candidate at most, and the limit grows with the name (a third of it), so
// the cost still grows with the square of the name, which a catalogue of
// long tool names would turn into minutes of lint. No one misspells a name of more than 256
// characters by hand (MCP advises tool names of at most 128), and such a
// name is reported all the same, only without a "did you mean". Up to it,
// a candidate costs at most 256 × 256 cells.
const MaxNameRunes = 256

// Nearest returns up to n candidates closest to name by edit distance,
// nearest first, among those close enough to be a misspelling of it:
// within max(2, len(name)/3) edits. A name of more than MaxNameRunes runes
// has none.
func Nearest(name string, candidates []string, n int) []string {
	if n <= 0 || utf8.RuneCountInString(name) > MaxNameRunes {
		return nil
	}
	limit := max(2, len(name)/3)
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	bound := limit // the most edits a candidate may still have to be kept
	for _, c := range candidates {
		if d := editDistance(name, c, bound); d <= bound {
			cs = append(cs, cand{c, d})
			if len(cs) >= n {
				// A later candidate must be nearer than the n-th nearest
				// so far to be kept (ties keep the earlier ones).
				sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
				cs = cs[:n]
				if bound = cs[n-1].d - 1; bound < 0 {
					break
				}
			}
		}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
	var out []string
	for i := 0; i < len(cs) && i < n; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

// editDistance is the Levenshtein distance of a and b in runes, or
// limit+1 when it is more than limit. Only the cells of the band within
// limit of the diagonal are computed: a path through a cell further off
// has more than limit edits. The cost is len(a) × (2×limit+1), not
// len(a) × len(b).
func editDistance(a, b string, limit int) int {
	ra, rb := []rune(a), []rune(b)
	if d := len(ra) - len(rb); d > limit || -d > limit {
		return limit + 1
	}
	// A common prefix or suffix changes no distance.
	for len(ra) > 0 && len(rb) > 0 && ra[0] == rb[0] {
		ra, rb = ra[1:], rb[1:]
	}
	for len(ra) > 0 && len(rb) > 0 && ra[len(ra)-1] == rb[len(rb)-1] {
		ra, rb = ra[:len(ra)-1], rb[:len(rb)-1]
	}
	over := limit + 1 // any distance more than limit
	// prev and cur are rows of the table; a cell outside the band holds
	// over, which is as good as any distance more than limit.
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = min(j, over)
	}
	for i := 1; i <= len(ra); i++ {
		lo, hi := max(1, i-limit), min(len(rb), i+limit)
		if lo == 1 {
			cur[0] = min(i, over)
		} else {
			cur[lo-1] = over
		}
		best := cur[lo-1]
		// The band's cells: up[k] is above q[k+1], up[k+1] above and
		// to the left of it, q[k] left of it, and r[k] the rune of b.
		up, q, r, ai := prev[lo-1:hi+1], cur[lo-1:hi+1], rb[lo-1:hi], ra[i-1]
		for k, bj := range r {
			d := up[k]
			if ai != bj {
				d++
			}
			d = min(d, up[k+1]+1, q[k]+1)
			q[k+1] = d
			best = min(best, d)
		}
		if hi < len(rb) {
			cur[hi+1] = over // read as the cell above by the next row
		}
		if best > limit {
			return over
		}
		prev, cur = cur, prev
	}
	return min(prev[len(rb)], over)
}
