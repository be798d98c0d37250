package compiler_test

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/policyc/policyc/compiler"
)

// TestFieldMarkersEveryInput: the lint and gateway configurations are read
// by the same loader as policies, and a key written with ? or ! is refused
// in them too, at the key, instead of being left out (for a required key,
// instead of being called missing).
func TestFieldMarkersEveryInput(t *testing.T) {
	for _, tc := range []struct {
		pkg, def, src, noun, path string
	}{
		{"policyc", "#LintConfig", "package policyc\n\nfail_level?: \"warning\"\n", "the lint configuration", "fail_level"},
		{"gateway", "#Gateway", `package gateway

table!: "t.json"
trust: ["ci.pub"]
state_dir: "."
upstreams: web: url: "https://x.example/mcp"
front: stdio: principal: "dev"
`, "a gateway configuration", "table"},
	} {
		t.Run(tc.def, func(t *testing.T) {
			ev := Evaluate([]File{{Name: "c.cue", Data: []byte(tc.src)}}, tc.pkg, tc.def)
			if len(ev.Diagnostics) != 1 {
				t.Fatalf("want one diagnostic, got %v", ev.Diagnostics)
			}
			d := ev.Diagnostics[0]
			if d.Pos != (Position{File: "c.cue", Line: 3, Column: 1}) || d.Code != CodeUnknownKey || d.Path != tc.path ||
				!strings.Contains(d.Message, "have no meaning in "+tc.noun) || !strings.HasPrefix(d.Suggestion, "remove the ") {
				t.Errorf("got %s: %+v", d.Pos, d)
			}
		})
	}
}

// A syntax problem is reported once at its place: the scanner names a NUL
// outside a string twice.
func TestSyntaxErrorOncePerPlace(t *testing.T) {
	res := Compile(Input{Files: []File{{Name: "a.cue", Data: []byte("package policy\n\nx\x00: 1\n")}}})
	var got []string
	for _, d := range res.Diagnostics {
		got = append(got, d.Format(""))
	}
	if len(got) != 1 || got[0] != "a.cue:3:2: error[syntax-error]: illegal character NUL" {
		t.Errorf("diagnostics %q, want the NUL once", got)
	}
}

// TestManyUnknownKeys: every unknown key is reported once, at the key, and
// nothing under it (its list entries and keys) is reported again, however
// many there are.
func TestManyUnknownKeys(t *testing.T) {
	const n = 3000
	var src strings.Builder
	src.WriteString("package policy\n\nmcp_servers: github: access: tool: {\n\tallow_list: [\"get_*\"]\n")
	for i := range n {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&src, "\tbogus_%d: 1\n", i)
		case 1:
			fmt.Fprintf(&src, "\tbogus_%d: [1, \"x\"]\n", i)
		default:
			fmt.Fprintf(&src, "\tbogus_%d: {a: 1, b: [2]}\n", i)
		}
	}
	src.WriteString("}\n")
	ev := Evaluate([]File{{Name: "p.cue", Data: []byte(src.String())}}, PackageName, "#Policy")
	if len(ev.Diagnostics) != n {
		t.Fatalf("%d diagnostics, want %d", len(ev.Diagnostics), n)
	}
	for i, d := range ev.Diagnostics {
		want := fmt.Sprintf("mcp_servers.github.access.tool.bogus_%d: unknown key \"bogus_%d\"", i, i)
		if d.Code != CodeUnknownKey || d.Pos.Line != 5+i || d.Pos.Column != 2 || d.Message != want {
			t.Fatalf("diagnostic %d: %v %s %q, want unknown-key at 5+%d:2 %q", i, d.Pos, d.Code, d.Message, i, want)
		}
	}
}
