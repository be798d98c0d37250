package lint

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/clip"
	"github.com/policyc/policyc/internal/suggest"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// Catalogue is what the catalogue rules check a policy against: the
// snapshots beside it (catalog/ in the work tree, or as staged) and, inside
// a repository, the snapshots committed at HEAD.
//
// The rules read the servers' annotations as the servers stated them. They
// are hints, not facts: a finding says what a hint suggests, and no finding
// proves a tool safe.
type Catalogue struct {
	// Current is the snapshot the policy is linted against.
	Current *catalog.Catalog
	// Files are Current's files, named relative to the catalogue directory
	// ("github.json"): findings about an item point at its line.
	Files []catalog.File
	// Committed is the snapshot committed at HEAD; nil outside a
	// repository, or when HEAD has none. input-schema-changed compares
	// Current with it.
	Committed *catalog.Catalog
}

// LintCatalogue is Lint with the catalogue rules: patterns that match no
// catalogued item, items no rule names, tools that may be destructive
// allowed without approval, approvals on read-only tools and input schemas
// changed since HEAD. A nil cat is Lint.
func LintCatalogue(files []compiler.File, cfg *Config, cat *Catalogue) *Report {
	return lint(files, cfg, cat)
}

// catalogueDiagnostics runs the catalogue rules on a policy that compiled.
func catalogueDiagnostics(p *compiler.Policy, t *table.Table, cat *Catalogue) []compiler.Diagnostic {
	if p == nil || t == nil || cat == nil || cat.Current == nil {
		return nil
	}
	rt, err := decide.LoadForInspection(t)
	if err != nil {
		return nil // the compiler refuses every table the runtime refuses
	}
	c := &catalogueCheck{p: p, rt: rt, cat: cat, origins: originPositions(p), lines: map[string][]byte{}, index: map[string]map[string]compiler.Position{}}
	for _, f := range cat.Files {
		c.lines[strings.TrimSuffix(path.Base(f.Name), ".json")] = f.Data
	}
	c.principals = principals(p)
	c.patterns()
	for _, name := range cat.Current.ServerNames() {
		if p.Servers[name] == nil {
			c.unknownServer(name)
		}
	}
	for it := range cat.Current.Items() {
		if p.Servers[it.Server] == nil {
			continue // reported once for the server, by unknownServer
		}
		c.item(it)
	}
	c.unnamed()
	c.schemas()
	return c.diags
}

type catalogueCheck struct {
	p          *compiler.Policy
	rt         *decide.Table
	cat        *Catalogue
	origins    map[string]compiler.Position
	lines      map[string][]byte
	index      map[string]map[string]compiler.Position
	principals []string
	diags      []compiler.Diagnostic
	// allowed collects the items no rule names that a default allows, by
	// server, kind and default, in catalogue order (see unnamed).
	allowed map[unnamedKey][]string
	order   []unnamedKey
}

// unnamedKey is one default that allows catalogued items no rule names.
type unnamedKey struct{ server, kind, scope, origin string }

func (c *catalogueCheck) add(d compiler.Diagnostic) { c.diags = append(c.diags, d) }

// patterns reports every pattern of a server with a snapshot that matches
// none of the server's catalogued items of its kind. Patterns of a scope's
// block for every server ("*") are left out: they are written for servers
// whatever they offer. Resource patterns of a server with resource
// templates are left out too: a template's URIs are not listed.
func (c *catalogueCheck) patterns() {
	check := func(server, kind string, a *compiler.Access) {
		snap := c.cat.Current.Servers[server]
		if a == nil || snap == nil || kind == table.Resource.String() && len(snap.ResourceTemplates) > 0 {
			return
		}
		names := c.cat.Current.ItemNames(server, kind)
		for _, l := range a.OrderedLists() {
			// A deny that matches nothing today is a guard against what
			// the server may offer later, not a mistake: an info, so that
			// a misspelling still shows with its nearest names.
			guard := l == a.Deny
			for _, e := range l.Entries {
				if e.Glob == nil || matchesAny(e, names) {
					continue
				}
				d := compiler.Diagnostic{Pos: e.Pos, Code: compiler.CodePatternNotCatalogued, Severity: compiler.Warning, Path: l.Path,
					Message: fmt.Sprintf("%s pattern %s matches no %s in the catalogue of %s (%s)", kind, clip.Quote(e.Pattern), kind, server, path.Join(catalog.Dir, server+".json"))}
				if guard {
					d.Severity = compiler.Info
					d.Message += ": a guard for now, it denies nothing the server offers today"
				}
				near := compiler.Nearest(e.Pattern, names, 3)
				switch {
				case len(near) > 0 && guard:
					d.Suggestion = "nothing to do if it is a guard against a later " + kind + "; if it is misspelt, the nearest catalogued names are " + quoteList(near)
				case len(near) > 0:
					d.Suggestion = "did you mean " + quoteList(near) + "?"
				case guard:
					d.Suggestion = "nothing to do if it is a guard against a later " + kind + "; check the name against the catalogue if it should deny one today"
				default:
					d.Suggestion = "check the name against the catalogue, or pull the catalogue again if the server has a new " + kind
				}
				c.add(d)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.p.Servers)) {
		for _, k := range compiler.Kinds {
			check(name, k, c.p.Servers[name].Access[k])
		}
	}
	for _, sc := range c.p.Scopes() {
		for _, name := range slices.Sorted(maps.Keys(sc.Servers)) {
			if name == table.AllServers || c.p.Servers[name] == nil {
				continue
			}
			for _, k := range compiler.Kinds {
				check(name, k, sc.Servers[name].Access[k])
			}
		}
	}
}

func matchesAny(e compiler.Entry, names []string) bool {
	for _, n := range names {
		if e.Glob.Match(n) {
			return true
		}
	}
	return false
}

// item reports a catalogued item that no rule names, and for tools what
// their annotations suggest about the decisions of every principal.
func (c *catalogueCheck) item(it catalog.Item) {
	kind, ok := table.ParseKind(it.Kind)
	if !ok {
		return
	}
	ex := c.rt.Explain("", it.Server, kind, it.Name)
	// Under a default deny an item no rule names is denied: the policy
	// working, not a finding. Under a default allow it is served though no
	// one named it, and so is whatever the server adds later.
	if d := ex.Decision; d.Reason == decide.ByDefault && d.Rule == nil && len(ex.Beaten) == 0 && d.Effect == table.Allow {
		k := unnamedKey{server: it.Server, kind: it.Kind, scope: d.Scope, origin: d.Origin}
		if _, seen := c.allowed[k]; !seen {
			if c.allowed == nil {
				c.allowed = map[unnamedKey][]string{}
			}
			c.order = append(c.order, k)
		}
		c.allowed[k] = append(c.allowed[k], it.Name)
	}
	if it.Tool == nil {
		return
	}
	destroy, readOnly := it.Tool.MayDestroy(), it.Tool.ReadOnly()
	if !destroy && !readOnly {
		return
	}
	// One finding per deciding rule or default, naming the principals.
	type decider struct{ origin, pattern string }
	byOrigin := map[decider][]string{}
	var order []decider
	for _, pr := range c.principals {
		d := c.rt.Decide(pr, it.Server, table.Tool, it.Name)
		if destroy && d.Effect != table.Allow || readOnly && d.Effect != table.Approve {
			continue
		}
		k := decider{origin: d.Origin}
		if d.Rule != nil {
			k.pattern = d.Rule.Pattern
		}
		if _, seen := byOrigin[k]; !seen {
			order = append(order, k)
		}
		byOrigin[k] = append(byOrigin[k], pr)
	}
	for _, k := range order {
		origin := k.origin
		who := whom(byOrigin[k], len(c.principals))
		pos := c.originPos(origin, k.pattern)
		if destroy {
			d := compiler.Diagnostic{Pos: pos, Code: compiler.CodeDestructiveAllowed, Severity: compiler.Warning,
				Message: fmt.Sprintf("%s tool %s may be destructive by its annotations (%s) and is allowed without approval %s by %s",
					it.Server, clip.Quote(it.Name), hints(it.Tool), who, decidedBy(origin, table.Allow.String(), k.pattern)),
				Suggestion: fmt.Sprintf("put %s on mcp_servers.%s.access.tool.approval_list, or deny it; if the server is wrong about the tool, say so in a policyc:ignore comment", clip.Quote(it.Name), it.Server)}
			// A server that states no hints at all leaves every tool
			// destructive by the defaults, read_graph as much as
			// delete_entities; an allow entry that names the tool itself
			// is a choice made with the name in view. An info: the
			// warning is kept for what a glob or a default lets through
			// unseen, and for a server that says destructive.
			if noHints(it.Tool) && k.pattern == it.Name && !strings.ContainsAny(k.pattern, `*?[\`) {
				d.Severity = compiler.Info
				d.Message += ", which names it: the server states no hints, so only the defaults call it destructive"
			}
			c.add(d)
		} else {
			c.add(compiler.Diagnostic{Pos: pos, Code: compiler.CodeApprovalOnReadOnly, Severity: compiler.Info,
				Message: fmt.Sprintf("%s tool %s is read-only by its annotations (readOnlyHint true) and needs approval %s by %s: an ask where no one needs one makes the approval queue longer",
					it.Server, clip.Quote(it.Name), who, decidedBy(origin, table.Approve.String(), k.pattern)),
				Suggestion: fmt.Sprintf("allow %s instead, if you trust the server's hint; keep the approval if you do not", clip.Quote(it.Name))})
		}
	}
}

// unnamed reports, once per server, kind and default, the catalogued items
// that no rule names and a default allows, at the default: that is where
// the choice was made, and where an ignore comment can say it is meant.
func (c *catalogueCheck) unnamed() {
	for _, k := range c.order {
		names := c.allowed[k]
		scope := ""
		if k.scope != decide.ServerScope {
			scope = " of scope " + k.scope
		}
		var what string
		if len(names) == 1 {
			what = fmt.Sprintf("%s %s %s is catalogued but no rule names it: it falls to the default allow%s set here",
				k.server, k.kind, clip.Quote(names[0]), scope)
		} else {
			what = fmt.Sprintf("%s: %d catalogued %ss are named by no rule (%s): they fall to the default allow%s set here",
				k.server, len(names), k.kind, someNames(names, 3), scope)
		}
		c.add(compiler.Diagnostic{Pos: c.originPos(k.origin, ""), Code: compiler.CodeItemFallsToDefault, Severity: compiler.Info,
			Message: what + ", and so will any " + k.kind + " the server adds",
			Suggestion: fmt.Sprintf("list what you mean to allow in mcp_servers.%s.access.%s.allow_list and set its default to deny, or say in a policyc:ignore comment that every %s is meant to be allowed",
				k.server, k.kind, k.kind)})
	}
}

// someNames quotes the first n names, and counts the rest.
func someNames(names []string, n int) string {
	if len(names) <= n {
		return quoteList(names)
	}
	return fmt.Sprintf("%s and %d more", quoteList(names[:n]), len(names)-n)
}

// unknownServer reports the snapshot of a server that mcp_servers does not
// define, once, at its "server" key: the gateway denies every item of such
// a server, whatever the defaults say, and no rule can name one. Most often
// the server has another name in the policy than in the gateway's upstreams.
func (c *catalogueCheck) unknownServer(name string) {
	file := path.Join(catalog.Dir, catalog.FileName(name))
	d := compiler.Diagnostic{Pos: serverKeyPos(file, c.lines[name]), Code: compiler.CodeItemFallsToDefault, Severity: compiler.Info,
		Message: fmt.Sprintf("server %s is catalogued (%s) but mcp_servers does not define it: the gateway denies every item of it",
			clip.Quote(name), c.cat.Current.Servers[name].Counts())}
	// The servers of the policy without a snapshot are the ones this
	// server may be under another name.
	var bare []string
	for _, s := range slices.Sorted(maps.Keys(c.p.Servers)) {
		if c.cat.Current.Servers[s] == nil {
			bare = append(bare, s)
		}
	}
	switch near := suggest.Suggest(name, bare); {
	case near != "":
		d.Suggestion = fmt.Sprintf("did you mean mcp_servers.%s? Give the server one name in the policy and in the gateway's upstreams (the snapshot is named after the upstream)", near)
	case len(bare) > 0:
		d.Suggestion = fmt.Sprintf("mcp_servers defines %s with no snapshot: if one is this server, give it one name in the policy and in the gateway's upstreams; else define mcp_servers.%s, or remove %s if the server is gone",
			strings.Join(bare, ", "), name, file)
	default:
		d.Suggestion = fmt.Sprintf("define mcp_servers.%s in the policy, or remove %s if the server is gone", name, file)
	}
	c.add(d)
}

// serverKeyPos is the position of the top-level "server" key of a snapshot
// file, in the file's own layout; the file's first line when it is not on
// a line of its own.
func serverKeyPos(file string, data []byte) compiler.Position {
	for i, l := range bytes.Split(data, []byte("\n")) {
		if bytes.HasPrefix(l, []byte(`  "server":`)) {
			return compiler.Position{File: file, Line: i + 1, Column: 3}
		}
	}
	return compiler.Position{File: file, Line: 1}
}

// schemas reports the catalogued tools whose input schema differs from the
// snapshot committed at HEAD.
func (c *catalogueCheck) schemas() {
	if c.cat.Committed == nil {
		return
	}
	for it := range c.cat.Current.Items() {
		if it.Tool == nil {
			continue
		}
		old := c.cat.Committed.Tool(it.Server, it.Name)
		if old == nil {
			continue
		}
		was, now := old.InputSchemaDigest(), it.Tool.InputSchemaDigest()
		if was == now {
			continue
		}
		d := "allowed"
		if kind, ok := table.ParseKind(it.Kind); ok {
			d = c.rt.Decide("", it.Server, kind, it.Name).Effect.String()
		}
		c.add(compiler.Diagnostic{Pos: c.itemPos(it), Code: compiler.CodeInputSchemaChanged, Severity: compiler.Warning,
			Message: fmt.Sprintf("the input schema of %s tool %s changed since the snapshot committed at HEAD (%s → %s); its decision is %s",
				it.Server, clip.Quote(it.Name), shortDigest(was), shortDigest(now), d),
			Suggestion: "review what the new arguments let a caller do (the change to " + path.Join(catalog.Dir, it.Server+".json") + "), then commit the snapshot"})
	}
}

func shortDigest(d string) string {
	if d == "" {
		return "none"
	}
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

// noHints reports whether a tool's server states neither readOnlyHint nor
// destructiveHint for it.
func noHints(t *catalog.Tool) bool {
	return t.Annotations == nil || t.Annotations.ReadOnlyHint == nil && t.Annotations.DestructiveHint == nil
}

// hints describes the annotations that make a tool possibly destructive.
func hints(t *catalog.Tool) string {
	a := t.Annotations
	ro, de := "readOnlyHint not given: false by default", "destructiveHint not given: true by default"
	if a != nil && a.ReadOnlyHint != nil {
		ro = "readOnlyHint false"
	}
	if a != nil && a.DestructiveHint != nil {
		de = "destructiveHint true"
	}
	return ro + "; " + de
}

// decidedBy names the rule or default that decided: its list, pattern and
// origin.
func decidedBy(origin, effect, pattern string) string {
	switch {
	case origin == "":
		return "the built-in default"
	case pattern == "":
		return "the default at " + origin
	}
	list := "allow_list"
	if effect == table.Approve.String() {
		list = "approval_list"
	}
	return fmt.Sprintf("%s entry %s at %s", list, clip.Quote(pattern), origin)
}

// whom names the principals a finding is about; "" is anyone without a
// group or principal scope of their own.
func whom(prs []string, all int) string {
	if len(prs) == all {
		return "for everyone"
	}
	names := make([]string, len(prs))
	for i, p := range prs {
		if p == "" {
			p = "anyone without a scope of their own"
		}
		names[i] = p
	}
	return "for " + strings.Join(names, ", ")
}

// principals are the anonymous principal ("") and every principal named
// in a principal scope or as a group member, sorted.
func principals(p *compiler.Policy) []string {
	set := map[string]bool{}
	for name := range p.Principals {
		set[name] = true
	}
	for _, g := range p.Groups {
		for _, m := range g.Members {
			set[m] = true
		}
	}
	return append([]string{""}, slices.Sorted(maps.Keys(set))...)
}

// originPositions maps the file:line origins the table records, with the
// pattern of a rule ("" for a default or an allow list's default), to the
// positions of the entries and defaults written there.
func originPositions(p *compiler.Policy) map[string]compiler.Position {
	m := map[string]compiler.Position{}
	put := func(pos compiler.Position, pattern string) {
		key := pos.Origin() + "\x00" + pattern
		if _, ok := m[key]; !ok {
			m[key] = pos
		}
	}
	access := func(a *compiler.Access) {
		if a == nil {
			return
		}
		if a.Default != nil {
			put(a.Default.Pos, "")
		}
		for _, l := range a.OrderedLists() {
			put(l.Pos, "")
			for _, e := range l.Entries {
				put(e.Pos, e.Pattern)
			}
		}
	}
	for _, d := range p.Defaults {
		put(d.Pos, "")
	}
	for _, s := range p.Servers {
		for _, a := range s.Access {
			access(a)
		}
	}
	for _, sc := range p.Scopes() {
		for _, ss := range sc.Servers {
			for _, a := range ss.Access {
				access(a)
			}
		}
	}
	return m
}

// originPos turns a table origin back into a policy position.
func (c *catalogueCheck) originPos(origin, pattern string) compiler.Position {
	if pos, ok := c.origins[origin+"\x00"+pattern]; ok {
		return pos
	}
	i := strings.LastIndexByte(origin, ':')
	if i < 0 {
		return compiler.Position{File: origin}
	}
	line, _ := strconv.Atoi(origin[i+1:])
	return compiler.Position{File: origin[:i], Line: line}
}

// itemPos is the position of an item in its snapshot file: its "name" (or
// "uri") key, in whatever layout the file has; the file's first line when
// it cannot be found.
func (c *catalogueCheck) itemPos(it catalog.Item) compiler.Position {
	file := path.Join(catalog.Dir, it.Server+".json")
	idx, ok := c.index[it.Server]
	if !ok {
		idx = indexSnapshot(file, c.lines[it.Server])
		c.index[it.Server] = idx
	}
	if pos, ok := idx[it.Kind+"\x00"+it.Name]; ok {
		return pos
	}
	return compiler.Position{File: file, Line: 1}
}

// indexSnapshot maps "kind\x00name" to the position of the item's name
// (tools, prompts) or uri (resources) key in a snapshot file, read once.
func indexSnapshot(file string, data []byte) map[string]compiler.Position {
	idx := map[string]compiler.Position{}
	for k, off := range catalog.ItemKeys(data) {
		start := bytes.LastIndexByte(data[:off], '\n') + 1
		idx[k] = compiler.Position{File: file, Line: 1 + bytes.Count(data[:off], []byte("\n")), Column: utf8.RuneCount(data[start:off]) + 1}
	}
	return idx
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}
