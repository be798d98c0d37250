package termsafe

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"claude-code 2.1", "claude-code 2.1"},
		{"", ""},
		{"café ☕ 数据 ❤\ufe0f", "café ☕ 数据 ❤\ufe0f"}, // letters, symbols, an emoji's variation selector
		{`C:\temp\x1b`, `C:\temp\x1b`},             // a spelt-out escape stays as written
		{"a\x1b[2Kb", `a\x1b[2Kb`},                 // ESC
		{"a\rb\nc\td", `a\x0db\x0ac\x09d`},         // CR, LF, TAB
		{"\x00\x07\x7f", `\x00\x07\x7f`},           // NUL, BEL, DEL
		{"\u009b31m\u0085", `\u009b31m\u0085`},     // C1: CSI, NEL
		{"abc\u202edcba", `abc\u202edcba`},         // RLO
		{"\u202a\u202b\u202c\u202d", `\u202a\u202b\u202c\u202d`},
		{"\u2066\u2067\u2068\u2069", `\u2066\u2067\u2068\u2069`}, // isolates
		{"\u200e\u200f\u061c", `\u200e\u200f\u061c`},             // marks
		{"a\u200bb\u200dc\u2060d\ufeff", `a\u200bb\u200dc\u2060d\ufeff`},
		{"soft\u00adhyphen", `soft\u00adhyphen`},
		{"\u3164\u115f\u1160\uffa0\u034f", `\u3164\u115f\u1160\uffa0\u034f`}, // render as nothing
		{"line\u2028para\u2029", `line\u2028para\u2029`},
		{"\U000e0041\U000e007f", `\U000e0041\U000e007f`}, // tags
		{"\ue000", `\ue000`},                             // private use
		{"\U0010fffe", `\U0010fffe`},                     // a noncharacter
		{"bad\xffutf8\xc3", `bad\xffutf8\xc3`},
		{"\u00a0nbsp", "\u00a0nbsp"},
	}
	for _, c := range cases {
		if got := String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// What String returns is safe and stays so: it has no unsafe character and
// no byte that is not UTF-8, and String leaves it as it is.
func TestStringSafe(t *testing.T) {
	var all strings.Builder
	for r := rune(0); r < 0x3000; r++ {
		all.WriteRune(r)
	}
	all.WriteString("\U000e0001\U0010ffff\xff\xfe")
	out := String(all.String())
	if !utf8.ValidString(out) {
		t.Fatal("the output is not UTF-8")
	}
	for _, r := range out {
		if Unsafe(r) {
			t.Fatalf("the output holds %U", r)
		}
	}
	if again := String(out); again != out {
		t.Fatal("String of its own output changed it")
	}
}

func TestStringDoesNotCopySafeText(t *testing.T) {
	s := strings.Repeat("github / merge_pull_request ", 10)
	if n := testing.AllocsPerRun(100, func() { _ = String(s) }); n != 0 {
		t.Fatalf("%v allocations for safe text", n)
	}
}

func TestJSON(t *testing.T) {
	v := map[string]string{"client": "evil\x1b[2K\r\u009b\u202e\x7f\u2028 ok \U000e0041 ☕", "tool": "read_file"}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got := string(JSON(b))
	want := "{\n  \"client\": \"evil\\u001b[2K\\r\\u009b\\u202e\\u007f\\u2028 ok \\udb40\\udc41 ☕\",\n  \"tool\": \"read_file\"\n}"
	if got != want {
		t.Fatalf("JSON:\n%s\nwant\n%s", got, want)
	}
	var back map[string]string
	if err := json.Unmarshal([]byte(got), &back); err != nil || back["client"] != v["client"] {
		t.Fatalf("the escaped JSON reads back as %q (%v), want %q", back["client"], err, v["client"])
	}
	safe := []byte(`{"tool":"read_file"}`)
	if out := JSON(safe); &out[0] != &safe[0] {
		t.Fatal("JSON copied bytes that needed no escape")
	}
}

func FuzzString(f *testing.F) {
	f.Add("a\x1b[2K\r\u202e")
	f.Fuzz(func(t *testing.T, s string) {
		out := String(s)
		if !utf8.ValidString(out) || strings.ContainsFunc(out, Unsafe) {
			t.Fatalf("String(%q) = %q holds an unsafe character", s, out)
		}
		b, _ := json.Marshal(s)
		j := JSON(b)
		var back string
		if err := json.Unmarshal(j, &back); err != nil || back != mustString(b) {
			t.Fatalf("JSON(%s) = %s reads back as %q (%v)", b, j, back, err)
		}
		if strings.ContainsFunc(string(j), Unsafe) {
			t.Fatalf("JSON(%s) = %s holds an unsafe character", b, j)
		}
	})
}

func mustString(b []byte) string {
	var s string
	json.Unmarshal(b, &s)
	return s
}

func BenchmarkString(b *testing.B) {
	for _, c := range []struct{ name, s string }{
		{"safe", "claude-code 2.1.0 (darwin; arm64) github / merge_pull_request"},
		{"attack", "claude-code 2.1\x1b[2K\r\x1b[1A\x1b[2K\rtool:        github / read_file (read-only)\u202e"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				_ = String(c.s)
			}
		})
	}
}
