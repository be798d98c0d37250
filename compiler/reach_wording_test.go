package compiler_test

import (
	"strings"
	"testing"

	. "github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/table"
)

// TestShadowedApprovalWording: an approval shadowed by an approval is still
// asked for; only one shadowed by denies is never asked.
func TestShadowedApprovalWording(t *testing.T) {
	src := reachChannels + `mcp_servers: s: access: tool: {
	deny_list: ["drop_*"]
	approval_list: ["save_*", "save_issue", "drop_table", "save_x"]
}
`
	ds := reachDiags(t, src, CodeShadowedRule)
	if len(ds) != 3 {
		t.Fatalf("want 3 findings, got %v", ds)
	}
	for _, d := range ds {
		asked := strings.Contains(d.Message, "never asked")
		if deny := strings.Contains(d.Message, `"drop_table"`); asked != deny {
			t.Errorf("%s: says never asked: %v", d.Message, asked)
		}
	}
}

// TestWitnessNotEmpty: a finding quotes a name other than "", which no
// item has and explain refuses, when the rule decides one.
func TestWitnessNotEmpty(t *testing.T) {
	src := reachChannels + `mcp_servers: s: access: tool: {
	allow_list: ["a", "*"]
	approval_list: ["save_*"]
}
groups: g: {
	members: ["x"]
	mcp_servers: s: access: tool: allow_list: ["*"]
}
global: access: tool: deny_list: ["b*"]
`
	ds := reachDiags(t, src, CodePartlyShadowed)
	if len(ds) != 1 {
		t.Fatalf("want one %s finding, got %v", CodePartlyShadowed, ds)
	}
	if strings.Contains(ds[0].Message, `""`) {
		t.Errorf("quotes the empty name: %s", ds[0].Message)
	}
	res := Compile(Input{Files: []File{{Name: "p.cue", Data: []byte("package policy\n\n" + src)}}})
	for _, rr := range AnalyzeReach(res.Policy, ReachOptions{}).Rules {
		if rr.Status == Reachable && rr.Witness == "" {
			t.Errorf("%s: witness %q", rr.Path, rr.Witness)
		}
	}
	dead := `mcp_servers: s: access: tool: allow_list: ["get_*"]
groups: g: {
	members: ["x"]
	mcp_servers: s: access: tool: allow_list: ["get_*", "*"]
}
`
	ds = reachDiags(t, dead, CodeNarrowingNoEffect)
	if len(ds) != 1 {
		t.Fatalf("want one %s finding, got %v", CodeNarrowingNoEffect, ds)
	}
	for _, d := range ds {
		if strings.Contains(d.Message, `""`) {
			t.Errorf("quotes the empty name: %s", d.Message)
		}
	}
}

// TestDeadUIEntry: a ui allowlist entry that admits no URI the resource
// rules allow lets nothing through (docs/policy.md's beta* entry); the
// entries that admit allowed URIs, and the invalid ones, are not reported.
func TestDeadUIEntry(t *testing.T) {
	src := reachChannels + `mcp_servers: analytics: {
	access: resource: allow_list: ["ui://analytics/dashboard.html", "ui://analytics/charts/*"]
	ui: {
		allow_list: [
			"ui://analytics/dashboard.html",
			"ui://analytics/charts/",
			"ui://analytics/beta*",
		]
		consent_channel: "page"
	}
}
`
	wantOne(t, reachDiags(t, src, CodeUIResourceDenied), 11, `mcp_servers.analytics.ui.allow_list[2]: "ui://analytics/beta*" lets nothing through`)
	_, rt := compileDecide(t, src)
	if d := rt.Decide("", "analytics", table.Resource, "ui://analytics/beta1"); d.Effect == table.Allow {
		t.Errorf("ui://analytics/beta1 is allowed")
	}
}
