package compiler

import "github.com/policyc/policyc/internal/suggest"

// Suggest returns the candidate closest to name when it is close enough to
// be a misspelling of it, else "" (see internal/suggest).
func Suggest(name string, candidates []string) string { return suggest.Suggest(name, candidates) }

// Nearest returns up to n candidates closest to name by edit distance,
// nearest first, among those close enough to be a misspelling of it (see
// internal/suggest).
func Nearest(name string, candidates []string, n int) []string {
	return suggest.Nearest(name, candidates, n)
}
