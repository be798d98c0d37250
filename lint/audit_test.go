package lint

import (
	"testing"

	"github.com/policyc/policyc/compiler"
)

// TestAuditModeWarns: every server in audit mode is a warning, at its
// audit key.
func TestAuditModeWarns(t *testing.T) {
	rep := Lint([]compiler.File{{Name: "p.cue", Data: []byte(`package policy

mcp_servers: github: {
	access: tool: allow_list: ["get_*"]
	audit: true
}
mcp_servers: linear: {
	access: tool: allow_list: ["get_*"]
	audit: true
}
mcp_servers: jira: access: tool: allow_list: ["get_*"]
`)}}, nil)
	var lines []int
	for _, f := range rep.Findings {
		if f.Code == compiler.CodeAuditMode {
			if f.Severity != compiler.Warning {
				t.Errorf("%s is a %v", f.Format(""), f.Severity)
			}
			lines = append(lines, f.Pos.Line)
		}
	}
	if len(lines) != 2 || lines[0] != 5 || lines[1] != 9 {
		t.Errorf("audit-mode findings at lines %v, want 5 and 9: %+v", lines, rep.Findings)
	}
}
