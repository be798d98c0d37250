package compiler_test

import (
	"testing"

	. "github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/principal"
	"github.com/policyc/policyc/runtime/table"
)

// compileDecide compiles a one-file policy and loads its table.
func compileDecide(t *testing.T, src string) (*Result, *decide.Table) {
	t.Helper()
	res := Compile(Input{Files: []File{{Name: "p.cue", Data: []byte("package policy\n\n" + src)}}})
	if res.Table == nil {
		t.Fatalf("policy did not compile: %v", res.Diagnostics)
	}
	rt, err := decide.Load(res.Table)
	if err != nil {
		t.Fatal(err)
	}
	return res, rt
}

// TestTokenGroups: a principal whose access token names a group is in it
// whatever members lists, so a group's rule is judged for a principal in
// that group alone. Each rule below decides for such a principal; the
// members lists alone would call it dead.
func TestTokenGroups(t *testing.T) {
	for _, tc := range []struct {
		name, src   string
		asker       principal.Parts
		tool, rule  string
		effect      table.Effect
		notReported []string
	}{
		{
			name: "narrowing allow beside a principal scope",
			src: `mcp_servers: s: access: tool: allow_list: ["get_*", "list_*"]
groups: interns: {members: ["alice"], mcp_servers: s: access: tool: allow_list: ["get_*", "list_*"]}
principals: alice: mcp_servers: s: access: tool: allow_list: ["get_*"]
`,
			asker: principal.Parts{Name: "bob", Groups: []string{"interns"}}, tool: "list_a", rule: "list_*", effect: table.Allow,
			notReported: []string{CodeNarrowingNoEffect},
		},
		{
			name: "deny beside a group of the same members",
			src: `mcp_servers: s: access: tool: allow_list: ["*"]
groups: aaa_staff: {members: ["bob"], mcp_servers: s: access: tool: deny_list: ["list_*"]}
groups: contractors: {members: ["bob"], mcp_servers: s: access: tool: deny_list: ["list_secrets"]}
`,
			asker: principal.Parts{Name: "dave", Groups: []string{"contractors"}}, tool: "list_secrets", rule: "list_secrets", effect: table.Deny,
			notReported: []string{CodeRedundantDeny, CodeNarrowingNoEffect},
		},
		{
			name: "approval in a group without members",
			src: reachChannels + `mcp_servers: s: access: tool: allow_list: ["*"]
groups: reviewers: {members: [], mcp_servers: s: access: tool: approval_list: ["merge_*"]}
`,
			asker: principal.Parts{Groups: []string{"reviewers"}}, tool: "merge_pr", rule: "merge_*", effect: table.Approve,
			notReported: []string{CodeApprovalNeverAsked, CodeNarrowingNoEffect},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, rt := compileDecide(t, tc.src)
			d := rt.Decide(principal.Ref(tc.asker), "s", table.Tool, tc.tool)
			if d.Effect != tc.effect || d.Rule == nil || d.Rule.Pattern != tc.rule {
				t.Fatalf("the runtime decides %s for %+v: %v by %+v, want %v by %q", tc.tool, tc.asker, d.Effect, d.Rule, tc.effect, tc.rule)
			}
			for _, d := range res.Diagnostics {
				for _, c := range tc.notReported {
					if d.Code == c {
						t.Errorf("reported %s: %s", c, d.Message)
					}
				}
			}
		})
	}
}

// TestEmptyGroupForTokens: a group with rules and no members narrows for
// the principals whose token names it; empty-group says so, once, and its
// rules are judged for them.
func TestEmptyGroupForTokens(t *testing.T) {
	src := `mcp_servers: s: access: tool: allow_list: ["*"]
groups: ops: {
	members: []
	mcp_servers: s: access: tool: deny_list: ["drop_*", "drop_*"]
	global: access: tool: deny_list: ["rm_*"]
}
`
	// At the group's first block: lint moves it to members.
	wantOne(t, reachDiags(t, src, CodeEmptyGroup), 6, "groups.ops has no members: its rules apply only to principals whose access token names the group")
	wantOne(t, reachDiags(t, src, CodeDuplicatePattern), 6)
	_, rt := compileDecide(t, src)
	if d := rt.Decide(" groups=ops", "s", table.Tool, "rm_x"); d.Effect != table.Deny {
		t.Errorf("rm_x for a token in ops: %v", d.Effect)
	}
}
