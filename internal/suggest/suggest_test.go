package suggest

import (
	"slices"
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
		"timeout":      "",
		"":             "",
	} {
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
