package testcase

import (
	"strings"
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/table"
)

const testPolicy = `package policy

defaults: tool: "deny"
approval_channels: page: approvals_page: {}
global: access: tool: approval_channel: "page"
mcp_servers: github: access: {
	tool: {
		allow_list: ["get_*", "list_*"]
		approval_list: ["merge_pull_request"]
		deny_list: ["delete_repository", "get_secret"]
	}
	prompt: allow_list: ["summarize"]
}
groups: contractors: {
	members: ["carol@example.com"]
	mcp_servers: github: access: tool: {
		deny_list: ["merge_pull_request"]
		allow_list: ["get_*"]
	}
}
`

func compileTest(t *testing.T, src string) *compiler.Result {
	t.Helper()
	res := compiler.Compile(compiler.Input{Files: []compiler.File{{Name: "policy.cue", Data: []byte(src)}}, Source: table.Source{PolicyPath: "p"}})
	if res.Table == nil {
		for _, d := range res.Diagnostics {
			t.Log(d.Format(""))
		}
		t.Fatal("the test policy does not compile")
	}
	return res
}

func parseTest(t *testing.T, src string) []*Case {
	t.Helper()
	cases, diags := Parse([]compiler.File{{Name: "tests/a.cue", Data: []byte(src)}})
	for _, d := range diags {
		t.Errorf("unexpected: %s", d.Format(""))
	}
	return cases
}

func formatAll(ds []compiler.Diagnostic) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.Format("") + "\n")
	}
	return b.String()
}

const goodCases = `package tests

cases: github: {
	"anyone reads": {server: "github", name: "get_issue", expect: "allow", rule: "allow_list \"get_*\""}
	"anyone merges": {server: "github", name: "merge_pull_request", expect: "approve", rule: "policy.cue:9"}
	"anyone deletes": {server: "github", name: "delete_repository", expect: "deny"}
	"a prompt": {server: "github", kind: "prompt", name: "summarize", expect: "allow"}
	"nothing matches": {server: "github", name: "fork", expect: "deny", rule: "default"}
}
cases: contractors: {
	[_]: groups: ["contractors"]
	"reads": {server: "github", name: "get_issue", expect: "allow"}
	"lists": {server: "github", name: "list_issues", expect: "deny", rule: "default"}
	"merges": {server: "github", name: "merge_pull_request", expect: "deny", rule: "deny_list \"merge_pull_request\" (group:contractors scope)"}
}
cases: carol: "lists": {principal: "carol@example.com", server: "github", name: "list_issues", expect: "deny"}
`

func TestRunPasses(t *testing.T) {
	res := compileTest(t, testPolicy)
	cases := parseTest(t, goodCases)
	if len(cases) != 9 {
		t.Fatalf("%d cases, want 9", len(cases))
	}
	if ds := Check(cases, res.Table); len(ds) > 0 {
		t.Fatal(formatAll(ds))
	}
	r, err := NewRunner(res.Table, cases)
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Run(cases, true)
	for _, x := range rep.Results {
		if !x.Passed {
			t.Errorf("%s: decided %s (%s at %s), want %s", x.Case.FullName(), x.Decision.Effect, x.Decision.Reason, x.Decision.Origin, x.Case.Expect)
		}
	}
	cov := rep.Coverage(compiler.AnalyzeReach(res.Policy, compiler.ReachOptions{}))
	got := map[string]int{}
	for _, rc := range cov.Rules {
		got[rc.Label()] = rc.Cases
	}
	want := map[string]int{
		`allow_list "get_*" (server scope, tools of github)`:                        2,
		`allow_list "list_*" (server scope, tools of github)`:                       0, // carol and contractors are denied by their scope
		`approval_list "merge_pull_request" (server scope, tools of github)`:        1,
		`deny_list "delete_repository" (server scope, tools of github)`:             1,
		`deny_list "get_secret" (server scope, tools of github)`:                    0,
		`allow_list "summarize" (server scope, prompts of github)`:                  1,
		`deny_list "merge_pull_request" (group:contractors scope, tools of github)`: 1,
		`allow_list "get_*" (group:contractors scope, tools of github)`:             1, // kept contractors' get_issue
	}
	for label, n := range want {
		if got[label] != n {
			t.Errorf("%s decided %d cases, want %d", label, got[label], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("coverage lists %d rules, want %d: %v", len(got), len(want), got)
	}
	if cov.Counted != 8 || cov.Covered != 6 || cov.Percent() != "75.0" {
		t.Errorf("coverage %d of %d (%s%%), want 6 of 8 (75.0%%)", cov.Covered, cov.Counted, cov.Percent())
	}
}

func TestRunFails(t *testing.T) {
	res := compileTest(t, testPolicy)
	cases := parseTest(t, `package tests

cases: github: {
	"wrong effect": {server: "github", name: "get_secret", expect: "allow"}
	"wrong rule": {server: "github", name: "get_issue", expect: "allow", rule: "allow_list \"list_*\""}
}
`)
	if ds := Check(cases, res.Table); len(ds) > 0 {
		t.Fatal(formatAll(ds))
	}
	r, err := NewRunner(res.Table, cases)
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Run(cases, false)
	if rep.Failed != 2 {
		t.Fatalf("%d failed, want 2", rep.Failed)
	}
	first := rep.Results[0]
	if first.Explanation == nil || first.Decision.Effect != table.Deny || first.Decision.Rule.Pattern != "get_secret" {
		t.Fatalf("wrong effect: %+v", first)
	}
	if len(first.Explanation.Beaten) != 1 || first.Explanation.Beaten[0].Rule.Pattern != "get_*" {
		t.Errorf("the explanation does not name the allow it beat: %+v", first.Explanation.Beaten)
	}
	if second := rep.Results[1]; second.Decision.Effect != table.Allow || second.Passed {
		t.Errorf("a case decided by another rule than it names passed: %+v", second)
	}
}

func TestParseProblems(t *testing.T) {
	_, diags := Parse([]compiler.File{{Name: "tests/a.cue", Data: []byte(`package tests

cases: g: {
	"typo": {server: "github", name: "x", expect: "deny", rulle: "default"}
	"kind": {server: "github", kind: "tools", name: "x", expect: "deny"}
	"missing": {server: "github", name: "x"}
	"empty name": {server: "github", name: "", expect: "deny"}
}
`)}})
	got := formatAll(diags)
	for _, want := range []string{
		"tests/a.cue:4:56: error[unknown-key]: cases.g.typo.rulle: unknown key \"rulle\"\n\tdid you mean \"rule\"?",
		`tests/a.cue:5:35: error[type-error]: cases.g.kind.kind: "tools" is not allowed here; allowed values: "prompt", "resource", "tool"`,
		"tests/a.cue:6:2: error[type-error]: cases.g.missing: the case has no expect: every case says the decision it must get\n\tadd it, for example expect: \"allow\" (or \"approve\", or \"deny\")",
		`tests/a.cue:7:41: error[type-error]: cases.g.empty name.name: invalid value "" (out of bound !="")`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// TestParseUngroupedCase: a case written where a group is expected is one
// error at the group's key, saying cases are grouped, not an error per
// field (a string is not a case, the case has no server); a field meant
// for every case of a group is one error at the field. A case named like
// a field is a case.
func TestParseUngroupedCase(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`cases: "a": {server: "github", name: "get_issue", expect: "allow"}`,
			"tests/a.cue:3:8: error[type-error]: cases.a: a case's fields server, name and expect, written where a case is expected: cases are grouped, cases: GROUP: NAME: {...}\n\twrite the case in a group: cases: github: \"a\": {...}\n"},
		{`cases: "a b": {name: "x", rule: "default"}`,
			"tests/a.cue:3:8: error[type-error]: cases.a b: a case's fields name and rule, written where a case is expected: cases are grouped, cases: GROUP: NAME: {...}\n\twrite the case in a group: cases: GROUP: \"a b\": {...}\n"},
		{"cases: \"my-group\": {\n\tgroups: [\"contractors\"]\n\t\"reads\": {server: \"github\", name: \"get_issue\", expect: \"allow\"}\n}",
			"tests/a.cue:4:2: error[type-error]: cases.my-group: a case's field groups, written among the cases of group \"my-group\"\n\tto give every case of the group a field, write it under a pattern: cases: \"my-group\": [_]: groups: ...\n"},
		{`cases: g: server: {server: "github", name: "get_issue", expect: "allow"}`, ""},
	} {
		cases, diags := Parse([]compiler.File{{Name: "tests/a.cue", Data: []byte("package tests\n\n" + tc.src + "\n")}})
		if got := formatAll(diags); got != tc.want {
			t.Errorf("%s:\ngot  %s\nwant %s", tc.src, got, tc.want)
		}
		if tc.want == "" && (len(cases) != 1 || cases[0].FullName() != "g/server") {
			t.Errorf("%s: cases %v, want g/server", tc.src, cases)
		}
	}
}

func TestCheckProblems(t *testing.T) {
	res := compileTest(t, testPolicy)
	cases, diags := Parse([]compiler.File{{Name: "tests/a.cue", Data: []byte(`package tests

cases: g: {
	"server": {server: "githb", name: "x", expect: "deny"}
	"group": {groups: ["contractor"], server: "github", name: "x", expect: "deny"}
	"both": {principal: "carol@example.com", groups: ["contractors"], server: "github", name: "x", expect: "deny"}
	"prompt": {server: "github", kind: "prompt", name: "x", expect: "approve"}
	"line": {server: "github", name: "x", expect: "deny", rule: "policy.cue:99"}
	"rooted": {server: "github", name: "x", expect: "deny", rule: "p/policy.cue:8"}
	"effect": {server: "github", name: "get_x", expect: "allow", rule: "policy.cue:10"}
	"keeps": {server: "github", name: "get_x", expect: "allow", rule: "allow_list \"get_*\" (group:contractors scope)"}
	"default": {server: "github", name: "x", expect: "approve", rule: "default"}
	"form": {server: "github", name: "x", expect: "deny", rule: "the deny"}
	"column": {server: "github", name: "x", expect: "deny", rule: "policy.cue:10:3"}
	"prompt rule": {server: "github", name: "x", expect: "allow", rule: "allow_list \"summarize\""}
}
`)}})
	if len(diags) > 0 {
		t.Fatal(formatAll(diags))
	}
	got := formatAll(Check(cases, res.Table))
	for _, want := range []string{
		"tests/a.cue:4:13: error[type-error]: cases.g.server.server: server \"githb\" is not defined in the policy's mcp_servers, so every item of it is denied and no rule could be tested\n\tdid you mean \"github\"?",
		"tests/a.cue:5:12: error[type-error]: cases.g.group.groups: group \"contractor\" is not defined in the policy's groups\n\tdid you mean \"contractors\"?",
		"cases.g.both.groups: a case names a principal or a set of groups, not both",
		"tests/a.cue:7:58: error[type-error]: cases.g.prompt.expect: a prompt is never held for approval",
		"cases.g.line.rule: no rule of github's tools is written at \"policy.cue:99\"\n\tdid you mean \"default\"? it decides the case",
		"cases.g.rooted.rule: no rule of github's tools is written at \"p/policy.cue:8\"\n\torigins are relative to the policy directory: did you mean \"policy.cue:8\"?",
		`cases.g.effect.rule: deny_list "delete_repository" (server scope) decides deny, so a case it decides cannot be allow`,
		`cases.g.keeps.rule: allow_list "get_*" (group:contractors scope) is an allow_list entry of group:contractors, which never decides a case`,
		"cases.g.default.rule: no default holds a call for approval",
		`cases.g.form.rule: "the deny" names no rule`,
		`cases.g.column.rule: "policy.cue:10:3" has a column: a rule's origin is FILE:LINE` + "\n\twrite \"policy.cue:10\"",
		`cases.g.prompt rule.rule: no rule of github's tools is allow_list "summarize" (allow_list "summarize" (server scope) is a rule of github's prompts)` +
			"\n\tthe case is decided deny, not allow, by \"default\": check its server, kind, name and expect (policyc explain shows the decision)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// TestRuleSuggestsTheDecider: a case's rule that names no rule suggests
// the rule (or default) that decides the case, in the form the case wrote,
// not the nearest line or spelling, which is another rule: get_issue's
// "policy.cue:99" is nearest to policy.cue:9 (approval_list
// "merge_pull_request"), and the case would still fail.
func TestRuleSuggestsTheDecider(t *testing.T) {
	res := compileTest(t, testPolicy)
	cases := parseTest(t, `package tests

cases: g: {
	"line": {server: "github", name: "get_issue", expect: "allow", rule: "policy.cue:99"}
	"label": {groups: ["contractors"], server: "github", name: "merge_pull_request", expect: "deny", rule: "deny_list \"merge\""}
}
`)
	got := formatAll(Check(cases, res.Table))
	for _, want := range []string{
		"cases.g.line.rule: no rule of github's tools is written at \"policy.cue:99\"\n\tdid you mean \"policy.cue:8\"? it decides the case\n",
		"cases.g.label.rule: no rule of github's tools is deny_list \"merge\"\n\tdid you mean \"deny_list \\\"merge_pull_request\\\" (group:contractors scope)\"? it decides the case\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// TestPrincipalNearAKnownOne: a principal the policy does not name, close
// to one it does, is a warning (the case runs, as anyone without a scope
// of their own); one far from every name is no problem at all.
func TestPrincipalNearAKnownOne(t *testing.T) {
	res := compileTest(t, testPolicy)
	cases := parseTest(t, `package tests

cases: g: {
	"typo": {principal: "carol@exmaple.com", server: "github", name: "get_issue", expect: "allow"}
	"outsider": {principal: "mallory@corp.test", server: "github", name: "get_issue", expect: "allow"}
}
`)
	ds := Check(cases, res.Table)
	if len(ds) != 1 || ds[0].Severity != compiler.Warning || compiler.HasErrors(ds) {
		t.Fatalf("want one warning, got:\n%s", formatAll(ds))
	}
	want := "tests/a.cue:4:11: warning[type-error]: cases.g.typo.principal: principal \"carol@exmaple.com\" is in no group and has no scope of its own, so the case is decided as anyone without one\n\tdid you mean \"carol@example.com\"?"
	if got := ds[0].Format(""); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestPercentNeverRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		covered, counted int
		want             string
	}{{999, 1000, "99.9"}, {11999, 12000, "99.9"}, {1, 3, "33.3"}, {2, 3, "66.6"}, {1000, 1000, "100.0"}, {0, 5, "0.0"}, {0, 0, "100.0"}} {
		c := &Coverage{Covered: tc.covered, Counted: tc.counted}
		if got := c.Percent(); got != tc.want {
			t.Errorf("%d of %d: %s%%, want %s%%", tc.covered, tc.counted, got, tc.want)
		}
	}
	c := &Coverage{Covered: 999, Counted: 1000}
	for _, tc := range []struct {
		min  string
		meet bool
	}{{"100", false}, {"99.95", false}, {"99.9", true}, {"0", true}} {
		min, ok := ParsePercent(tc.min)
		if !ok {
			t.Fatalf("%s does not parse", tc.min)
		}
		if got := c.Meets(min); got != tc.meet {
			t.Errorf("999 of 1000 meets %s: %v, want %v", tc.min, got, tc.meet)
		}
	}
	for _, bad := range []string{"101", "-1", "1/2", "1e2", "", "x", "50%"} {
		if _, ok := ParsePercent(bad); ok {
			t.Errorf("%q parses as a percentage", bad)
		}
	}
	if _, ok := ParsePercent("99.95"); !ok {
		t.Error("99.95 does not parse")
	}
}
