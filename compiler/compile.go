// Package compiler turns CUE policy sources into a checked Policy and a
// frozen decision table.
//
// It reports every problem it finds, not just the first, each as a
// Diagnostic with a position, a stable code and a severity; a table is
// produced only when there is no error. It never reads the clock: the same
// sources and compiler version give the same table bytes.
//
// It imports the decision engine (runtime/decide) in one place only:
// FreezeItems decides each catalogued item with the table just built, so
// that the items frozen into the table are decided by the code the gateway
// runs, not by a second evaluator. The policy's vocabulary (kinds, effects)
// comes from runtime/table.
package compiler

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/parser"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/internal/clip"
	"github.com/policyc/policyc/runtime/table"
	"github.com/policyc/policyc/schema"
)

// Version is the compiler version recorded in every table.
const Version = "0.1.0"

// DefaultApprovalTimeout is approval_timeout_seconds when a policy sets
// none: how long an approval request lives, for a human to decide it.
const DefaultApprovalTimeout = 900

// Input is what to compile.
type Input struct {
	// Files are the policy sources; names are relative to the policy root.
	Files []File
	// Source is the provenance recorded in the table (policy path, and the
	// commit when compiled from git).
	Source table.Source
	// Serial is recorded in the table; see docs/git.md for how it is derived.
	Serial uint64
	// Catalog, when set, is the policy's catalogue snapshot: the table then
	// records the decision for every catalogued item (FreezeItems).
	Catalog *catalog.Catalog
}

// Result is the outcome of a compilation.
type Result struct {
	// Diagnostics are sorted by position.
	Diagnostics []Diagnostic
	// Policy is the checked policy, nil when the sources could not be read
	// as one.
	Policy *Policy
	// Table is the decision table, nil when there is any error.
	Table *table.Table
}

// compilation is the state of one Evaluate or Compile call.
type compilation struct {
	ctx *cue.Context
	// def is the schema definition the sources are checked against, and
	// pkg the CUE package they must declare.
	def, pkg  string
	policyDef cue.Value
	parsed    *parsed
	// badKeys are the keys the key check reported (see reportedKey).
	badKeys map[string]bool
	// markedKeys are the keys written with a field constraint marker (?
	// or !), and markedAt where: each is reported once.
	markedKeys map[string]bool
	markedAt   map[Position]bool
	// badImports are the imports checkImports reported: CUE's later
	// error at each use of them is not reported again.
	badImports map[string]bool
	diags      []Diagnostic
	// labelFree says the embedded schema binds no label to a name (it
	// has no alias), so that a pattern constraint's value is the same for
	// every key it applies to; see schemaChild.
	labelFree bool
	// children and byPattern are schemaChild's answers, by key and, for
	// a key only pattern constraints define, by the patterns it matches.
	children  map[childKey]childAnswer
	byPattern map[patternKey]childAnswer
	shapes    map[cue.Value]*schemaShape
}

func newCompilation(pkg, def string) *compilation {
	return &compilation{ctx: cuecontext.New(), def: def, pkg: pkg, badKeys: map[string]bool{},
		markedKeys: map[string]bool{}, markedAt: map[Position]bool{},
		children: map[childKey]childAnswer{}, byPattern: map[patternKey]childAnswer{}, shapes: map[cue.Value]*schemaShape{}}
}

func (c *compilation) add(d Diagnostic) { c.diags = append(c.diags, d) }

// Evaluation is CUE sources checked against a schema definition.
type Evaluation struct {
	// Value is the evaluated sources (without schema defaults). It must not
	// be used when Diagnostics hold an error.
	Value cue.Value
	// Diagnostics are sorted by position.
	Diagnostics []Diagnostic
	c           *compilation
}

// KeyPos returns where a dotted key path (e.g. "rules.shadowed-rule.level")
// was written, or where its closest enclosing key was.
func (e *Evaluation) KeyPos(dotted string) Position { return e.c.keyPos(dotted) }

// Evaluate reads CUE sources of package pkg and checks them against the
// schema definition def (for example "#Policy"): encoding, syntax, package
// clause, unknown keys with suggestions, types. Every other CUE input of
// policyc (lint configuration, gateway configuration) is read through it, so
// all report problems the same way.
func Evaluate(files []File, pkg, def string) *Evaluation {
	c := newCompilation(pkg, def)
	v := c.evaluate(files)
	SortDiagnostics(c.diags)
	return &Evaluation{Value: v, Diagnostics: c.diags, c: c}
}

// evaluate runs the checks of Evaluate and returns the evaluated value.
func (c *compilation) evaluate(files []File) cue.Value {
	c.policyDef = c.schema().LookupPath(cue.ParsePath(c.def))
	if !c.policyDef.Exists() {
		panic("embedded schema has no definition " + c.def)
	}
	c.parsed = c.parseFiles(files)
	if !c.checkSize(c.parsed.files) {
		return cue.Value{}
	}
	c.checkKeys(c.parsed)
	partial := len(c.parsed.files) < len(files)
	if partial && len(c.parsed.files) == 0 {
		return cue.Value{}
	}
	v := c.ctx.BuildInstance(c.instance(c.parsed, true))
	errs := c.evalErrors(v)
	if partial {
		// Some files could not be read: only the errors no other file could
		// take back are reported, and nothing is read further.
		c.cueErrorList(c.finalErrors(errs), CodeType)
		return cue.Value{}
	}
	if !plainData(c.parsed.files) {
		// Sources with no reference, pattern, embedding or marker can hold
		// no field that is only a constraint: nothing to walk for.
		c.checkMarkedValues(v, nil)
	}
	if len(unresolved(errs)) > 0 {
		// A reference not found leaves nothing evaluated: the other
		// problems are looked for without it.
		errs = append(errs, c.finalErrors(errs)...)
	}
	c.cueErrorList(errs, CodeType)
	return v
}

// schema builds the embedded schema package.
func (c *compilation) schema() cue.Value {
	inst := build.NewContext().NewInstance("", nil)
	c.labelFree = true
	for _, f := range schema.Files() {
		tree, err := parser.ParseFile(f.Name, f.Data, parser.ParseComments)
		if err != nil {
			panic("embedded schema does not parse: " + err.Error())
		}
		c.labelFree = c.labelFree && !bindsLabel(tree)
		if err := inst.AddSyntax(tree); err != nil {
			panic("embedded schema: " + err.Error())
		}
	}
	v := c.ctx.BuildInstance(inst)
	if err := v.Err(); err != nil {
		panic("embedded schema does not compile: " + err.Error())
	}
	return v
}

// Compile checks the policy sources and, when they hold no error, freezes
// them into a table.
func Compile(in Input) *Result {
	c := newCompilation(PackageName, "#Policy")
	res := &Result{}
	defer func() {
		SortDiagnostics(c.diags)
		res.Diagnostics = c.diags
	}()
	if len(in.Files) == 0 {
		c.add(Diagnostic{Pos: Position{File: "."}, Code: CodeNoPolicy, Severity: Error,
			Message:    "no .cue files in the policy directory",
			Suggestion: "point policyc at the directory that holds the policy, or run `policyc init` to create one"})
		return res
	}
	v := c.evaluate(in.Files)
	if !v.Exists() || v.Err() != nil {
		return res
	}
	// Read the policy even when it has type errors, so globs, channels and
	// references are reported in the same run; the decoder stays quiet
	// about values CUE already called wrong.
	typeErrors := HasErrors(c.diags)
	p := decoder{c: c, quiet: typeErrors}.policy(v)
	c.check(p)
	if !typeErrors {
		c.diags = append(c.diags, Reach(p)...)
	}
	if HasErrors(c.diags) {
		if !typeErrors {
			res.Policy = p
		}
		return res
	}
	res.Policy = p
	res.Table = Freeze(p, in.Source, in.Serial)
	if in.Catalog != nil {
		items, err := FreezeItems(res.Table, in.Catalog)
		if err != nil {
			res.Diagnostics = append(res.Diagnostics, Diagnostic{Code: CodeInvalidGlob, Severity: Error,
				Message: "the frozen table does not load: " + err.Error()})
			res.Table = nil
			return res
		}
		res.Table.Items = items
		// A server with a snapshot is held to it unless the policy says
		// otherwise.
		for name, ts := range res.Table.Servers {
			if _, ok := in.Catalog.Servers[name]; ok && ts.Pins == "" {
				ts.Pins = table.PinsEnforce
				res.Table.Servers[name] = ts
			}
		}
	}
	return res
}

// check reports what the schema cannot express: references between parts
// of the policy, and approvals or consent that no human can give.
func (c *compilation) check(p *Policy) {
	// Every channel reference names a defined channel.
	var globalChannel *Setting
	if p.Global != nil {
		if a := p.Global.Servers[table.AllServers]; a != nil && a.Access[table.Tool.String()] != nil {
			globalChannel = a.Access[table.Tool.String()].Channel
		}
	}
	type ref struct {
		s    *Setting
		what string
		path string
	}
	var refs []ref
	if globalChannel != nil {
		refs = append(refs, ref{globalChannel, "approval", "global.access.tool.approval_channel"})
	}
	for _, name := range slices.Sorted(maps.Keys(p.Servers)) {
		s := p.Servers[name]
		if tool := s.Access[table.Tool.String()]; tool != nil && tool.Channel != nil {
			refs = append(refs, ref{tool.Channel, "approval", tool.Path + ".approval_channel"})
		}
		if s.UI != nil && s.UI.ConsentChannel.Value != "" {
			refs = append(refs, ref{&s.UI.ConsentChannel, "consent", "mcp_servers." + name + ".ui.consent_channel"})
		}
	}
	for _, r := range refs {
		if _, ok := p.Channels[r.s.Value]; !ok {
			c.add(Diagnostic{Pos: r.s.Pos, Code: CodeUnknownChannel, Severity: Error, Path: r.path,
				Message:    fmt.Sprintf("%s: %s channel %s is not defined in approval_channels", r.path, r.what, clip.Quote(r.s.Value)),
				Suggestion: channelSuggestion(r.s.Value, slices.Sorted(maps.Keys(p.Channels)))})
		}
	}
	// reaches reports whether a reference ends at a human. An undefined
	// channel counts as reaching one here: it is already an error above.
	reaches := func(r *Setting) bool {
		if r == nil {
			return false
		}
		ch, ok := p.Channels[r.Value]
		return !ok || ch.ReachesHuman
	}
	served := map[string]bool{}
	// channelOf is the approval channel a server's tool calls go to, nil
	// when none is set.
	channelOf := map[string]*Setting{}
	for _, name := range slices.Sorted(maps.Keys(p.Servers)) {
		s := p.Servers[name]
		ch := globalChannel
		if tool := s.Access[table.Tool.String()]; tool != nil && tool.Channel != nil {
			ch = tool.Channel
		}
		served[name], channelOf[name] = reaches(ch), ch
		if s.UI == nil || len(s.UI.Allow) == 0 {
			continue
		}
		path := "mcp_servers." + name + ".ui"
		switch {
		case s.UI.ConsentChannel.Value == "":
			c.add(Diagnostic{Pos: s.UI.Pos, Code: CodeUINoConsent, Severity: Error, Path: path,
				Message:    fmt.Sprintf("%s: ui:// resources are allowlisted but no consent_channel is set, so every one of them would be denied", path),
				Suggestion: "set consent_channel to a channel that reaches a human (for example the approvals page), or remove the allowlist"})
		case !reaches(&s.UI.ConsentChannel):
			c.add(Diagnostic{Pos: s.UI.ConsentChannel.Pos, Code: CodeUINoConsent, Severity: Error, Path: path + ".consent_channel",
				Message:    fmt.Sprintf("%s.consent_channel: channel %s does not reach a human, so consent can never be given", path, clip.Quote(s.UI.ConsentChannel.Value)),
				Suggestion: "use a channel with reaches_human: true"})
		}
	}
	// Every approval_list must end at a human, for every server it applies to.
	checkApprovals := func(a *Access, servers []string) {
		if a == nil || a.Approval == nil || len(a.Approval.Entries) == 0 {
			return
		}
		var unserved []string
		for _, s := range servers {
			if !served[s] {
				unserved = append(unserved, s)
			}
		}
		if len(unserved) == 0 {
			return
		}
		if ch := channelOf[unserved[0]]; len(unserved) == 1 && ch != nil && p.Channels[ch.Value].Kind != "" {
			// The channel is set, to one of a kind, that is not marked
			// as reaching a human: name it.
			def := p.Channels[ch.Value]
			c.add(Diagnostic{Pos: a.Approval.Pos, Code: CodeApprovalNoHuman, Severity: Error, Path: a.Approval.Path,
				Message: fmt.Sprintf("%s: calls would be held for approval, but server %s's approval_channel %s (%s), of kind %s, does not have reaches_human: true, so no one could ever approve them",
					a.Approval.Path, clip.Quote(unserved[0]), clip.Quote(ch.Value), ch.Pos, def.Kind),
				Suggestion: fmt.Sprintf("if a person answers channel %s, set reaches_human: true in approval_channels.%s (%s); otherwise set approval_channel to a channel that reaches a human, such as approvals_page: {}",
					clip.Quote(ch.Value), ch.Value, def.Pos)})
			return
		}
		c.add(Diagnostic{Pos: a.Approval.Pos, Code: CodeApprovalNoHuman, Severity: Error, Path: a.Approval.Path,
			Message: fmt.Sprintf("%s: calls would be held for approval, but %s no approval channel that reaches a human, so no one could ever approve them",
				a.Approval.Path, plural(unserved, "server %s has", "servers %s have")),
			Suggestion: "set approval_channel (on the server or in global.access.tool) to a channel with reaches_human: true, such as approvals_page: {}"})
	}
	all := slices.Sorted(maps.Keys(p.Servers))
	for _, name := range all {
		checkApprovals(p.Servers[name].Access[table.Tool.String()], []string{name})
		if s := p.Servers[name]; s.Audit {
			path := "mcp_servers." + name + ".audit"
			c.add(Diagnostic{Pos: s.AuditPos, Code: CodeAuditMode, Severity: Warning, Path: path,
				Message:    fmt.Sprintf("%s: server %s is in audit mode: the gateway serves every request its rules deny or hold, and logs would_deny or would_hold (a table of serial 0 that sets it is refused)", path, clip.Quote(name)),
				Suggestion: "remove audit: true once the decision log shows the rules decide as intended"})
		}
		if strings.Contains(name, "__") || strings.HasSuffix(name, "_") {
			// The gateway names a tool <server>__<tool> and splits at the
			// first "__": such a server's tools would not round-trip.
			path := "mcp_servers." + name
			c.add(Diagnostic{Pos: p.Servers[name].Pos, Code: CodeServerSeparator, Severity: Warning, Path: path,
				Message:    fmt.Sprintf("%s: the gateway shows this server's tools as %s, and a server name with \"__\" or a trailing \"_\" cannot be told apart from the tool name after it, so policyc gateway refuses this server", path, clip.Quote(name+"__<tool>")),
				Suggestion: fmt.Sprintf("rename the server, here and in the gateway's upstreams, for example to %s", clip.Quote(singleUnderscores(name)))})
		}
	}
	for _, sc := range p.scopes() {
		for _, sname := range slices.Sorted(maps.Keys(sc.Servers)) {
			ss := sc.Servers[sname]
			if sname == table.AllServers {
				checkApprovals(ss.Access[table.Tool.String()], all)
				continue
			}
			if _, ok := p.Servers[sname]; !ok {
				path := scopePath(sc.Name) + ".mcp_servers." + sname
				c.add(Diagnostic{Pos: ss.Pos, Code: CodeUnknownServer, Severity: Warning, Path: path,
					Message:    fmt.Sprintf("%s: server %s is not defined in mcp_servers, so these rules never apply", path, clip.Quote(sname)),
					Suggestion: suggestion("check the name; defined servers are", all)})
				continue
			}
			checkApprovals(ss.Access[table.Tool.String()], []string{sname})
		}
	}
}

// singleUnderscores is name with each run of underscores made one, and
// none at the end: a name the gateway can namespace.
func singleUnderscores(name string) string {
	for strings.Contains(name, "__") {
		name = strings.ReplaceAll(name, "__", "_")
	}
	return strings.TrimRight(name, "_")
}

// scopes returns the narrowing scopes in evaluation order.
func (p *Policy) scopes() []*Scope {
	var out []*Scope
	if p.Global != nil {
		out = append(out, p.Global)
	}
	for _, n := range slices.Sorted(maps.Keys(p.Groups)) {
		out = append(out, p.Groups[n])
	}
	for _, n := range slices.Sorted(maps.Keys(p.Principals)) {
		out = append(out, p.Principals[n])
	}
	return out
}

// Scopes returns the narrowing scopes in evaluation order: global, groups,
// principals.
func (p *Policy) Scopes() []*Scope { return p.scopes() }

// scopePath turns a scope name into the key path it was written at.
func scopePath(name string) string {
	switch {
	case strings.HasPrefix(name, "group:"):
		return "groups." + strings.TrimPrefix(name, "group:")
	case strings.HasPrefix(name, "principal:"):
		return "principals." + strings.TrimPrefix(name, "principal:")
	}
	return name
}

func plural(names []string, one, many string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = clip.Quote(n)
	}
	if len(names) == 1 {
		return fmt.Sprintf(one, quoted[0])
	}
	return fmt.Sprintf(many, strings.Join(quoted, ", "))
}

// channelSuggestion is what to do about an undefined channel name: the
// defined one it likely misspells, else the defined ones.
func channelSuggestion(name string, defined []string) string {
	switch near := Suggest(name, defined); {
	case near != "":
		return fmt.Sprintf("did you mean %q? Else define %s under approval_channels", near, clip.Quote(name))
	case len(defined) == 1:
		return fmt.Sprintf("define it under approval_channels, or use %q", defined[0])
	}
	return suggestion("define it under approval_channels, or use one of", defined)
}

func suggestion(prefix string, names []string) string {
	if len(names) == 0 {
		return strings.TrimSuffix(prefix, ", or use one of")
	}
	return prefix + " " + strings.Join(names, ", ")
}
