package glob

import (
	"errors"
	"strings"
	"testing"
)

const tooLong = "more than 4096 characters, the most a pattern may have (match a shorter part of the name, ending with *)"

func TestParseErrors(t *testing.T) {
	tests := []struct {
		pattern string
		offset  int
		msg     string
	}{
		{"", 0, "empty pattern"},
		{"get_[", 4, "unclosed character class"},
		{"é[", 2, "unclosed character class"},
		{"[]", 0, "unclosed character class"},
		{"[!]", 0, "unclosed character class"},
		{"[^]", 0, "unclosed character class"},
		{"a[bc", 1, "unclosed character class"},
		{"[a-", 0, "unclosed character class"},
		{`a\`, 1, "trailing backslash"},
		{`\`, 0, "trailing backslash"},
		{`x[a\`, 3, "trailing backslash"},
		{`[a-\`, 3, "trailing backslash"},
		{"[z-a]", 1, "invalid character class range 'z'-'a'"},
		{"ab[xc-a]", 4, "invalid character class range 'c'-'a'"},
		{`[a-\]]`, 1, "invalid character class range 'a'-']'"},
		{"[ü-é]", 1, "invalid character class range 'ü'-'é'"},
		{"a\xffb", 1, "invalid UTF-8"},
		{"[\xc3]", 1, "invalid UTF-8"},
		{"ok\xed\xa0\x80", 2, "invalid UTF-8"}, // an encoded surrogate
		// Elements count, not bytes: an escape, a class and a rune of
		// several bytes are one each, and ** is one star.
		{strings.Repeat("a", MaxPatternLen) + "*", MaxPatternLen, tooLong},
		{strings.Repeat(`\*`, MaxPatternLen) + "b", 2 * MaxPatternLen, tooLong},
		{strings.Repeat("é", MaxPatternLen-1) + "[ab]?", 2*(MaxPatternLen-1) + 4, tooLong},
		{strings.Repeat("a**", MaxPatternLen/2) + "x", 3 * MaxPatternLen / 2, tooLong},
	}
	for _, tt := range tests {
		p, err := Parse(tt.pattern)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %v, %v; want *SyntaxError", tt.pattern, p, err)
			continue
		}
		if se.Pattern != tt.pattern || se.Offset != tt.offset || se.Msg != tt.msg {
			t.Errorf("Parse(%q) error = %+v; want offset %d, msg %q", tt.pattern, *se, tt.offset, tt.msg)
		}
	}
}

func TestSyntaxErrorString(t *testing.T) {
	_, err := Parse("get_[")
	want := `invalid glob "get_[": unclosed character class at offset 4`
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v; want %s", err, want)
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if _, ok := recover().(*SyntaxError); !ok {
			t.Fatal("MustParse did not panic with a *SyntaxError")
		}
	}()
	MustParse("[")
}

func TestValidSyntax(t *testing.T) {
	for _, s := range []string{"*", "**", "?", "]", "[]]", "[]a]", "[!]]", "[^]a]", "[-]", "[a-]", "[!-]",
		"[]-a]", "[a-c-e]", `[\]]`, `[\-]`, "[[]", `\*`, `\\`, `\[`, "a]b", "[é-ü]", "\uFFFD", "repo://*"} {
		p, err := Parse(s)
		if err != nil {
			t.Errorf("Parse(%q): %v", s, err)
			continue
		}
		if p.String() != s {
			t.Errorf("Parse(%q).String() = %q", s, p.String())
		}
	}
}

func TestLiteral(t *testing.T) {
	tests := []struct {
		pattern string
		lit     string
		ok      bool
	}{
		{"get_issue", "get_issue", true},
		{`a\*b`, "a*b", true},
		{`\\`, `\`, true},
		{`\[x\]`, "[x]", true},
		{"a]b", "a]b", true},
		{`\?é`, "?é", true},
		{"repo://owner/x", "repo://owner/x", true},
		{"a*", "", false},
		{"a?", "", false},
		{"[a]", "", false},
		{"*", "", false},
	}
	for _, tt := range tests {
		lit, ok := MustParse(tt.pattern).Literal()
		if lit != tt.lit || ok != tt.ok {
			t.Errorf("Literal(%q) = %q, %v; want %q, %v", tt.pattern, lit, ok, tt.lit, tt.ok)
		}
	}
}

// matchTests are shared by the Match and Set tests.
var matchTests = []struct {
	pattern string
	name    string
	want    bool
}{
	// Stars cross '/' and ':'; names are opaque.
	{"*", "", true},
	{"*", "a/b:c", true},
	{"**", "", true},
	{"a**b", "ab", true},
	{"get_*", "get_", true},
	{"get_*", "get_issue", true},
	{"get_*", "get_a/b:c", true},
	{"get_*", "Get_issue", false},
	{"get_*", "get", false},
	{"*_issue", "get_issue", true},
	{"*_issue", "get_issues", false},
	{"repo://*", "repo://owner/x", true},
	{"repo://*/x", "repo://a/b/x", true},
	{"a:*", "a:b:c", true},
	{"*:*", "abc", false},
	{"*:*", ":", true},
	{"a*b*c", "abxbxc", true},
	{"a*b*c", "acb", false},
	{"a*b*c", "abcbc", true},
	{"*a*a*", "aa", true},
	{"*a*a*", "bab", false},
	{"*ab", "aab", true},
	{"*ab*ab", "abab", true},
	{"*ab*ab", "ababa", false},
	// ? is one rune, whatever its width.
	{"?", "é", true},
	{"?", "ab", false},
	{"?", "", false},
	{"??", "é", false},
	{"a?c", "a日c", true},
	{"get_?ssue", "get_issue", true},
	{"get_?ssue", "get_ssue", false},
	// Invalid UTF-8 in names: each bad byte is one U+FFFD rune.
	{"?", "\xff", true},
	{"?", "\xff\xfe", false},
	{"??", "\xff\xfe", true},
	{"\uFFFD", "\xff", true},
	{"a\uFFFD", "a\uFFFD", true},
	{"*", "\xed\xa0\x80", true},
	{"???", "\xed\xa0\x80", true}, // an encoded surrogate is three bad bytes
	{"[!a]", "\xff", true},
	{"[a-z]", "\xff", false},
	// Classes.
	{"[abc]", "b", true},
	{"[abc]", "d", false},
	{"[a-c]x", "bx", true},
	{"[a-c]x", "dx", false},
	{"[é-ü]", "ö", true},
	{"[é-ü]", "e", false},
	{"[!a-c]", "d", true},
	{"[!a-c]", "a", false},
	{"[!a-c]", "é", true},
	{"[!a-c]", "", false},
	{"[^a]", "b", true},
	{"[^a]", "a", false},
	{"[]a]", "]", true},
	{"[]a]", "a", true},
	{"[]a]", "b", false},
	{"[!]]", "]", false},
	{"[!]]", "x", true},
	{"[-a]", "-", true},
	{"[a-]", "-", true},
	{"[a-]", "b", false},
	{"[!-]", "-", false},
	{"[a-c-e]", "-", true},
	{"[a-c-e]", "e", true},
	{"[a-c-e]", "d", false},
	{"[]-a]", "_", true},
	{"[[]", "[", true},
	{`[\]]`, "]", true},
	{`[\-a]`, "-", true},
	{"[\uD7FF-\uE000]", "\uD7FF", true},
	{"[\uD7FF-\uE000]", "\uE000", true},
	{"[\uD7FF-\uE000]", "\xed\xa0\x80", false},
	// Escapes.
	{`\*`, "*", true},
	{`\*`, "a", false},
	{`\?`, "?", true},
	{`\?`, "x", false},
	{`\[a]`, "[a]", true},
	{`\[a]`, "a", false},
	{`\\`, `\`, true},
	{`a\*b`, "a*b", true},
	{`a\*b`, "axb", false},
	{"a]b", "a]b", true},
	// Empty patterns match nothing.
	{"[!\x00-\U0010FFFF]", "a", false},
	{"*[!\x00-\U0010FFFF]*", "", false},
}

func TestMatch(t *testing.T) {
	for _, tt := range matchTests {
		if got := MustParse(tt.pattern).Match(tt.name); got != tt.want {
			t.Errorf("Match(%q, %q) = %v; want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestEmpty(t *testing.T) {
	tests := []struct {
		pattern string
		want    bool
	}{
		{"*", false},
		{"[a]", false},
		{"[!a]", false},
		{"[\uD7FF-\uE000]", false},
		{"[!\x00-\U0010FFFF]", true},
		{"a[!\x00-\U0010FFFF]*", true},
		{"[^\x00-\U0010FFFF]", true},
		// Surrogates are in no name, so this class is empty too.
		{"[!\x00-\uD7FF\uE000-\U0010FFFF]", true},
		{"[!\x00-\uD7FF\uE001-\U0010FFFF]", false},
	}
	for _, tt := range tests {
		p := MustParse(tt.pattern)
		if got := p.Empty(); got != tt.want {
			t.Errorf("Empty(%q) = %v; want %v", tt.pattern, got, tt.want)
		}
		if _, ok := Example(p); ok == tt.want {
			t.Errorf("Example(%q) ok = %v; want %v", tt.pattern, ok, !tt.want)
		}
	}
	if !MustParse("[!\x00-\uD7FF\uE001-\U0010FFFF]").Match("\uE000") {
		t.Error("[!\\x00-\\uD7FF\\uE001-\\U0010FFFF] does not match U+E000")
	}
}

func TestMatchAllocs(t *testing.T) {
	p := MustParse("*a*[!b]?c*")
	if n := testing.AllocsPerRun(100, func() { p.Match("xaxaybzzcaaaaaaaaaaaaaa") }); n != 0 {
		t.Errorf("Match allocates %v times", n)
	}
}

// A pattern of MaxPatternLen elements parses, however many bytes they
// take; the message of one too long quotes only its start.
func TestParseLongest(t *testing.T) {
	for _, s := range []string{strings.Repeat("a", MaxPatternLen), strings.Repeat(`\[`, MaxPatternLen), strings.Repeat("é*", MaxPatternLen/2)} {
		if _, err := Parse(s); err != nil {
			t.Errorf("Parse of %d bytes: %v", len(s), err)
		}
	}
	_, err := Parse(strings.Repeat("é", 10<<20))
	if got, want := err.Error(), `invalid glob "`+strings.Repeat("é", 30)+`"… (20971520 bytes): `+tooLong+` at offset 8192`; got != want {
		t.Errorf("the error is %.300q…, want %q", got, want)
	}
}
