package importer

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/policyc/policyc/runtime/table"
)

// ClaudeRule is an MCP permission rule of Claude Code, in one of the three
// forms its documentation gives: mcp__<server> (every tool of the server),
// mcp__<server>__* (the same) and mcp__<server>__<tool> (one tool).
type ClaudeRule struct {
	Server string
	// Tool is "" for a rule about every tool of the server.
	Tool string
}

// Matches reports whether the rule names the tool of the server, as Claude
// Code matches it: the whole server, or exactly the tool name.
func (r ClaudeRule) Matches(server, tool string) bool {
	return r.Server == server && (r.Tool == "" || r.Tool == tool)
}

// ParseClaudeRule reads a permission rule. mcp reports whether it is about
// MCP tools at all (it starts with "mcp__"); err says why an MCP rule is
// not one of the forms Claude Code applies.
func ParseClaudeRule(rule string) (r ClaudeRule, mcp bool, err error) {
	rest, ok := strings.CutPrefix(rule, "mcp__")
	if !ok {
		return ClaudeRule{}, false, nil
	}
	switch {
	case rest == "":
		return ClaudeRule{}, true, fmt.Errorf("%q names no server", rule)
	case strings.ContainsAny(rest, "()"):
		return ClaudeRule{}, true, fmt.Errorf("%q: Claude Code has no argument patterns for MCP tools, and skips such a rule", rule)
	case strings.IndexFunc(rest, unicode.IsSpace) >= 0:
		return ClaudeRule{}, true, fmt.Errorf("%q contains white space", rule)
	}
	server, tool, two := strings.Cut(rest, "__")
	switch {
	case strings.Contains(server, "*"):
		return ClaudeRule{}, true, fmt.Errorf("%q: a wildcard must follow a literal mcp__<server>__ prefix; Claude Code skips a rule like this one", rule)
	case !table.ValidName(server):
		return ClaudeRule{}, true, fmt.Errorf("%q: %q cannot name a server", rule, server)
	case !two:
		return ClaudeRule{Server: server}, true, nil
	case tool == "*":
		return ClaudeRule{Server: server}, true, nil
	case tool == "":
		return ClaudeRule{}, true, fmt.Errorf("%q names no tool after the server", rule)
	case strings.Contains(tool, "*"):
		return ClaudeRule{}, true, fmt.Errorf("%q: Claude Code matches a wildcard only as the whole tool name (mcp__%s__*), not within one", rule, server)
	}
	return ClaudeRule{Server: server, Tool: tool}, true, nil
}

// claudePermissionKeys are the keys of "permissions" that the import knows.
var claudePermissionKeys = []string{"allow", "ask", "deny", "defaultMode", "additionalDirectories", "disableBypassPermissionsMode"}

// ClaudeCode imports the MCP permission rules of a Claude Code settings
// file (.claude/settings.json and friends).
//
// Claude Code checks deny, then ask, then allow, and the first matching
// rule decides: exactly policyc's deny_list, approval_list, allow_list. What
// it cannot carry over: Claude Code asks about a tool no rule names, and
// policyc has no asking default, so such tools are denied (stricter);
// Claude Code's rules do not cover prompts and resources, which stay denied.
func ClaudeCode(name string, data []byte) *Result {
	c := &claudeImport{file: name, p: &policy{
		tool: "policyc import claude-code", source: filepath.Base(name), servers: map[string]*server{},
		header: []string{
			"Claude Code checks deny, then ask, then allow, and the first matching rule",
			"decides; deny_list, approval_list and allow_list keep that order, and an ask",
			"rule holds the call until a human approves it. A server no rule names is not",
			"in this policy: the gateway denies it, where Claude Code would ask.",
		},
	}}
	c.run(data)
	sortFindings(c.findings)
	res := &Result{Findings: c.findings}
	if !res.HasErrors() {
		out, err := c.p.cue()
		if err != nil {
			res.Findings = append(res.Findings, Finding{Pos: Pos{File: name}, Error: true, Message: err.Error()})
		} else {
			res.CUE = out
		}
	}
	return res
}

type claudeImport struct {
	file     string
	p        *policy
	findings []Finding
}

func (c *claudeImport) add(pos Pos, path string, isErr bool, suggestion, format string, args ...any) {
	c.findings = append(c.findings, Finding{Pos: pos, Path: path, Error: isErr, Message: fmt.Sprintf(format, args...), Suggestion: suggestion})
}

func (c *claudeImport) run(data []byte) {
	root, err := parseJSON(c.file, data)
	if err != nil {
		f := Finding{Pos: Pos{File: c.file}, Error: true, Message: err.Error()}
		var je *jsonError
		if errors.As(err, &je) {
			f.Pos, f.Message = je.pos, je.msg
		}
		c.findings = append(c.findings, f)
		return
	}
	if root.kind != "object" {
		c.add(root.pos, "", true, "", "expected a settings object, found %s", root.describe())
		return
	}
	var perms *jsonNode
	var other []string
	for _, m := range root.keys {
		if m.name == "permissions" {
			perms = m.val
			continue
		}
		other = append(other, m.name)
	}
	if len(other) > 0 {
		c.add(root.pos, "", false, "", "not carried over: %s (only permissions holds access rules)", strings.Join(other, ", "))
	}
	if perms == nil {
		c.add(root.pos, "", true, "", "no permissions: nothing to import")
		return
	}
	if perms.kind != "object" {
		c.add(perms.pos, "permissions", true, "", "expected an object with allow, ask and deny, found %s", perms.describe())
		return
	}
	lists := map[string]*jsonNode{}
	for _, m := range perms.keys {
		path := "permissions." + m.name
		switch m.name {
		case "allow", "ask", "deny":
			lists[m.name] = m.val
		case "defaultMode":
			c.defaultMode(m, path)
		case "additionalDirectories", "disableBypassPermissionsMode":
			c.add(m.pos, path, false, "", "not carried over: it is about Claude Code's own tools, not MCP servers")
		default:
			s := "policyc import knows allow, ask, deny, defaultMode, additionalDirectories and disableBypassPermissionsMode; remove it, or import by hand"
			if best := suggest(m.name, claudePermissionKeys); best != "" {
				s = fmt.Sprintf("did you mean %q?", best)
			}
			c.add(m.pos, path, true, s, "unknown key %q: not carried over, and not ignored", m.name)
		}
	}
	rules := 0
	for _, list := range []string{"deny", "ask", "allow"} {
		n := lists[list]
		if n == nil {
			continue
		}
		path := "permissions." + list
		if n.kind != "array" {
			c.add(n.pos, path, true, "", "expected an array of rules, found %s", n.describe())
			continue
		}
		var notMCP []string
		for i, item := range n.items {
			ipath := fmt.Sprintf("%s[%d]", path, i)
			if item.kind != "string" {
				c.add(item.pos, ipath, true, "", "expected a rule (a string), found %s", item.describe())
				continue
			}
			r, mcp, err := ParseClaudeRule(item.str)
			switch {
			case !mcp:
				notMCP = append(notMCP, item.str)
				continue
			case err != nil:
				c.add(item.pos, ipath, true, "write mcp__<server>, mcp__<server>__* or mcp__<server>__<tool>", "not a rule Claude Code's grammar allows: %v", err)
				continue
			}
			rules++
			c.rule(list, r, item.str, item.pos)
		}
		if len(notMCP) > 0 {
			c.add(n.pos, path, false, "", "not carried over: %d rule(s) about Claude Code's own tools, not MCP servers (%s)", len(notMCP), abbreviate(notMCP, 3))
		}
	}
	if rules == 0 && !c.hasErrors() {
		c.add(perms.pos, "permissions", true, "", "no MCP permission rules (mcp__...): nothing to import")
	}
}

func (c *claudeImport) hasErrors() bool {
	for _, f := range c.findings {
		if f.Error {
			return true
		}
	}
	return false
}

func (c *claudeImport) defaultMode(m jsonMember, path string) {
	mode := m.val.str
	switch {
	case m.val.kind != "string":
		c.add(m.val.pos, path, true, "", "expected a mode name, found %s", m.val.describe())
	case mode == "default" || mode == "acceptEdits" || mode == "plan" || mode == "dontAsk":
		// In every one of these modes an MCP tool no rule allows is not run
		// without a human (or at all): the imported default, deny, is the
		// same or stricter.
	case mode == "bypassPermissions":
		c.add(m.val.pos, path, true, "remove defaultMode to import the rules as Claude Code applies them in its default mode",
			"bypassPermissions runs tools without asking; policyc does not import a mode that turns the checks off")
	default:
		c.add(m.val.pos, path, true, "Claude Code's modes are default, acceptEdits, plan, dontAsk and bypassPermissions", "unknown mode %q", mode)
	}
}

// rule adds r, written as text at pos, to the list of its server's tools.
func (c *claudeImport) rule(list string, r ClaudeRule, text string, pos Pos) {
	s := c.p.server(r.Server, Pos{})
	a := s.kinds[table.Tool.String()]
	if a == nil {
		a = &access{def: table.Deny.String(), why: "Claude Code asks about a tool no rule names; policyc has no asking default,\nso such tools are denied (stricter)."}
		s.kinds[table.Tool.String()] = a
		for _, k := range []string{table.Prompt.String(), table.Resource.String()} {
			s.kinds[k] = &access{def: table.Deny.String(), why: fmt.Sprintf("Claude Code's permission rules do not cover %ss: denied, the policyc\ndefault. Allow the ones the gateway should serve here.", k)}
		}
	}
	e := entry{glob: "*", pos: pos, from: text}
	if r.Tool != "" {
		e.glob = escapeGlob(r.Tool)
	}
	switch list {
	case "deny":
		a.deny = append(a.deny, e)
	case "ask":
		a.approval = append(a.approval, e)
	case "allow":
		a.allow = append(a.allow, e)
	}
}

func abbreviate(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(", and %d more", len(items)-n)
}
