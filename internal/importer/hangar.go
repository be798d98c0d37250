package importer

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/policyc/policyc/runtime/table"
)

// The keys of an MCP Hangar config.yaml that the import knows. A key it
// does not know is an error: a misspelt deny_list would otherwise vanish.

// hangarTop are the top-level sections that configure the Hangar process,
// not access: reported as not carried over.
var hangarTop = []string{
	"approvals", "auth", "batch", "config_reload", "coordination", "discovery",
	"event_store", "execution", "headers", "health", "hot_loading", "interceptors",
	"knowledge_base", "logging", "observability", "persistence", "rate_limit",
	"retry", "startup_checks", "truncation",
}

// hangarServerKeys are the keys of an mcp_servers entry that say how to run
// or reach the server, not what it may do.
var hangarServerKeys = []string{
	"args", "auth", "auto_start", "build", "canary", "capabilities", "circuit_breaker",
	"command", "description", "endpoint", "env", "header_exposure", "health",
	"health_check_interval_s", "http", "idle_ttl_s", "image", "max_concurrency",
	"max_consecutive_failures", "members", "min_healthy", "mode", "network",
	"network_mode", "read_only", "resources", "strategy", "tls", "tool_projection",
	"user", "volumes",
}

var hangarMemberKeys = append([]string{"id", "priority", "weight", "tools", "access"}, hangarServerKeys...)

var hangarPolicyKeys = []string{"allow_list", "deny_list", "approval_list", "approval_timeout_seconds", "approval_channel"}

var hangarAccessKeys = []string{"prompt", "resource"}

// Hangar imports the access policy of an MCP Hangar config.yaml.
//
// Hangar's semantics, made explicit in the policy: a server (or kind) with
// no lists allows everything; an allow_list denies what it does not list;
// deny_list beats approval_list beats allow_list. Patterns are fnmatch
// globs, translated exactly (FromFnmatch).
func Hangar(name string, data []byte) *Result {
	h := &hangarImport{file: name, p: &policy{
		tool: "policyc import hangar", source: filepath.Base(name), servers: map[string]*server{},
		header: []string{
			"Hangar allows everything a server's lists do not restrict, and denies by",
			"default once a server has an allow_list: every default below says which.",
		},
	}, expanded: map[*yaml.Node][]pair{}, expanding: map[*yaml.Node]bool{}}
	h.run(data)
	sortFindings(h.findings)
	res := &Result{Findings: h.findings}
	if !res.HasErrors() {
		out, err := h.p.cue()
		if err != nil {
			res.Findings = append(res.Findings, Finding{Pos: Pos{File: name}, Error: true, Message: err.Error()})
		} else {
			res.CUE = out
		}
	}
	return res
}

type hangarImport struct {
	file     string
	p        *policy
	findings []Finding
	// expanded holds the entries of each mapping pairs has expanded, and
	// expanding the mappings it is expanding now: a mapping merged from
	// many places is expanded once (merges of merges cost their size, not
	// the number of ways to reach them), and a merge into a mapping that
	// is itself being expanded is found, not followed for ever.
	expanded  map[*yaml.Node][]pair
	expanding map[*yaml.Node]bool
}

func (h *hangarImport) pos(n *yaml.Node) Pos {
	return Pos{File: h.file, Line: n.Line, Column: n.Column}
}

func (h *hangarImport) errorf(n *yaml.Node, path, suggestion, format string, args ...any) {
	h.findings = append(h.findings, Finding{Pos: h.pos(n), Path: path, Error: true, Message: fmt.Sprintf(format, args...), Suggestion: suggestion})
}

func (h *hangarImport) notef(n *yaml.Node, path, format string, args ...any) {
	h.findings = append(h.findings, Finding{Pos: h.pos(n), Path: path, Message: fmt.Sprintf(format, args...)})
}

func (h *hangarImport) unknown(k *yaml.Node, path string, known []string) {
	s := ""
	if best := suggest(k.Value, known); best != "" {
		s = fmt.Sprintf("did you mean %q?", best)
	} else {
		s = "policyc import knows the keys listed in docs/catalog.md; remove it, or import by hand"
	}
	h.errorf(k, join(path, k.Value), s, "unknown key %q: not carried over, and not ignored", k.Value)
}

// yamlLine reads the line of a syntax error from go.yaml.in/yaml/v3
// (v3.0.6), which gives it only in the message ("yaml: line 3: ..."): the
// error's type is not exported. The "not YAML" case of TestHangarRefusals
// fails when that wording changes.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// yamlError reports err, a YAML syntax error, at its line when it has one.
func (h *hangarImport) yamlError(err error) {
	msg := err.Error()
	pos := Pos{File: h.file}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		pos.Line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	h.findings = append(h.findings, Finding{Pos: pos, Error: true, Message: "not valid YAML: " + strings.TrimPrefix(msg, "yaml: ")})
}

func (h *hangarImport) run(data []byte) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	err := dec.Decode(&doc)
	if err == io.EOF {
		h.findings = append(h.findings, Finding{Pos: Pos{File: h.file}, Error: true, Message: "the file is empty: no mcp_servers to import"})
		return
	}
	if err != nil {
		h.yamlError(err)
		return
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		h.errorf(&more, "", "keep the configuration in one document", "a second YAML document: Hangar reads one configuration per file")
		return
	} else if err != io.EOF {
		h.yamlError(err)
		return
	}
	if len(doc.Content) == 0 {
		h.findings = append(h.findings, Finding{Pos: Pos{File: h.file}, Error: true, Message: "the file is empty: no mcp_servers to import"})
		return
	}
	root := deref(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		h.errorf(root, "", "", "expected a mapping of configuration sections, found %s", kindName(root))
		return
	}
	h.repeatedKeys(root, "", map[*yaml.Node]bool{})
	known := append([]string{"mcp_servers", "providers", "tool_access", "ui_resources"}, hangarTop...)
	var servers []pair
	section := "mcp_servers"
	for _, kv := range h.pairs(root, "") {
		k, v := kv.k, kv.v
		switch {
		case k.Value == "mcp_servers" || k.Value == "providers":
			if servers != nil {
				h.errorf(k, k.Value, "keep one of mcp_servers and providers (its older name)", "both mcp_servers and providers are set")
				continue
			}
			if v.Kind != yaml.MappingNode {
				h.errorf(v, k.Value, "", "expected a mapping of servers by id, found %s", kindName(v))
				continue
			}
			servers, section = h.pairs(v, k.Value), k.Value
			if servers == nil {
				servers = []pair{}
			}
		case k.Value == "tool_access":
			h.errorf(k, k.Value, "write per-principal or per-group narrowing under principals or groups in the policy by hand (docs/policy.md), then import without tool_access",
				"per-tenant tool access cannot be carried over: policyc scopes principals and groups, not tenants, and dropping it would allow tenants more")
		case k.Value == "ui_resources":
			h.notef(k, k.Value, "not carried over: policyc allowlists ui:// resources per server (mcp_servers.<name>.ui), with a consent channel; until you add them, every ui:// resource is denied, which is stricter")
		case contains(hangarTop, k.Value):
			h.notef(k, k.Value, "not carried over: it configures the Hangar process, not access")
		default:
			h.unknown(k, "", known)
		}
	}
	if servers == nil {
		h.findings = append(h.findings, Finding{Pos: h.pos(root), Error: true, Message: "no mcp_servers section: nothing to import"})
		return
	}
	for _, kv := range servers {
		h.server(section, kv.k, kv.v)
	}
}

func (h *hangarImport) server(section string, k, v *yaml.Node) {
	name := k.Value
	path := section + "." + name
	if !table.ValidName(name) {
		h.errorf(k, path, "rename the server to letters, digits, '.', '_' and '-', starting with a letter or digit (and use the same name in the gateway configuration)",
			"%q cannot name a policyc server", name)
		return
	}
	if v.Kind != yaml.MappingNode {
		h.errorf(v, path, "", "expected a mapping (the server's settings), found %s", kindName(v))
		return
	}
	s := h.p.server(name, h.pos(k))
	var tools, prompt, resource *yaml.Node
	var toolsKey, accessKey *yaml.Node
	var deployment []string
	for _, kv := range h.pairs(v, path) {
		switch kv.k.Value {
		case "tools":
			toolsKey, tools = kv.k, kv.v
		case "access":
			accessKey = kv.k
			if kv.v.Kind != yaml.MappingNode {
				h.errorf(kv.v, path+".access", "", "expected a mapping with prompt and resource, found %s", kindName(kv.v))
				continue
			}
			for _, a := range h.pairs(kv.v, path+".access") {
				switch a.k.Value {
				case "prompt":
					prompt = a.v
				case "resource":
					resource = a.v
				default:
					h.unknown(a.k, path+".access", hangarAccessKeys)
				}
			}
		case "members":
			h.members(kv.v, path+".members")
			deployment = append(deployment, kv.k.Value)
		default:
			if contains(hangarServerKeys, kv.k.Value) {
				deployment = append(deployment, kv.k.Value)
				continue
			}
			h.unknown(kv.k, path, append([]string{"tools", "access"}, hangarServerKeys...))
		}
	}
	if len(deployment) > 0 {
		h.notef(k, path, "not carried over: %s (how the server runs, not what it may do; upstreams belong in the gateway configuration)", strings.Join(deployment, ", "))
	}
	switch {
	case tools == nil:
		s.kinds[table.Tool.String()] = &access{def: table.Allow.String(), why: "Hangar: no tools policy, so every tool is allowed."}
	case tools.Kind == yaml.SequenceNode:
		h.notef(toolsKey, path+".tools", "a list of predefined tool schemas, not an access policy: every tool stays allowed, as in Hangar")
		s.kinds[table.Tool.String()] = &access{def: table.Allow.String(), why: "Hangar: tools lists predefined schemas, no access policy: every tool is allowed."}
	default:
		s.kinds[table.Tool.String()] = h.block(tools, path+".tools", table.Tool.String())
	}
	for _, kb := range []struct {
		kind string
		node *yaml.Node
	}{{table.Prompt.String(), prompt}, {table.Resource.String(), resource}} {
		if kb.node == nil {
			why := fmt.Sprintf("Hangar: no access.%s block, so every %s is allowed.", kb.kind, kb.kind)
			if accessKey == nil {
				why = fmt.Sprintf("Hangar: no access block, so every %s is allowed.", kb.kind)
			}
			s.kinds[kb.kind] = &access{def: table.Allow.String(), why: why}
			continue
		}
		s.kinds[kb.kind] = h.block(kb.node, path+".access."+kb.kind, kb.kind)
	}
}

// members checks that no member of a group has an access policy of its own.
func (h *hangarImport) members(v *yaml.Node, path string) {
	if v.Kind != yaml.SequenceNode {
		return
	}
	for i, m := range v.Content {
		m = deref(m)
		if m.Kind != yaml.MappingNode {
			continue
		}
		mpath := fmt.Sprintf("%s[%d]", path, i)
		for _, kv := range h.pairs(m, mpath) {
			switch {
			case kv.k.Value == "tools" && deref(kv.v).Kind == yaml.MappingNode, kv.k.Value == "access":
				h.errorf(kv.k, join(mpath, kv.k.Value), "put the lists on the group (mcp_servers.<group>.tools), which is the server the policy decides for",
					"an access policy on one member of a group cannot be carried over: policyc decides per server, and a group is one server to its clients")
			case !contains(hangarMemberKeys, kv.k.Value):
				h.unknown(kv.k, mpath, hangarMemberKeys)
			}
		}
	}
}

// block reads one policy block (tools, access.prompt or access.resource).
func (h *hangarImport) block(n *yaml.Node, path, kind string) *access {
	a := &access{}
	if n.Kind != yaml.MappingNode {
		h.errorf(n, path, "", "expected a mapping of allow_list, deny_list and approval_list, found %s", kindName(n))
		return a
	}
	var allow, deny, approval []entry
	for _, kv := range h.pairs(n, path) {
		kpath := join(path, kv.k.Value)
		switch kv.k.Value {
		case "allow_list":
			allow = h.patterns(kv.v, kpath)
		case "deny_list":
			deny = h.patterns(kv.v, kpath)
		case "approval_list":
			if kind != table.Tool.String() {
				h.errorf(kv.k, kpath, "use deny_list to withhold the item",
					"approval_list under %s is refused: no approval hold exists on a fetch (policyc refuses it too, permanently)", kind)
				continue
			}
			approval = h.patterns(kv.v, kpath)
		case "approval_timeout_seconds":
			if kind != table.Tool.String() {
				h.notef(kv.k, kpath, "not carried over: no approval hold exists on a fetch")
				continue
			}
			t, err := strconv.Atoi(kv.v.Value)
			if kv.v.Kind != yaml.ScalarNode || kv.v.ShortTag() != "!!int" || err != nil || t <= 0 {
				h.errorf(kv.v, kpath, "", "expected a positive whole number of seconds, found %q", kv.v.Value)
				continue
			}
			a.timeout, a.timeoutPos = t, h.pos(kv.v)
		case "approval_channel":
			if kind != table.Tool.String() {
				h.notef(kv.k, kpath, "not carried over: no approval hold exists on a fetch")
				continue
			}
			h.notef(kv.k, kpath, "not carried over: approvals go to the gateway's approvals page (approval_channels.%s); define a webhook channel in the policy to send them elsewhere", ApprovalChannel)
		default:
			h.unknown(kv.k, path, hangarPolicyKeys)
		}
	}
	a.deny, a.approval, a.allow = deny, approval, allow
	if len(allow) > 0 {
		a.def = table.Deny.String()
		a.why = fmt.Sprintf("Hangar: %s has an allow_list, so what no list names is denied.", path)
	} else {
		a.def = table.Allow.String()
		a.why = fmt.Sprintf("Hangar: %s has no allow_list, so what no list names is allowed.", path)
	}
	return a
}

func (h *hangarImport) patterns(n *yaml.Node, path string) []entry {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		h.errorf(n, path, `write a list, e.g. ["get_*", "list_*"]`, "expected a list of patterns, found %s", kindName(n))
		return nil
	}
	var out []entry
	for i, e := range n.Content {
		e = deref(e)
		epath := fmt.Sprintf("%s[%d]", path, i)
		if e.Kind != yaml.ScalarNode || e.ShortTag() != "!!str" || e.Value == "" {
			h.errorf(e, epath, "quote it as a non-empty string", "expected a non-empty string pattern, found %s", describe(e))
			continue
		}
		g, err := FromFnmatch(e.Value)
		if err != nil {
			h.errorf(e, epath, "", "cannot be carried over exactly: %v", err)
			continue
		}
		en := entry{glob: g, pos: h.pos(e)}
		if g != e.Value {
			en.from = e.Value
		}
		out = append(out, en)
	}
	return out
}

// repeatedKeys reports every key written twice in one mapping, anywhere in
// the file. A YAML reader keeps one of the two values (Hangar's, the last)
// and drops the other without a word; an import that did the same would
// leave out rules the file shows.
func (h *hangarImport) repeatedKeys(n *yaml.Node, path string, visited map[*yaml.Node]bool) {
	n = deref(n)
	if n == nil || visited[n] {
		return
	}
	visited[n] = true
	switch n.Kind {
	case yaml.SequenceNode:
		for i, e := range n.Content {
			h.repeatedKeys(e, fmt.Sprintf("%s[%d]", path, i), visited)
		}
	case yaml.MappingNode:
		first := map[string]*yaml.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Value == "<<" && k.ShortTag() == "!!merge" {
				h.repeatedKeys(n.Content[i+1], path, visited)
				continue
			}
			if prev, ok := first[k.Value]; ok {
				h.errorf(k, join(path, k.Value), "keep one of the two, with every entry it should have",
					"key %q appears twice (first at %s): Hangar reads only the last one, and the import refuses to drop either without a word", k.Value, h.pos(prev))
			} else {
				first[k.Value] = k
			}
			h.repeatedKeys(n.Content[i+1], join(path, k.Value), visited)
		}
	}
}

// pair is a key and its value in a mapping.
type pair struct{ k, v *yaml.Node }

// pairs returns a mapping's entries in order, with aliases resolved and
// merge keys (<<) expanded; an explicit key overrides a merged one. A merge
// of a mapping that contains it (`a: &x {<<: *x}`) is an error: it has no
// expansion.
func (h *hangarImport) pairs(m *yaml.Node, path string) []pair {
	m = deref(m)
	if out, ok := h.expanded[m]; ok {
		return out
	}
	h.expanding[m] = true
	defer delete(h.expanding, m)
	var out []pair
	seen := map[string]bool{}
	var merged []pair
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], deref(m.Content[i+1])
		if k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == "!!merge" {
			srcs := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				srcs = v.Content
			}
			for _, src := range srcs {
				switch src = deref(src); {
				case src.Kind != yaml.MappingNode:
				case h.expanding[src]:
					h.errorf(k, path, "merge a mapping defined apart from this one, or write the keys out",
						"merge key (<<) merges the mapping at %s, which contains this merge: the merge has no end", h.pos(src))
				default:
					merged = append(merged, h.pairs(src, path)...)
				}
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			h.errorf(k, path, "", "expected a plain key, found %s", kindName(k))
			continue
		}
		seen[k.Value] = true
		out = append(out, pair{k, v})
	}
	for _, kv := range merged {
		if !seen[kv.k.Value] {
			seen[kv.k.Value] = true
			out = append(out, kv)
		}
	}
	h.expanded[m] = out
	return out
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return describe(n)
	}
	return "something else"
}

func describe(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return kindName(n)
	}
	switch n.ShortTag() {
	case "!!null":
		return "nothing (null)"
	case "!!str":
		return fmt.Sprintf("the string %q", n.Value)
	}
	return fmt.Sprintf("the %s %s", strings.TrimPrefix(n.ShortTag(), "!!"), n.Value)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }
