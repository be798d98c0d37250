// Package suggest finds the name a misspelt one was meant to be: every
// "did you mean" of policyc comes from here.
package suggest

import "sort"

// Suggest returns the candidate closest to name when it is close enough to
// be a misspelling of it, else "": a candidate that extends name or that
// name extends (allow → allow_list), or the nearest within a small edit
// distance.
func Suggest(name string, candidates []string) string {
	for _, k := range candidates {
		if len(name) > 0 && len(k) > 0 && (hasPrefix(k, name) || hasPrefix(name, k)) {
			return k
		}
	}
	if near := Nearest(name, candidates, 1); len(near) > 0 {
		return near[0]
	}
	return ""
}

func hasPrefix(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }

// Nearest returns up to n candidates closest to name by edit distance,
// nearest first, among those close enough to be a misspelling of it:
// within max(2, len(name)/3) edits.
func Nearest(name string, candidates []string, n int) []string {
	limit := max(2, len(name)/3)
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, c := range candidates {
		if d := editDistance(name, c, limit); d <= limit {
			cs = append(cs, cand{c, d})
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
// limit+1 when it is more than limit.
func editDistance(a, b string, limit int) int {
	ra, rb := []rune(a), []rune(b)
	if d := len(ra) - len(rb); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		best := cur[0]
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			best = min(best, cur[j])
		}
		if best > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return min(prev[len(rb)], limit+1)
}
