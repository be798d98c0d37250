package hosts

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

const policySrc = `package policy

approval_channels: page: approvals_page: {}
mcp_servers: {
	github: access: tool: {
		default: "deny"
		deny_list: ["delete_*", "admin_reset"]
		approval_list: ["create_*", "merge_pr"]
		allow_list: ["get_*", "list_*", "search", "create_issue"]
		approval_channel: "page"
	}
	memory: access: tool: default: "allow"
	linear: access: tool: {default: "allow", deny_list: ["drop_*"]}
	fs: access: tool: deny_list: ["*"]
	notes: access: {
		tool: {default: "allow", approval_list: ["wipe"], approval_channel: "page"}
	}
	"odd__name": access: tool: {default: "allow", deny_list: ["x"]}
	payments: access: tool: {default: "allow", approval_list: ["pay_*"], approval_channel: "page"}
}
groups: contractors: {
	members: ["bob"]
	mcp_servers: github: access: tool: deny_list: ["create_*"]
}
principals: alice: global: access: tool: allow_list: ["get_*", "read"]
`

func load(t *testing.T, src string) *decide.Table {
	t.Helper()
	res := compiler.Compile(compiler.Input{Files: []compiler.File{{Name: "policy.cue", Data: []byte(src)}}, Source: table.Source{PolicyPath: "."}})
	for _, d := range res.Diagnostics {
		if d.Severity == compiler.Error {
			t.Fatal(d.Format("."))
		}
	}
	rt, err := decide.Load(res.Table)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func testCatalog() *catalog.Catalog {
	tools := map[string][]string{
		"github":    {"get_issue", "list_repos", "search", "create_issue", "create_pr", "merge_pr", "delete_repo", "admin_reset", "unlisted_tool"},
		"memory":    {"read", "write"},
		"linear":    {"list_issues", "drop_table", "drop_index"},
		"fs":        {"read_file"},
		"notes":     {"read", "wipe"},
		"extra":     {"anything"},
		"odd__name": {"x", "y"},
	}
	c := &catalog.Catalog{Servers: map[string]*catalog.Snapshot{}}
	for s, names := range tools {
		snap := &catalog.Snapshot{Server: s}
		for _, n := range names {
			snap.Tools = append(snap.Tools, catalog.Tool{Name: n})
		}
		catalog.Encode(snap) // sorts
		c.Servers[s] = snap
	}
	return c
}

// claudeDecide is Claude Code's documented matching of MCP permission
// rules: "mcp__server" and "mcp__server__*" match every tool of the server,
// "mcp__server__tool" that one tool; deny rules are checked first, then
// ask, then allow, and the first match decides; a tool no rule matches is
// asked about (the default mode).
func claudeDecide(p ClaudeCodePermissions, server, tool string) table.Effect {
	match := func(rule string) bool {
		rest, ok := strings.CutPrefix(rule, "mcp__")
		if !ok {
			return false
		}
		s, t, two := strings.Cut(rest, "__")
		return s == server && (!two || t == "*" || t == tool)
	}
	switch {
	case slices.ContainsFunc(p.Deny, match):
		return table.Deny
	case slices.ContainsFunc(p.Ask, match):
		return table.Approve
	case slices.ContainsFunc(p.Allow, match):
		return table.Allow
	}
	return table.Approve
}

// cursorDecide is Cursor's documented matching of permissions.json: an
// mcpAllowlist entry "server:tool" lets that tool run without approval,
// "server:*" every tool of the server; any other MCP tool asks.
func cursorDecide(allow []string, server, tool string) table.Effect {
	if slices.Contains(allow, server+":"+tool) || slices.Contains(allow, server+":*") {
		return table.Allow
	}
	return table.Approve
}

func parseCursor(t *testing.T, b []byte) []string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "//") {
			lines = append(lines, l)
		}
	}
	var f struct {
		MCPAllowlist []string `json:"mcpAllowlist"`
	}
	dec := json.NewDecoder(strings.NewReader(strings.Join(lines, "\n")))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("not JSONC with an mcpAllowlist: %v\n%s", err, b)
	}
	return f.MCPAllowlist
}

// unnamed reports a server neither the test policy nor the catalogue names.
func unnamed(server string) bool {
	return !slices.Contains([]string{"github", "memory", "linear", "fs", "notes", "odd__name", "extra", "payments"}, server)
}

func reported(looser []Looser, server, tool string) bool {
	return slices.ContainsFunc(looser, func(l Looser) bool {
		return l.Server == server && (l.Tool == tool || l.Tool == "") || l.Server == "" && unnamed(server)
	})
}

// For every catalogued tool and every principal, each host's rules give the
// table's answer or a stricter one (allow > ask > deny); an answer looser
// than the table's is allowed only where the export reports it. With a
// catalogue, Claude Code's answer is exactly the table's wherever it can
// name the server.
func TestExportEquivalencePerCatalogedTool(t *testing.T) {
	rt := load(t, policySrc)
	cat := testCatalog()
	for _, principal := range []string{"", "bob", "alice", "nobody"} {
		t.Run("principal="+principal, func(t *testing.T) {
			cc, err := ClaudeCode(rt, cat, principal)
			if err != nil {
				t.Fatal(err)
			}
			var settings ClaudeCodeSettings
			if err := json.Unmarshal(cc.File, &settings); err != nil {
				t.Fatal(err)
			}
			cu, err := Cursor(rt, cat, principal, "policy")
			if err != nil {
				t.Fatal(err)
			}
			allow := parseCursor(t, cu.File)
			checked := 0
			for it := range cat.Items() {
				if it.Kind != table.Tool.String() {
					continue
				}
				want := rt.Decide(principal, it.Server, table.Tool, it.Name).Effect
				got := claudeDecide(settings.Permissions, it.Server, it.Name)
				switch {
				case got > want && !reported(cc.Looser, it.Server, it.Name):
					t.Errorf("claude-code %s %s: host %s, table %s, and the export does not report it", it.Server, it.Name, got, want)
				case got != want && claudeServer(it.Server):
					t.Errorf("claude-code %s %s: host %s, table %s: want exact with a catalogue", it.Server, it.Name, got, want)
				}
				got = cursorDecide(allow, it.Server, it.Name)
				if got > want && !reported(cu.Looser, it.Server, it.Name) {
					t.Errorf("cursor %s %s: host %s, table %s, and the export does not report it", it.Server, it.Name, got, want)
				}
				if want == table.Allow && got != table.Allow {
					t.Errorf("cursor %s %s: the table allows it but the allowlist does not", it.Server, it.Name)
				}
				checked++
			}
			if checked != 20 {
				t.Errorf("checked %d catalogued tools", checked)
			}
		})
	}
}

func TestExportClaudeCodeGolden(t *testing.T) {
	rt := load(t, policySrc)
	ex, err := ClaudeCode(rt, testCatalog(), "")
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "permissions": {
    "allow": [
      "mcp__github__get_issue",
      "mcp__github__list_repos",
      "mcp__github__search",
      "mcp__linear__list_issues",
      "mcp__memory",
      "mcp__notes"
    ],
    "ask": [
      "mcp__github__create_issue",
      "mcp__github__create_pr",
      "mcp__github__merge_pr",
      "mcp__notes__wipe"
    ],
    "deny": [
      "mcp__extra",
      "mcp__fs",
      "mcp__github__admin_reset",
      "mcp__github__delete_repo",
      "mcp__github__unlisted_tool",
      "mcp__linear__drop_index",
      "mcp__linear__drop_table"
    ]
  }
}
`
	if string(ex.File) != want {
		t.Errorf("got:\n%s", ex.File)
	}
	if len(ex.Coarse) > 0 {
		t.Errorf("with a catalogue, servers denied whole for want of one: %+v", ex.Coarse)
	}
	notes := strings.Join(ex.Notes, "\n")
	for _, w := range []string{
		`odd__name: a server name containing "__" cannot start a Claude Code rule`,
		"extra: catalogued but not in the table, which denies every tool of it: denied",
		"github: Claude Code asks about tools outside the catalogue, and cannot deny them without denying the whole server; the table denies those matching its deny pattern(s) \"delete_*\", and the others by default",
		"github: Claude Code asks about tools outside the catalogue, some of which the table allows (its allow pattern(s) \"get_*\", \"list_*\" cannot be written as host rules) (stricter)",
	} {
		if !strings.Contains(notes, w) {
			t.Errorf("notes lack %q:\n%s", w, notes)
		}
	}
}

// Without a catalogue, a deny glob cannot be expanded: the whole server is
// denied, which is stricter than the table for every name.
func TestExportWithoutCatalogueIsStricter(t *testing.T) {
	rt := load(t, policySrc)
	ex, err := ClaudeCode(rt, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	var s ClaudeCodeSettings
	json.Unmarshal(ex.File, &s)
	if !slices.Contains(s.Permissions.Deny, "mcp__linear") || !slices.Contains(s.Permissions.Deny, "mcp__github") {
		t.Errorf("deny globs without a catalogue must deny the server: %+v", s.Permissions)
	}
	// Each server denied whole is listed, for the command to refuse or
	// warn about first.
	var coarse []string
	for _, c := range ex.Coarse {
		coarse = append(coarse, c.Server+" "+c.Rule+" "+strings.Join(c.Patterns, ","))
	}
	if !slices.Contains(coarse, "linear mcp__linear drop_*") || !slices.ContainsFunc(coarse, func(c string) bool { return strings.HasPrefix(c, "github mcp__github ") }) {
		t.Errorf("Coarse = %q, want linear (drop_*) and github", coarse)
	}
	notes := strings.Join(ex.Notes, "\n")
	if !strings.Contains(notes, `linear: the deny pattern(s) "drop_*" cannot be written as Claude Code rules, and no catalogue lists the server's tools to expand them over: the whole server is denied (stricter)`) {
		t.Errorf("notes:\n%s", notes)
	}
	cu, _ := Cursor(rt, nil, "", "policy")
	allow := parseCursor(t, cu.File)
	// Any name: the host is never looser than the table unless reported.
	names := []string{"get_issue", "search", "drop_x", "delete_repo", "new_tool", "wipe", "read", "x", "pay_x"}
	for _, server := range []string{"github", "memory", "linear", "fs", "notes", "odd__name", "payments", "unknown"} {
		for _, n := range names {
			want := rt.Decide("", server, table.Tool, n).Effect
			if got := claudeDecide(s.Permissions, server, n); got > want && !reported(ex.Looser, server, n) {
				t.Errorf("claude-code %s %s: host %s > table %s, unreported", server, n, got, want)
			}
			if got := cursorDecide(allow, server, n); got > want && !reported(cu.Looser, server, n) {
				t.Errorf("cursor %s %s: host %s > table %s, unreported", server, n, got, want)
			}
		}
	}
}

func TestExportCursorGolden(t *testing.T) {
	rt := load(t, `package policy
mcp_servers: {
	memory: access: tool: default: "allow"
	github: access: tool: {deny_list: ["delete_repo"], allow_list: ["get_issue", "search"]}
}
`)
	ex, err := Cursor(rt, nil, "", "policy")
	if err != nil {
		t.Fatal(err)
	}
	want := `// Exported by policyc export cursor from policy.
// Cursor runs the tools listed here without asking and asks before any
// other MCP tool. It cannot deny and has no approval rules: tools the table
// holds for approval or denies are left off, so Cursor asks; the gateway
// still enforces the table. This list replaces Cursor's in-app MCP allowlist.
//   - github: Cursor cannot deny "delete_repo": left off the allowlist, so Cursor asks before each call
//   - github: Cursor asks about tools no rule lists; the table denies them by default
//   - servers the table and the catalogue do not name: Cursor asks about their tools; the table denies them
{
  "mcpAllowlist": [
    "github:get_issue",
    "github:search",
    "memory:*"
  ]
}
`
	if !bytes.Equal(ex.File, []byte(want)) {
		t.Errorf("got:\n%s", ex.File)
	}
}

// A catalogued tool whose name Cursor would read as a pattern is left off
// the allowlist: a tool named "*" the table allows made "linear:*", which
// ran every tool of the server without asking, the denied ones too.
func TestExportCursorPatternToolNames(t *testing.T) {
	rt := load(t, `package policy
mcp_servers: linear: access: tool: {default: "allow", deny_list: ["drop_*"]}
`)
	names := []string{"*", "a:b", "get?", "x[1]", "{a,b}", `back\slash`, "sp ace", "list_issues", "team/list.v2", "drop_table"}
	snap := &catalog.Snapshot{Server: "linear"}
	for _, n := range names {
		snap.Tools = append(snap.Tools, catalog.Tool{Name: n})
	}
	catalog.Encode(snap)
	cat := &catalog.Catalog{Servers: map[string]*catalog.Snapshot{"linear": snap}}
	ex, err := Cursor(rt, cat, "", "policy")
	if err != nil {
		t.Fatal(err)
	}
	allow := parseCursor(t, ex.File)
	if want := []string{"linear:list_issues", "linear:team/list.v2"}; !slices.Equal(allow, want) {
		t.Errorf("mcpAllowlist = %q, want %q", allow, want)
	}
	// Each entry names one tool the table allows, with no character a
	// pattern could read.
	for _, e := range allow {
		tool := strings.TrimPrefix(e, "linear:")
		if strings.ContainsAny(tool, `*:?[{\ `) || rt.Decide("", "linear", table.Tool, tool).Effect != table.Allow {
			t.Errorf("entry %q may run tools the table does not allow", e)
		}
	}
	notes := strings.Join(ex.Notes, "\n")
	want := `linear: the table allows "*", "a:b", "back\\slash", "get?", "sp ace" and 2 more, whose name an allowlist entry cannot hold (only letters, digits, '_', '-', '.' and '/'): left off the allowlist, so Cursor asks before each call (stricter)`
	if !strings.Contains(notes, want) {
		t.Errorf("notes lack\n%s\n%s", want, notes)
	}
	if !strings.Contains(string(ex.File), "//   - "+want+"\n") {
		t.Errorf("the file's comments lack the note:\n%s", ex.File)
	}
	for _, l := range ex.Looser {
		if l.Table == table.Allow {
			t.Errorf("an allowed tool reported looser: %+v", l)
		}
	}
}
