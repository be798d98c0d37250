package importer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/policyc/policyc/runtime/table"
)

func findings(r *Result) string {
	var lines []string
	for _, f := range r.Findings {
		lines = append(lines, f.String())
	}
	return strings.Join(lines, "\n")
}

func TestHangarRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"unknown keys are listed with positions", `
logging: {level: INFO}
mcp_sevrers: {}
mcp_servers:
  github:
    comand: [npx]
    tools:
      deny_lst: ["delete_*"]
      allow_list: ["get_*"]
    acess: {}
`, []string{
			`config.yaml:3:1: error: mcp_sevrers: unknown key "mcp_sevrers": not carried over, and not ignored` + "\n\tdid you mean \"mcp_servers\"?",
			`config.yaml:6:5: error: mcp_servers.github.comand: unknown key "comand"` + ": not carried over, and not ignored\n\tdid you mean \"command\"?",
			`config.yaml:8:7: error: mcp_servers.github.tools.deny_lst: unknown key "deny_lst": not carried over, and not ignored` + "\n\tdid you mean \"deny_list\"?",
			`config.yaml:10:5: error: mcp_servers.github.acess: unknown key "acess"` + ": not carried over, and not ignored\n\tdid you mean \"access\"?",
		}},
		{"approval_list under prompt or resource is refused", `
mcp_servers:
  docs:
    access:
      prompt: {approval_list: ["draft_*"]}
      resource:
        approval_list: ["docs://*"]
`, []string{
			"config.yaml:5:16: error: mcp_servers.docs.access.prompt.approval_list: approval_list under prompt is refused: no approval hold exists on a fetch (policyc refuses it too, permanently)\n\tuse deny_list to withhold the item",
			"config.yaml:7:9: error: mcp_servers.docs.access.resource.approval_list: approval_list under resource is refused",
		}},
		{"a key written twice is refused, not dropped", `
mcp_servers:
  github:
    tools:
      allow_list: ["get_*"]
      allow_list: ["list_*"]
  github:
    tools: {deny_list: ["*"]}
`, []string{
			`config.yaml:6:7: error: mcp_servers.github.tools.allow_list: key "allow_list" appears twice (first at config.yaml:5:7): Hangar reads only the last one, and the import refuses to drop either without a word` + "\n\tkeep one of the two, with every entry it should have",
			`config.yaml:7:3: error: mcp_servers.github: key "github" appears twice (first at config.yaml:3:3)`,
		}},
		{"a merge of the mapping it is in is refused, not followed for ever", `
mcp_servers:
  github:
    tools: &defaults
      <<: *defaults
      deny_list: ["read_secret"]
`, []string{
			"config.yaml:5:7: error: mcp_servers.github.tools: merge key (<<) merges the mapping at config.yaml:4:12, which contains this merge: the merge has no end\n\tmerge a mapping defined apart from this one, or write the keys out",
		}},
		{"values of the wrong type", `
mcp_servers:
  s:
    tools:
      allow_list: "get_*"
      deny_list: [42, ""]
      approval_timeout_seconds: -5
`, []string{
			`config.yaml:5:19: error: mcp_servers.s.tools.allow_list: expected a list of patterns, found the string "get_*"`,
			`config.yaml:6:19: error: mcp_servers.s.tools.deny_list[0]: expected a non-empty string pattern, found the int 42`,
			`config.yaml:6:23: error: mcp_servers.s.tools.deny_list[1]: expected a non-empty string pattern, found the string ""`,
			`config.yaml:7:33: error: mcp_servers.s.tools.approval_timeout_seconds: expected a positive whole number of seconds, found "-5"`,
		}},
		{"policies that cannot be carried over", `
tool_access: {member: {}}
mcp_servers:
  "bad name": {}
  pool:
    mode: group
    members:
      - id: one
        tools: {deny_list: ["x"]}
  ranges:
    tools: {deny_list: ["[z-a]"]}
`, []string{
			"config.yaml:2:1: error: tool_access: per-tenant tool access cannot be carried over",
			`config.yaml:4:3: error: mcp_servers.bad name: "bad name" cannot name a policyc server`,
			"config.yaml:9:9: error: mcp_servers.pool.members[0].tools: an access policy on one member of a group cannot be carried over",
			`config.yaml:11:25: error: mcp_servers.ranges.tools.deny_list[0]: cannot be carried over exactly: pattern "[z-a]" has the reversed range z-a`,
		}},
		{"not YAML", "mcp_servers:\n  a: [\n", []string{"config.yaml:2: error: not valid YAML: did not find expected node content"}},
		{"no servers", "logging: {}\n", []string{"error: no mcp_servers section: nothing to import"}},
		{"two documents", "mcp_servers: {}\n---\nmcp_servers: {a: {}}\n", []string{"config.yaml:2:1: error: a second YAML document: Hangar reads one configuration per file"}},
		{"empty", "", []string{"error: the file is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Hangar("config.yaml", []byte(tc.src))
			if r.CUE != nil || !r.HasErrors() {
				t.Fatalf("imported despite errors:\n%s", findings(r))
			}
			got := findings(r)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("findings do not hold %q:\n%s", w, got)
				}
			}
		})
	}
}

// Merges of merges are expanded once per mapping: each server's tools
// merge the previous server's twice, so following every merge would take
// 2^40 steps.
func TestHangarMergesOfMerges(t *testing.T) {
	var src strings.Builder
	src.WriteString("mcp_servers:\n  s0: {tools: &m0 {deny_list: [\"delete_*\"]}}\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&src, "  s%d: {tools: &m%d {<<: [*m%d, *m%d]}}\n", i, i, i-1, i-1)
	}
	r := Hangar("config.yaml", []byte(src.String()))
	if r.HasErrors() {
		t.Fatalf("import: %s", findings(r))
	}
	rt := compile(t, r.CUE)
	for _, server := range []string{"s0", "s1", "s40"} {
		if got := rt.DecideWritten("anyone", server, table.Tool, "delete_repo").Effect; got != table.Deny {
			t.Errorf("%s delete_repo: %s, want deny (merged from s0)", server, got)
		}
	}
}

func TestClaudeCodeRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"rules outside the grammar", `{"permissions": {
  "allow": ["mcp__*", "mcp__github__get_*", "mcp__github__get_issue(repo:x)", "mcp__", "mcp__github__"],
  "deny": [7]
}}`, []string{
			`settings.json:2:13: error: permissions.allow[0]: not a rule Claude Code's grammar allows: "mcp__*": a wildcard must follow a literal mcp__<server>__ prefix`,
			`settings.json:2:23: error: permissions.allow[1]: not a rule Claude Code's grammar allows: "mcp__github__get_*": Claude Code matches a wildcard only as the whole tool name (mcp__github__*), not within one`,
			`settings.json:2:45: error: permissions.allow[2]: not a rule Claude Code's grammar allows: "mcp__github__get_issue(repo:x)": Claude Code has no argument patterns`,
			`permissions.allow[3]: not a rule Claude Code's grammar allows: "mcp__" names no server`,
			`permissions.allow[4]: not a rule Claude Code's grammar allows: "mcp__github__" names no tool after the server`,
			`settings.json:3:12: error: permissions.deny[0]: expected a rule (a string), found a number`,
		}},
		{"unknown keys and modes", `{"permissions": {"alow": ["mcp__x"], "defaultMode": "bypassPermissions"}}`, []string{
			`settings.json:1:18: error: permissions.alow: unknown key "alow": not carried over, and not ignored` + "\n\tdid you mean \"allow\"?",
			"permissions.defaultMode: bypassPermissions runs tools without asking",
		}},
		{"no MCP rules", `{"permissions": {"allow": ["Bash(ls)"]}}`, []string{"error: permissions: no MCP permission rules (mcp__...): nothing to import"}},
		{"not JSON", "{\n  \"permissions\": {\n    \"allow\": [\"mcp__x\",]\n  }\n}", []string{"settings.json:3:24: error: not valid JSON: invalid character ']'"}},
		{"not JSON, a bare word", `{"permissions": x}`, []string{"settings.json:1:17: error: not valid JSON: invalid character 'x' looking for beginning of value"}},
		{"not JSON, a missing colon", "{\n  \"permissions\" {}\n}", []string{"settings.json:2:17: error: not valid JSON: invalid character '{' after object key"}},
		{"not JSON, a bad escape", `{"permissions": {"allow": ["mcp__\q"]}}`, []string{`settings.json:1:35: error: not valid JSON: invalid character 'q' in string escape code`}},
		{"duplicate key", `{"permissions": {}, "permissions": {}}`, []string{`settings.json:1:21: error: key "permissions" appears twice (first at settings.json:1:2)`}},
		{"not UTF-8", "{\"permissions\": {\n  \"allow\": [\"mcp__github__get\xff\"]}}", []string{`settings.json:2:30: error: not valid UTF-8 here: JSON text is UTF-8; save the file as UTF-8`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ClaudeCode("settings.json", []byte(tc.src))
			if r.CUE != nil || !r.HasErrors() {
				t.Fatalf("imported despite errors:\n%s", findings(r))
			}
			got := findings(r)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("findings do not hold %q:\n%s", w, got)
				}
			}
		})
	}
}
