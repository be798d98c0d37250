package importer

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/glob"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// compile compiles an imported policy and loads its table.
func compile(t *testing.T, src []byte) *decide.Table {
	t.Helper()
	res := compiler.Compile(compiler.Input{Files: []compiler.File{{Name: "imported.cue", Data: src}}, Source: table.Source{PolicyPath: "."}})
	for _, d := range res.Diagnostics {
		if d.Severity == compiler.Error {
			t.Fatalf("the imported policy does not compile: %s\n%s", d.Format("."), src)
		}
	}
	rt, err := decide.Load(res.Table)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// hangarPolicy is the reference: ToolAccessPolicy.is_tool_allowed and
// requires_approval of MCP Hangar, with Python's fnmatch.
type hangarPolicy struct {
	allow, deny, approval []string
}

func fnmatch(name, pat string) bool { return regexp.MustCompile(pyTranslate(pat)).MatchString(name) }

func anyMatch(name string, pats []string) bool {
	return slices.ContainsFunc(pats, func(p string) bool { return fnmatch(name, p) })
}

func (h hangarPolicy) decide(name string) table.Effect {
	switch {
	case anyMatch(name, h.deny):
		return table.Deny
	case anyMatch(name, h.approval):
		return table.Approve
	case len(h.allow) > 0 && !anyMatch(name, h.allow):
		return table.Deny
	}
	return table.Allow
}

// hangarReference reads the lists of a config the way Hangar does.
func hangarReference(t *testing.T, src string) map[string]map[string]hangarPolicy {
	var cfg struct {
		Servers map[string]struct {
			Tools  any `yaml:"tools"`
			Access map[string]struct {
				Allow []string `yaml:"allow_list"`
				Deny  []string `yaml:"deny_list"`
			} `yaml:"access"`
		} `yaml:"mcp_servers"`
	}
	if err := yaml.Unmarshal([]byte(src), &cfg); err != nil {
		t.Fatal(err)
	}
	strs := func(v any) []string {
		var out []string
		l, _ := v.([]any)
		for _, x := range l {
			out = append(out, x.(string))
		}
		return out
	}
	ref := map[string]map[string]hangarPolicy{}
	for name, s := range cfg.Servers {
		ref[name] = map[string]hangarPolicy{}
		if m, ok := s.Tools.(map[string]any); ok {
			ref[name][table.Tool.String()] = hangarPolicy{allow: strs(m["allow_list"]), deny: strs(m["deny_list"]), approval: strs(m["approval_list"])}
		}
		for k, a := range s.Access {
			ref[name][k] = hangarPolicy{allow: a.Allow, deny: a.Deny}
		}
	}
	return ref
}

// probeNames are names the patterns decide on: each pattern's example and
// variants around it, and fixed names with the characters fnmatch and
// globs disagree about.
func probeNames(patterns []string) []string {
	names := []string{"", "x", "get_issue", "delete_repo", "merge_pr", "a\\b", "[x]", "^a", "!a", "docs://a/b", "file://.env", "file://readme"}
	for _, p := range patterns {
		if g, err := FromFnmatch(p); err == nil {
			if ex, ok := glob.Example(glob.MustParse(g)); ok {
				names = append(names, ex, ex+"x", "x"+ex, strings.ToUpper(ex))
			}
		}
		names = append(names, p)
	}
	return names
}

var hangarCases = []string{
	`
mcp_servers:
  github:
    mode: subprocess
    command: [npx, github]
    tools:
      allow_list: ["get_*", "list_*", "create_issue", "merge_*"]
      deny_list: ["delete_*", "get_secret*"]
      approval_list: ["merge_*", "create_*"]
      approval_timeout_seconds: 120
    access:
      prompt: {deny_list: ["draft_*"]}
      resource: {allow_list: ["docs://*", "file://[!.]*"]}
  memory:
    command: [npx, memory]
`,
	`
mcp_servers:
  only-deny:
    tools: {deny_list: ["*_delete", "admin?"]}
  only-approval:
    tools: {approval_list: ["pay*"]}
  empty-lists:
    tools: {allow_list: [], deny_list: []}
  weird:
    tools: {allow_list: ['a\b', '[^x]*', '[]]', 'lone[', '[!a-c]?']}
    access:
      resource: {deny_list: ['*://secret/*']}
`,
	`
providers:
  base:
    tools: &defaults
      allow_list: ["read_*"]
  merged:
    tools:
      <<: *defaults
      deny_list: ["read_secret"]
  listed:
    tools:
      - name: add
        inputSchema: {type: object}
`,
}

// An imported Hangar config decides every probe name as Hangar does.
func TestHangarRoundTrip(t *testing.T) {
	for i, src := range hangarCases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			res := Hangar("config.yaml", []byte(src))
			if res.HasErrors() {
				t.Fatalf("import: %v", res.Findings)
			}
			rt := compile(t, res.CUE)
			ref := hangarReference(t, strings.Replace(src, "providers:", "mcp_servers:", 1))
			for server, kinds := range ref {
				for _, kind := range []table.Kind{table.Tool, table.Prompt, table.Resource} {
					h := kinds[kind.String()]
					for _, name := range probeNames(slices.Concat(h.allow, h.deny, h.approval)) {
						// The rules' decision on the name as written: what
						// Hangar's lists say (a URI's other readings are
						// runtime's, tested there).
						got := rt.DecideWritten("anyone", server, kind, name).Effect
						if want := h.decide(name); got != want {
							t.Errorf("%s %s %q: imported policy says %s, Hangar says %s\n%s", server, kind, name, got, want, res.CUE)
						}
					}
				}
			}
		})
	}
}

// claudeReference is Claude Code's documented matching: deny, then ask,
// then allow, first match wins; a tool no rule names is asked about.
type claudeReference struct{ deny, ask, allow []ClaudeRule }

func (c claudeReference) decide(server, tool string) (effect table.Effect, named bool) {
	match := func(rs []ClaudeRule) bool {
		return slices.ContainsFunc(rs, func(r ClaudeRule) bool { return r.Matches(server, tool) })
	}
	switch {
	case match(c.deny):
		return table.Deny, true
	case match(c.ask):
		return table.Approve, true
	case match(c.allow):
		return table.Allow, true
	}
	return table.Approve, false
}

func TestClaudeCodeRoundTrip(t *testing.T) {
	src := `{
  "model": "opus",
  "permissions": {
    "allow": ["mcp__github__get_issue", "mcp__github__list_*", "mcp__memory", "mcp__linear__*", "Bash(npm test)", "Read"],
    "ask": ["mcp__github__create_issue", "mcp__github", "mcp__slack__post_message"],
    "deny": ["mcp__github__delete_repo", "mcp__memory__wipe", "mcp__fs__write_file"],
    "defaultMode": "acceptEdits"
  }
}`
	// mcp__github__list_* is not in Claude Code's grammar: refused.
	res := ClaudeCode("settings.json", []byte(src))
	if !res.HasErrors() || res.CUE != nil {
		t.Fatalf("a rule outside the grammar was not refused: %v", res.Findings)
	}
	src = strings.Replace(src, `"mcp__github__list_*", `, "", 1)
	res = ClaudeCode("settings.json", []byte(src))
	if res.HasErrors() {
		t.Fatalf("import: %v", res.Findings)
	}
	rt := compile(t, res.CUE)
	parse := func(rules ...string) []ClaudeRule {
		var out []ClaudeRule
		for _, r := range rules {
			cr, _, err := ParseClaudeRule(r)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, cr)
		}
		return out
	}
	ref := claudeReference{
		allow: parse("mcp__github__get_issue", "mcp__memory", "mcp__linear__*"),
		ask:   parse("mcp__github__create_issue", "mcp__github", "mcp__slack__post_message"),
		deny:  parse("mcp__github__delete_repo", "mcp__memory__wipe", "mcp__fs__write_file"),
	}
	for _, server := range []string{"github", "memory", "linear", "slack", "fs", "unknown"} {
		for _, tool := range []string{"get_issue", "create_issue", "delete_repo", "wipe", "post_message", "write_file", "other", "*"} {
			want, named := ref.decide(server, tool)
			got := rt.DecideWritten("anyone", server, table.Tool, tool).Effect
			switch {
			case named && got != want:
				t.Errorf("%s %s: imported policy says %s, Claude Code says %s", server, tool, got, want)
			case !named && got != table.Deny:
				// Claude Code asks; policyc has no asking default and denies.
				t.Errorf("%s %s: no rule names it, imported policy says %s, want deny (stricter than Claude Code's ask)", server, tool, got)
			}
		}
		for _, k := range []table.Kind{table.Prompt, table.Resource} {
			if got := rt.DecideWritten("anyone", server, k, "x").Effect; got != table.Deny {
				t.Errorf("%s %s: %s, want deny (Claude Code's rules do not cover it)", server, k, got)
			}
		}
	}
}
