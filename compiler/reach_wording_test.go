package compiler_test

import (
	"strings"
	"testing"

	. "github.com/policyc/policyc/compiler"
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
