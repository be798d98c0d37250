package compiler_test

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/policygen"
)

// reachDiags compiles a one-file policy and returns its diagnostics of the
// given code.
func reachDiags(t *testing.T, src, code string) []Diagnostic {
	t.Helper()
	res := Compile(Input{Files: []File{{Name: "p.cue", Data: []byte("package policy\n\n" + src)}}})
	if res.Policy == nil {
		t.Fatalf("policy did not compile: %v", res.Diagnostics)
	}
	var out []Diagnostic
	for _, d := range res.Diagnostics {
		if d.Code == code {
			out = append(out, d)
		}
	}
	return out
}

func wantOne(t *testing.T, ds []Diagnostic, line int, contains ...string) {
	t.Helper()
	if len(ds) != 1 {
		t.Fatalf("want one finding at line %d, got %d: %v", line, len(ds), ds)
	}
	if ds[0].Pos.Line != line {
		t.Errorf("finding at line %d, want %d: %s", ds[0].Pos.Line, line, ds[0].Message)
	}
	for _, c := range contains {
		if !strings.Contains(ds[0].Message, c) {
			t.Errorf("message %q does not contain %q", ds[0].Message, c)
		}
	}
}

const reachChannels = `approval_channels: page: approvals_page: {}
global: access: tool: approval_channel: "page"
`

func TestShadowedByUnion(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lists    string
		line     int
		contains []string
	}{
		{"star covers literal", `deny_list: ["get_*"]
	allow_list: ["get_issue"]`, 7, []string{`"get_issue" is wholly shadowed by`, `deny_list[0] "get_*" (p.cue:6:14)`}},
		{"star covers ?", `deny_list: ["get_*"]
	allow_list: ["get_?ssue"]`, 7, []string{`"get_?ssue"`, `"get_*"`}},
		{"union of classes", `deny_list: ["[a-m]*", "[n-z]*"]
	allow_list: ["[a-z]x"]`, 7, []string{`deny_list[0] "[a-m]*"`, `deny_list[1] "[n-z]*"`}},
		{"approval behind a deny", `deny_list: ["merge_*"]
	approval_list: ["merge_pull_request"]`, 7, []string{"the human is never asked"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := reachChannels + "mcp_servers: s: access: tool: {\n\t" + tc.lists + "\n}\n"
			wantOne(t, reachDiags(t, src, CodeShadowedRule), tc.line, tc.contains...)
		})
	}
}

func TestNotShadowed(t *testing.T) {
	for _, lists := range []string{
		// get_* does not cover *_issue: list_issue escapes it.
		`deny_list: ["get_*"]
	allow_list: ["*_issue"]`,
		// [a-m]* alone does not cover [a-z]x.
		`deny_list: ["[a-m]*"]
	allow_list: ["[a-z]x"]`,
		// A later rule does not shadow an earlier one.
		`allow_list: ["get_issue", "get_*"]`,
	} {
		src := "mcp_servers: s: access: tool: {\n\t" + lists + "\n}\n"
		if ds := reachDiags(t, src, CodeShadowedRule); len(ds) != 0 {
			t.Errorf("%s: unexpected %v", lists, ds)
		}
	}
}

// TestPartlyShadowed: a rule that loses some names to an earlier rule of
// another effect is reported with one name it keeps and one it loses, both
// written as a person would (wildcards filled, no empty path segments),
// unless the earlier rule is a deny carved out of it.
func TestPartlyShadowed(t *testing.T) {
	for _, tc := range []struct {
		name, block string
		line        int // 0: no finding
		contains    []string
	}{
		{"a deny overlapping an allow in part", `tool: {
	deny_list: ["get_*"]
	allow_list: ["*_issue"]
}`, 7, []string{`"*_issue" is partly shadowed: it still decides "a_issue", but "get_issue" goes to`, `deny_list[0] "get_*"`}},
		{"an approval taking names from an allow", `tool: {
	approval_list: ["delete_*"]
	allow_list: ["*"]
	approval_channel: "page"
}`, 7, []string{`"*" is partly shadowed: it still decides "a", but "delete_a" goes to`, `approval_list[0] "delete_*"`}},
		{"a deny carved out of an allow", `resource: {
	allow_list: ["file:///srv/projects/*"]
	deny_list: ["file:///srv/projects/*/.env", "file:///srv/projects/*/secrets/*"]
}`, 0, nil},
		{"a literal deny carved out of an allow", `tool: {
	allow_list: ["get_*"]
	deny_list: ["get_secret"]
}`, 0, nil},
		{"a deny carved out of an approval", `tool: {
	approval_list: ["delete_*"]
	deny_list: ["delete_repository"]
	approval_channel: "page"
}`, 0, nil},
		{"a carve-out beside an approval that takes names", `tool: {
	deny_list: ["delete_*_branch"]
	approval_list: ["create_*"]
	allow_list: ["*_branch"]
	approval_channel: "page"
}`, 8, []string{`"*_branch" is partly shadowed: it still decides "a_branch", but "create_branch" goes to`, `approval_list[0] "create_*"`}},
		{"overlap within one list", `tool: allow_list: ["get_*", "*_issue"]`, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := reachChannels + "mcp_servers: s: access: " + tc.block + "\n"
			ds := reachDiags(t, src, CodePartlyShadowed)
			if tc.line == 0 {
				if len(ds) != 0 {
					t.Errorf("unexpected %v", ds)
				}
				return
			}
			wantOne(t, ds, tc.line, tc.contains...)
		})
	}
}

func TestDuplicateAndEmpty(t *testing.T) {
	src := "mcp_servers: s: access: tool: {\n\tdeny_list: [\"x\"]\n\tallow_list: [\"y\", \"x\", \"y\"]\n}\n"
	ds := reachDiags(t, src, CodeDuplicatePattern)
	if len(ds) != 2 || !strings.Contains(ds[0].Message, "already listed at mcp_servers.s.access.tool.deny_list[0] (p.cue:4:14)") {
		t.Fatalf("want two duplicates, the first naming deny_list: %v", ds)
	}
	src = "mcp_servers: s: access: tool: deny_list: [\"[!\\u0000-\\U0010FFFF]x\"]\n"
	res := Compile(Input{Files: []File{{Name: "p.cue", Data: []byte("package policy\n\n" + src)}}})
	var found bool
	for _, d := range res.Diagnostics {
		found = found || d.Code == CodeEmptyPattern && d.Severity == Error
	}
	if !found || res.Table != nil {
		t.Fatalf("an empty pattern must be an error that stops compilation: %v", res.Diagnostics)
	}
}

func TestApprovalNeverAsked(t *testing.T) {
	src := reachChannels + `global: access: tool: deny_list: ["merge_*"]
mcp_servers: s: access: tool: approval_list: ["merge_pr", "close_*"]
`
	wantOne(t, reachDiags(t, src, CodeApprovalNeverAsked), 6,
		`approval_list[0]: "merge_pr" is never held for approval`, `denied by global.access.tool.deny_list[0] "merge_*"`)
	// A global allow_list restricts too: names off it are denied.
	src = reachChannels + `global: access: tool: allow_list: ["get_*"]
mcp_servers: s: access: tool: approval_list: ["merge_pr"]
`
	wantOne(t, reachDiags(t, src, CodeApprovalNeverAsked), 6, `not on global.access.tool.allow_list`)
}

func TestAllowNeverAllows(t *testing.T) {
	src := reachChannels + `global: access: tool: approval_list: ["*"]
mcp_servers: s: access: tool: allow_list: ["get_*"]
`
	wantOne(t, reachDiags(t, src, CodeAllowNeverAllows), 6, `"get_*" never allows anything`, "held for approval by global")
}

func TestNarrowingNoEffect(t *testing.T) {
	// A group cannot allow what its server denies.
	src := `mcp_servers: s: access: tool: allow_list: ["get_*"]
groups: ops: {
	members: ["alice"]
	mcp_servers: s: access: tool: allow_list: ["get_*", "delete_repo"]
}
`
	wantOne(t, reachDiags(t, src, CodeNarrowingNoEffect), 6, `"delete_repo" cannot widen access`, "tool default of s")
	// A group approval of what the server already holds changes nothing.
	src = reachChannels + `mcp_servers: s: access: tool: approval_list: ["merge_*"]
groups: ops: {
	members: ["alice"]
	mcp_servers: s: access: tool: approval_list: ["merge_pr"]
}
`
	wantOne(t, reachDiags(t, src, CodeNarrowingNoEffect), 8, "already held for approval")
	// A group approval of what the server allows is a real narrowing.
	src = reachChannels + `mcp_servers: s: access: tool: allow_list: ["merge_*"]
groups: ops: {
	members: ["alice"]
	mcp_servers: s: access: tool: approval_list: ["merge_pr"]
}
`
	if ds := reachDiags(t, src, CodeNarrowingNoEffect); len(ds) != 0 {
		t.Errorf("unexpected %v", ds)
	}
}

func TestRedundantDenyAndEmptyGroup(t *testing.T) {
	src := `mcp_servers: s: access: tool: allow_list: ["get_*"]
global: access: tool: deny_list: ["delete_*", "get_secret"]
groups: nobody: {
	members: []
	global: access: tool: deny_list: ["get_x"]
}
`
	wantOne(t, reachDiags(t, src, CodeRedundantDeny), 4, `"delete_*" changes no decision today`)
	wantOne(t, reachDiags(t, src, CodeEmptyGroup), 7, "groups.nobody has no members: its rules apply only to principals whose access token names the group")
}

func TestUIResourceDenied(t *testing.T) {
	src := reachChannels + `mcp_servers: s: {
	access: resource: allow_list: ["ui://*", "repo://*"]
	ui: {
		allow_list: ["ui://s/app.html"]
		consent_channel: "page"
	}
}
`
	wantOne(t, reachDiags(t, src, CodeUIResourceDenied), 6, `"ui://*" admits ui:// URIs that mcp_servers.s.ui does not allowlist`)
	// With no ui allowlist at all, an allow entry of only ui:// URIs never
	// allows anything.
	src = `mcp_servers: s: access: resource: allow_list: ["ui://s/*"]
`
	wantOne(t, reachDiags(t, src, CodeUIResourceDenied), 3, "never allows anything")
	// Entries inside the ui allowlist are fine.
	src = reachChannels + `mcp_servers: s: {
	access: resource: allow_list: ["ui://s/app*"]
	ui: {
		allow_list: ["ui://s/"]
		consent_channel: "page"
	}
}
`
	if ds := reachDiags(t, src, CodeUIResourceDenied); len(ds) != 0 {
		t.Errorf("unexpected %v", ds)
	}
}

func TestApprovalTimeouts(t *testing.T) {
	explicit := reachChannels + `mcp_servers: s: access: tool: {
	approval_list: ["merge_*"]
	approval_timeout_seconds: 600
}
`
	if ds := reachDiags(t, explicit, CodeApprovalTimeout); len(ds) != 0 {
		t.Errorf("a request of 600 s is within the default limit: %v", ds)
	}
	long := reachChannels + `mcp_servers: s: access: tool: {
	approval_list: ["merge_*"]
	approval_timeout_seconds: 86400
}
`
	wantOne(t, reachDiags(t, long, CodeApprovalTimeout), 7, "live up to 86400 s", "longer than the 28800 s this repository allows")
	implicit := reachChannels + `mcp_servers: s: access: tool: approval_list: ["merge_*"]
`
	res := Compile(Input{Files: []File{{Name: "p.cue", Data: []byte("package policy\n\n" + implicit)}}})
	wantOne(t, ApprovalTimeoutDiagnostics(res.Policy, 600), 5, "live up to 900 s (approval_timeout_seconds is not set)")
	// A shorter global timeout applies to every server.
	short := `approval_channels: page: approvals_page: {}
global: access: tool: {
	approval_channel: "page"
	approval_timeout_seconds: 45
}
mcp_servers: s: access: tool: approval_list: ["merge_*"]
`
	res = Compile(Input{Files: []File{{Name: "p.cue", Data: []byte("package policy\n\n" + short)}}})
	if ds := ApprovalTimeoutDiagnostics(res.Policy, 60); len(ds) != 0 {
		t.Errorf("unexpected %v", ds)
	}
	// The limit is an option.
	res = Compile(Input{Files: []File{{Name: "p.cue", Data: []byte("package policy\n\n" + explicit)}}})
	if ds := ApprovalTimeoutDiagnostics(res.Policy, 600); len(ds) != 0 {
		t.Errorf("600 s is within a 600 s limit: %v", ds)
	}
	if ds := ApprovalTimeoutDiagnostics(res.Policy, 599); len(ds) != 1 {
		t.Errorf("600 s exceeds a 599 s limit: %v", ds)
	}
	// A group with no members holds no one's calls.
	nobody := reachChannels + `mcp_servers: s: access: tool: allow_list: ["*"]
groups: nobody: {
	members: []
	global: access: tool: approval_list: ["merge_*"]
}
`
	if ds := reachDiags(t, nobody, CodeApprovalTimeout); len(ds) != 0 {
		t.Errorf("unexpected %v", ds)
	}
	// No approvals, no finding, whatever the timeout.
	none := `mcp_servers: s: access: tool: approval_timeout_seconds: 900
`
	if ds := reachDiags(t, none, CodeApprovalTimeout); len(ds) != 0 {
		t.Errorf("unexpected %v", ds)
	}
}

func TestReachOnExamplePolicyIsLinear(t *testing.T) {
	// Not a timing test: the analysis must visit each rule once per class
	// and server it applies to, which RuleReach counts reflect.
	g := policygen.Generate(policygen.Spec{Servers: 10, RulesPerServer: 20, Seed: 3})
	res := Compile(Input{Files: g.Files})
	r := AnalyzeReach(res.Policy, ReachOptions{})
	if len(r.Rules) != g.Rules {
		t.Fatalf("%d verdicts for %d rules", len(r.Rules), g.Rules)
	}
	for _, rr := range r.Rules {
		if rr.Status == ReachUnknown {
			t.Errorf("%s %q: undecided", rr.Path, rr.Entry.Pattern)
		}
	}
}

// BenchmarkReach measures the analysis alone on generated policies of 50
// tool rules per server (about 60% globs, deny, approval and allow mixed).
func BenchmarkReach(b *testing.B) {
	for _, servers := range []int{20, 50, 100, 200} {
		g := policygen.Generate(policygen.Spec{Servers: servers, RulesPerServer: 50, Seed: 1})
		res := Compile(Input{Files: g.Files})
		if res.Policy == nil {
			b.Fatalf("generated policy does not compile: %v", res.Diagnostics)
		}
		b.Run(fmt.Sprintf("rules=%d", g.Rules), func(b *testing.B) {
			for b.Loop() {
				AnalyzeReach(res.Policy, ReachOptions{})
			}
		})
	}
}

// BenchmarkReachLongList measures the analysis of one block of 20,000
// literal tool names among a few globs: a name's first rule is found
// through the block's literals by name and its globs, not rule by rule.
//
//	go test ./compiler -run '^$' -bench ReachLongList
func BenchmarkReachLongList(b *testing.B) {
	var names []string
	for i := range 20000 {
		names = append(names, fmt.Sprintf("%q", fmt.Sprintf("t%05d", i)))
	}
	src := fmt.Sprintf(`package policy

mcp_servers: s: access: tool: {
	deny_list: ["drop_*", "rm_*"]
	allow_list: [%s, "get_*"]
}
`, strings.Join(names, ", "))
	res := Compile(Input{Files: []File{{Name: "long.cue", Data: []byte(src)}}})
	if res.Policy == nil {
		b.Fatalf("the benchmark policy does not compile: %v", res.Diagnostics)
	}
	for b.Loop() {
		AnalyzeReach(res.Policy, ReachOptions{})
	}
}

// Rules whose search passes glob.MaxWitnessStates get no verdict, and one
// reach-incomplete warning says so at the first, with how many there are.
func TestReachIncompleteOnce(t *testing.T) {
	ds := reachDiags(t, `mcp_servers: github: access: tool: {
	deny_list: ["*v??????????????????????"]
	allow_list: ["*_v??????????????????????", "*-v??????????????????????"]
}
`, CodeReachIncomplete)
	wantOne(t, ds, 5, `allow_list[0]: the analysis could not tell whether "*_v??????????????????????" (and 1 other rule) ever takes effect: a search over the patterns of its block passed 200000 states`)
	if ds[0].Severity != Warning || ds[0].Path != "mcp_servers.github.access.tool.allow_list[0]" {
		t.Errorf("severity %v, path %q", ds[0].Severity, ds[0].Path)
	}
}

// Once the analysis has spent its budget, the rules left get no verdict,
// and the warning says why; with the default budget the same policy is
// settled in full.
func TestReachBudget(t *testing.T) {
	gen := policygen.Generate(policygen.Spec{Servers: 5, RulesPerServer: 20, Seed: 1})
	res := Compile(Input{Files: gen.Files})
	if res.Policy == nil {
		t.Fatalf("the generated policy did not compile: %v", res.Diagnostics)
	}
	count := func(r *ReachResult) (unknown int, found []Diagnostic) {
		for _, rr := range r.Rules {
			if rr.Status == ReachUnknown {
				unknown++
			}
		}
		for _, d := range r.Diagnostics {
			if d.Code == CodeReachIncomplete {
				found = append(found, d)
			}
		}
		return unknown, found
	}
	if unknown, found := count(AnalyzeReach(res.Policy, ReachOptions{})); unknown != 0 || len(found) != 0 {
		t.Fatalf("with the default budget: %d rules unknown, findings %v", unknown, found)
	}
	unknown, found := count(AnalyzeReach(res.Policy, ReachOptions{Budget: 50}))
	if unknown == 0 || len(found) != 1 || !strings.Contains(found[0].Message, "the analysis used up the work it may do on one policy") ||
		!strings.Contains(found[0].Message, fmt.Sprintf("(and %d other rules)", unknown-1)) {
		t.Fatalf("with a budget of 50: %d rules unknown, findings %v", unknown, found)
	}
}

// BenchmarkReachStarList measures the analysis of a list of 300 *x*
// patterns after a "?", each x a rune of its own: every rule is searched
// against all before it. A search skips the states where an earlier
// pattern has matched for good; without that the analysis spends its whole
// budget and leaves rules unsettled (docs/performance.md has the figures).
//
//	go test ./compiler -run '^$' -bench ReachStarList
func BenchmarkReachStarList(b *testing.B) {
	entries := []string{`"?"`}
	for i := range 300 {
		entries = append(entries, fmt.Sprintf("%q", "*"+string(rune(0x4e00+i))+"*"))
	}
	src := "package policy\n\nmcp_servers: s: access: tool: allow_list: [" + strings.Join(entries, ", ") + "]\n"
	res := Compile(Input{Files: []File{{Name: "stars.cue", Data: []byte(src)}}})
	if res.Policy == nil {
		b.Fatalf("the benchmark policy does not compile: %v", res.Diagnostics)
	}
	for b.Loop() {
		r := AnalyzeReach(res.Policy, ReachOptions{})
		for _, rr := range r.Rules {
			if rr.Status == ReachUnknown {
				b.Fatal("a rule was left unsettled")
			}
		}
	}
}
