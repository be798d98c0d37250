package hosts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// ClaudeCodeSettings is the part of a Claude Code settings file an export
// writes.
type ClaudeCodeSettings struct {
	Permissions ClaudeCodePermissions `json:"permissions"`
}

// ClaudeCodePermissions are permission rules; Claude Code checks deny, then
// ask, then allow, and the first rule that matches decides.
type ClaudeCodePermissions struct {
	Allow []string `json:"allow"`
	Ask   []string `json:"ask"`
	Deny  []string `json:"deny"`
}

// claudeServer reports whether a server name can start a Claude Code MCP
// rule: mcp__<server>__<tool> splits at the first "__".
func claudeServer(s string) bool { return s != "" && !strings.Contains(s, "__") }

// claudeTool reports whether a tool name can end an exact rule.
func claudeTool(s string) bool {
	return s != "" && !strings.ContainsAny(s, "*()") && strings.IndexFunc(s, unicode.IsSpace) < 0
}

// ClaudeCode exports the table's tool decisions for principal as Claude
// Code permission rules.
//
// A server whose tools all get one decision becomes one rule, mcp__<server>.
// Otherwise every catalogued tool and every tool a rule names literally gets
// an exact rule with the table's decision for it, so every catalogued tool
// is decided exactly as the table decides it. A tool no rule lists is asked
// about by Claude Code; when the table would allow all such tools, the
// export adds mcp__<server> to allow (exact rules still come first, since
// Claude Code checks deny and ask before allow). A deny glob with no
// catalogue to expand it over makes the whole server denied: stricter, but
// it blocks the tools the table allows there (Export.Coarse).
func ClaudeCode(t *decide.Table, cat *catalog.Catalog, principal string) (*Export, error) {
	ex := &Export{}
	perms := ClaudeCodePermissions{Allow: []string{}, Ask: []string{}, Deny: []string{}}
	add := func(e table.Effect, rule string) {
		switch e {
		case table.Deny:
			perms.Deny = append(perms.Deny, rule)
		case table.Approve:
			perms.Ask = append(perms.Ask, rule)
		default:
			perms.Allow = append(perms.Allow, rule)
		}
	}
	for _, p := range plans(t, cat, principal) {
		if !claudeServer(p.server) {
			ex.Notes = append(ex.Notes, fmt.Sprintf("%s: a server name containing \"__\" cannot start a Claude Code rule (mcp__<server>__<tool> splits at the first \"__\"); Claude Code asks about every tool of it", p.server))
			if p.constant && p.effect == table.Deny || !p.constant && p.minUnlisted() == table.Deny {
				ex.Looser = append(ex.Looser, Looser{Server: p.server, Table: table.Deny, Host: table.Approve})
			}
			for _, n := range p.names {
				if p.decisions[n] == table.Deny {
					ex.Looser = append(ex.Looser, Looser{Server: p.server, Tool: n, Table: table.Deny, Host: table.Approve})
				}
			}
			continue
		}
		whole := "mcp__" + p.server
		if p.constant {
			add(p.effect, whole)
			if !p.inTable {
				ex.Notes = append(ex.Notes, fmt.Sprintf("%s: catalogued but not in the table, which denies every tool of it: denied", p.server))
			}
			continue
		}
		min := p.minUnlisted()
		if min == table.Deny && !p.catalogued && len(p.globs[table.Deny]) > 0 {
			add(table.Deny, whole)
			ex.Coarse = append(ex.Coarse, Coarse{Server: p.server, Rule: whole, Patterns: p.globs[table.Deny]})
			ex.Notes = append(ex.Notes, fmt.Sprintf("%s: the deny pattern(s) %s cannot be written as Claude Code rules, and no catalogue lists the server's tools to expand them over: the whole server is denied (stricter). Run 'policyc catalog pull' and export with --catalog to decide tool by tool",
				p.server, quoteList(p.globs[table.Deny], 3)))
			continue
		}
		serverAllow := min == table.Allow
		if serverAllow {
			add(table.Allow, whole)
		}
		for _, n := range p.names {
			e := p.decisions[n]
			if serverAllow && e == table.Allow {
				continue
			}
			if !claudeTool(n) {
				ex.Notes = append(ex.Notes, fmt.Sprintf("%s: tool %q cannot be named in a Claude Code rule; Claude Code asks about it, the table %s it", p.server, n, effectWord(e)))
				if e == table.Deny {
					ex.Looser = append(ex.Looser, Looser{Server: p.server, Tool: n, Table: e, Host: table.Approve})
				}
				continue
			}
			add(e, whole+"__"+n)
		}
		if serverAllow {
			continue
		}
		// Claude Code asks about every tool no rule lists.
		outside := p.outside()
		if p.unlisted[table.Deny] {
			ex.Notes = append(ex.Notes, fmt.Sprintf("%s: Claude Code asks about %s, and cannot deny them without denying the whole server; the table denies %s", p.server, outside, denyReason(p)))
			ex.Looser = append(ex.Looser, Looser{Server: p.server, Table: table.Deny, Host: table.Approve})
		}
		if p.unlisted[table.Allow] {
			ex.Notes = append(ex.Notes, fmt.Sprintf("%s: Claude Code asks about %s, some of which the table allows%s (stricter)", p.server, outside, globHint(p.globs[table.Allow])))
		}
	}
	ex.unknownServers("Claude Code")
	for _, l := range [][]string{perms.Allow, perms.Ask, perms.Deny} {
		sort.Strings(l)
	}
	b, err := encodeJSON(ClaudeCodeSettings{Permissions: perms})
	if err != nil {
		return nil, err
	}
	ex.File = b
	return ex, nil
}

// globHint names the allow patterns a host cannot write, if any.
func globHint(gs []string) string {
	if len(gs) == 0 {
		return ""
	}
	return " (its allow pattern(s) " + quoteList(gs, 3) + " cannot be written as host rules)"
}

// denyReason says which tools no rule lists the table denies.
func denyReason(p *plan) string {
	gs := p.globs[table.Deny]
	switch {
	case len(gs) > 0 && p.defaultDeny:
		return "those matching its deny pattern(s) " + quoteList(gs, 3) + ", and the others by default"
	case len(gs) > 0:
		return "those matching its deny pattern(s) " + quoteList(gs, 3)
	}
	return "them by default"
}

// cursorTool reports whether a tool name can follow "server:" in an
// mcpAllowlist entry and name that tool only. Cursor's documentation gives
// the entry as "server:tool" and "server:*" for every tool of a server, and
// says nothing of how other characters are read: a tool named "*" would
// make "server:*", which runs every tool of the server, and a ':' or a
// character a glob reads (?, [, {, \) may match more than the tool. So only
// the characters MCP's tool-name format (SEP-986) allows are taken: ASCII
// letters, digits, '_', '-', '.' and '/', none of which is pattern syntax.
// Any other tool is left off the list, so Cursor asks: stricter.
func cursorTool(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.', c == '/':
		default:
			return false
		}
	}
	return true
}

// Cursor exports the table's tool decisions for principal as Cursor's
// permissions.json: an mcpAllowlist of "server:tool" entries ("server:*" for
// a whole server). Cursor runs listed tools without asking and asks before
// any other; it has no deny. Tools on approval are left off (Cursor asks:
// the same), and so are denied tools (Cursor asks: looser, reported).
// The file is JSONC: its comments say what Cursor cannot express.
func Cursor(t *decide.Table, cat *catalog.Catalog, principal, source string) (*Export, error) {
	ex := &Export{}
	list := []string{}
	for _, p := range plans(t, cat, principal) {
		if p.constant {
			switch p.effect {
			case table.Allow:
				list = append(list, p.server+":*")
			case table.Deny:
				what := "denies every tool of it"
				if !p.inTable {
					what = "does not know it, so it denies every tool of it"
				}
				ex.Notes = append(ex.Notes, fmt.Sprintf("%s: Cursor cannot deny; the table %s: left off the allowlist, so Cursor asks before each call", p.server, what))
				ex.Looser = append(ex.Looser, Looser{Server: p.server, Table: table.Deny, Host: table.Approve})
			}
			continue
		}
		var denied, unnamable []string
		for _, n := range p.names {
			switch p.decisions[n] {
			case table.Allow:
				if !cursorTool(n) {
					unnamable = append(unnamable, n)
					continue
				}
				list = append(list, p.server+":"+n)
			case table.Deny:
				denied = append(denied, n)
				ex.Looser = append(ex.Looser, Looser{Server: p.server, Tool: n, Table: table.Deny, Host: table.Approve})
			}
		}
		if len(denied) > 0 {
			ex.Notes = append(ex.Notes, fmt.Sprintf("%s: Cursor cannot deny %s: left off the allowlist, so Cursor asks before each call", p.server, quoteList(denied, 5)))
		}
		if len(unnamable) > 0 {
			ex.Notes = append(ex.Notes, fmt.Sprintf("%s: the table allows %s, whose name an allowlist entry cannot hold (only letters, digits, '_', '-', '.' and '/'): left off the allowlist, so Cursor asks before each call (stricter)", p.server, quoteList(unnamable, 5)))
		}
		outside := p.outside()
		if p.unlisted[table.Deny] {
			ex.Notes = append(ex.Notes, fmt.Sprintf("%s: Cursor asks about %s; the table denies %s", p.server, outside, denyReason(p)))
			ex.Looser = append(ex.Looser, Looser{Server: p.server, Table: table.Deny, Host: table.Approve})
		}
		if p.unlisted[table.Allow] {
			ex.Notes = append(ex.Notes, fmt.Sprintf("%s: Cursor asks about %s, some of which the table allows%s (stricter)", p.server, outside, globHint(p.globs[table.Allow])))
		}
	}
	ex.unknownServers("Cursor")
	sort.Strings(list)
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Exported by policyc export cursor from %s.\n", source)
	b.WriteString("// Cursor runs the tools listed here without asking and asks before any\n")
	b.WriteString("// other MCP tool. It cannot deny and has no approval rules: tools the table\n")
	b.WriteString("// holds for approval or denies are left off, so Cursor asks; the gateway\n")
	b.WriteString("// still enforces the table. This list replaces Cursor's in-app MCP allowlist.\n")
	for _, n := range ex.Notes {
		b.WriteString("//   - " + n + "\n")
	}
	body, err := encodeJSON(struct {
		MCPAllowlist []string `json:"mcpAllowlist"`
	}{list})
	if err != nil {
		return nil, err
	}
	b.Write(body)
	ex.File = b.Bytes()
	return ex, nil
}

// unknownServers reports what no export can say: a host asks about the
// tools of a server it has and the table does not know, which the table
// denies.
func (ex *Export) unknownServers(host string) {
	ex.Notes = append(ex.Notes, fmt.Sprintf("servers the table and the catalogue do not name: %s asks about their tools; the table denies them", host))
	ex.Looser = append(ex.Looser, Looser{Table: table.Deny, Host: table.Approve})
}

func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
