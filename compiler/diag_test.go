package compiler

import (
	"strings"
	"testing"
)

func TestRootPlaces(t *testing.T) {
	join := JoinRoot("policy")
	cases := []struct{ in, want string }{
		{`shadowed by deny_list[0] "get_*" (a.cue:3:4), which`, `shadowed by deny_list[0] "get_*" (policy/a.cue:3:4), which`},
		{`(a.cue:1:2 and b.cue:3:4)`, `(policy/a.cue:1:2 and policy/b.cue:3:4)`},
		{`by allow_list entry "x" at policy.cue:5: an ask`, `by allow_list entry "x" at policy/policy.cue:5: an ask`},
		{`raise it in policyc.cue.`, `raise it in policy/policyc.cue.`},
		{`the catalogue of github (catalog/github.json)`, `the catalogue of github (policy/catalog/github.json)`},
		{`a.cue:7 begins the text`, `policy/a.cue:7 begins the text`},
		// An author's value, an absolute path, git's REV:path and a longer
		// word are not places relative to the root.
		{`pattern "x.cue:1" matches nothing`, `pattern "x.cue:1" matches nothing`},
		{`see /srv/p/a.cue:3 and HEAD:p/a.cue:3`, `see /srv/p/a.cue:3 and HEAD:p/a.cue:3`},
		{`a.cue:3:4x and a.cuex and mcp_servers.github`, `a.cue:3:4x and a.cuex and mcp_servers.github`},
		{``, ``},
	}
	for _, tc := range cases {
		if got := RootPlaces(tc.in, join); got != tc.want {
			t.Errorf("RootPlaces(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// A diagnostic printed under a root names its own file and every place in
// its message and suggestion the same way; "" and "." change nothing.
func TestFormatRootsEveryPlace(t *testing.T) {
	d := Diagnostic{Pos: Position{File: "b.cue", Line: 3, Column: 5}, Code: "type-error", Severity: Error,
		Message:    `x: set in two places to different values, "a" (a.cue:2:5) and "b" (b.cue:3:5)`,
		Suggestion: "keep the one in a.cue"}
	want := `p/q/b.cue:3:5: error[type-error]: x: set in two places to different values, "a" (p/q/a.cue:2:5) and "b" (p/q/b.cue:3:5)` + "\n\tkeep the one in p/q/a.cue"
	if got := d.Format("p/q"); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	for _, root := range []string{"", "."} {
		if got := d.Format(root); !strings.HasPrefix(got, "b.cue:3:5: ") || !strings.Contains(got, `(a.cue:2:5)`) {
			t.Errorf("Format(%q) = %s", root, got)
		}
	}
}

// Joining nothing changes nothing, whatever the text.
func FuzzRootPlaces(f *testing.F) {
	for _, s := range []string{"(a.cue:1:2 and b.cue:3:4)", "x.json", "a.cue:", "..cue", "\"q.cue\"", "(é.cue:1)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := RootPlaces(s, func(file string) string { return file }); got != s {
			t.Fatalf("RootPlaces(%q) with no root = %q", s, got)
		}
		rooted := RootPlaces(s, func(file string) string { return "r/" + file })
		if strings.ReplaceAll(rooted, "r/", "") != strings.ReplaceAll(s, "r/", "") {
			t.Fatalf("RootPlaces(%q) = %q: more than file names changed", s, rooted)
		}
	})
}
