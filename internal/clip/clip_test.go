package clip

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	long := strings.Repeat("a", 4000)
	for _, tc := range []struct{ in, quote, str string }{
		{"", `""`, ""},
		{"get_*", `"get_*"`, "get_*"},
		{"tab\there", `"tab\there"`, "tab\there"},
		// Max bytes are shown whole, one more is not.
		{strings.Repeat("x", Max), strconv.Quote(strings.Repeat("x", Max)), strings.Repeat("x", Max)},
		{strings.Repeat("x", Max+1), `"` + strings.Repeat("x", Keep) + `"… (81 bytes)`, strings.Repeat("x", Keep) + "… (81 bytes)"},
		{long, `"` + long[:Keep] + `"… (4000 bytes)`, long[:Keep] + "… (4000 bytes)"},
		// A rune is not cut: "é" is two bytes, and the 60th byte starts none.
		{"a" + strings.Repeat("é", 50), `"a` + strings.Repeat("é", 29) + `"… (101 bytes)`, "a" + strings.Repeat("é", 29) + "… (101 bytes)"},
		// Bytes that start no rune: at most three are left out, the rest escaped.
		{strings.Repeat("\x80", 100), `"` + strings.Repeat(`\x80`, Keep-3) + `"… (100 bytes)`, strings.Repeat("\x80", Keep-3) + "… (100 bytes)"},
	} {
		if got := Quote(tc.in); got != tc.quote {
			t.Errorf("Quote(%.20q) = %s, want %s", tc.in, got, tc.quote)
		}
		if got := String(tc.in); got != tc.str {
			t.Errorf("String(%.20q) = %s, want %s", tc.in, got, tc.str)
		}
	}
	for _, r := range []rune{'é', '€', '😀'} {
		for pad := range 4 {
			s := strings.Repeat("a", pad) + strings.Repeat(string(r), 40)
			if got := String(s); !utf8.ValidString(got) {
				t.Errorf("String cuts a rune of %q: %q", s, got)
			}
		}
	}
}
