package testcase

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/clip"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// ruleRef is a case's rule, resolved: what must decide it.
type ruleRef struct {
	// byDefault: a default must decide ("default").
	byDefault bool
	// origin is FILE:LINE, when the rule is named so.
	origin string
	// list, pattern and scope name the rule as explain does; scope may be
	// "".
	list, pattern, scope string
}

// decided reports whether a decision was made by what ref names.
func (ref *ruleRef) decided(d decide.Decision) bool {
	switch {
	case ref.byDefault:
		return d.Reason == decide.ByDefault
	case d.Rule == nil:
		return false
	case ref.origin != "":
		return d.Rule.Origin == ref.origin
	}
	return listOf(d.Rule.Effect) == ref.list && d.Rule.Pattern == ref.pattern && (ref.scope == "" || ref.scope == d.Scope)
}

// matches reports whether want names r (by origin, or by list and
// pattern).
func (r *ruleAt) matches(want *ruleRef) bool {
	if want.origin != "" {
		return r.rule.Origin == want.origin
	}
	return listOf(r.rule.Effect) == want.list && r.rule.Pattern == want.pattern && (want.scope == "" || want.scope == r.scope)
}

// label is a rule as explain names it: deny_list "delete_*" (server scope).
func (r *ruleAt) label() string {
	return fmt.Sprintf("%s %q (%s scope)", listOf(r.rule.Effect), r.rule.Pattern, r.scope)
}

// listOf is the policy key a rule of an effect is written under.
func listOf(effect string) string {
	switch effect {
	case table.Deny.String():
		return "deny_list"
	case table.Approve.String():
		return "approval_list"
	}
	return "allow_list"
}

var (
	originRE = regexp.MustCompile(`^(.+\.cue):([1-9][0-9]*)(:[0-9]+)?$`)
	labelRE  = regexp.MustCompile(`^(deny_list|approval_list|allow_list) ("(?:[^"\\]|\\.)*")(?: \(([^()]+) scope\))?$`)
)

// Check resolves cases against the compiled table t: every server,
// group and rule a case names must exist, and what it expects must be a
// decision the policy can give. It returns a problem for each that is
// not; the cases must not be run while there is any.
func Check(cases []*Case, t *table.Table) []compiler.Diagnostic {
	rs := indexRules(t)
	servers := slices.Sorted(maps.Keys(t.Servers))
	var groups []string
	known := map[string]bool{}
	for _, sc := range t.Scopes {
		if g, ok := strings.CutPrefix(sc.Name, "group:"); ok {
			groups = append(groups, g)
		}
		if p, ok := strings.CutPrefix(sc.Name, "principal:"); ok {
			known[p] = true
		}
		for _, m := range sc.Members {
			known[m] = true
		}
	}
	principals := slices.Sorted(maps.Keys(known))
	// decided decides a case for a suggestion, with one runner built for
	// all cases when the first needs it (a policy edit can move every
	// FILE:LINE a file names).
	var runner *Runner
	decided := func(c *Case) (decide.Decision, bool) {
		if runner == nil {
			r, err := NewRunner(t, cases)
			if err != nil {
				return decide.Decision{}, false
			}
			runner = r
		}
		return runner.rt.Decide(c.who, c.Server, c.Kind, c.Item), true
	}
	var diags []compiler.Diagnostic
	for _, c := range cases {
		diags = append(diags, check(c, t, rs, servers, groups, decided)...)
		if p := c.Principal; p != "" && !known[p] {
			if near := compiler.Suggest(p, principals); near != "" {
				path := "cases." + c.Group + "." + c.Name + ".principal"
				diags = append(diags, compiler.Diagnostic{Pos: c.At("principal"), Code: compiler.CodeType, Severity: compiler.Warning, Path: path,
					Message:    fmt.Sprintf("%s: principal %s is in no group and has no scope of its own, so the case is decided as anyone without one", path, clip.Quote(p)),
					Suggestion: fmt.Sprintf("did you mean %q?", near)})
			}
		}
	}
	compiler.SortDiagnostics(diags)
	return diags
}

func check(c *Case, t *table.Table, rs *rules, servers, groups []string, decided func(*Case) (decide.Decision, bool)) []compiler.Diagnostic {
	var diags []compiler.Diagnostic
	path := "cases." + c.Group + "." + c.Name
	bad := func(field, msg, suggestion string) {
		diags = append(diags, compiler.Diagnostic{Pos: c.At(field), Code: compiler.CodeType, Severity: compiler.Error,
			Path: path + "." + field, Message: path + "." + field + ": " + msg, Suggestion: suggestion})
	}
	if c.Principal != "" && c.Groups != nil {
		bad("groups", "a case names a principal or a set of groups, not both: the principal's groups are the policy's",
			"remove groups to decide as "+clip.Quote(c.Principal)+", or principal to decide as a member of exactly these groups")
	}
	for _, g := range c.Groups {
		if !slices.Contains(groups, g) {
			bad("groups", fmt.Sprintf("group %s is not defined in the policy's groups", clip.Quote(g)), nearest("groups", g, groups))
		}
	}
	if _, ok := t.Servers[c.Server]; !ok {
		bad("server", fmt.Sprintf("server %s is not defined in the policy's mcp_servers, so every item of it is denied and no rule could be tested", clip.Quote(c.Server)),
			nearest("servers", c.Server, servers))
		return diags
	}
	if c.Expect == table.Approve && c.Kind != table.Tool {
		bad("expect", fmt.Sprintf("a %s is never held for approval (approval holds exist for tool calls only), so no %s can be decided approve", c.Kind, c.Kind),
			`expect "allow" or "deny"`)
	}
	if c.Rule == "" {
		return diags
	}
	ref, problem, suggestion := parseRef(c.Rule)
	if ref == nil {
		bad("rule", problem, suggestion)
		return diags
	}
	if ref.byDefault {
		if c.Expect == table.Approve {
			bad("rule", "no default holds a call for approval (a default is allow or deny), so a default never decides approve",
				"name the approval_list entry that holds it, or expect what the default decides")
		}
		c.ref = ref
		return diags
	}
	what := fmt.Sprintf("%s's %ss", c.Server, c.Kind)
	var named []*ruleAt
	for _, i := range rs.of[serverKind{c.Server, c.Kind}] {
		if r := &rs.all[i]; r.matches(ref) {
			named = append(named, r)
		}
	}
	if len(named) == 0 {
		bad("rule", fmt.Sprintf("no rule of %s is %s%s", what, refText(ref), elsewhere(ref, c, t, rs)), candidates(ref, c, rs, decided))
		return diags
	}
	var decides []*ruleAt
	for _, r := range named {
		if !r.keeps() {
			decides = append(decides, r)
		}
	}
	if len(decides) == 0 {
		bad("rule", fmt.Sprintf("%s is an allow_list entry of %s, which never decides a case: a narrower scope only takes access away, and its allow_list keeps the names it matches from being denied by it",
			named[0].label(), named[0].scope), "name the rule that decides the case (policyc explain shows it)")
		return diags
	}
	if !slices.ContainsFunc(decides, func(r *ruleAt) bool { return r.rule.Effect == c.Expect.String() }) {
		r := decides[0]
		bad("rule", fmt.Sprintf("%s decides %s, so a case it decides cannot be %s", r.label(), r.rule.Effect, c.Expect),
			fmt.Sprintf("expect %q, or name the rule that decides %s", r.rule.Effect, c.Expect))
		return diags
	}
	c.ref = ref
	return diags
}

// parseRef reads a case's rule: "default", FILE:LINE, or a rule as explain
// names it.
func parseRef(s string) (ref *ruleRef, problem, suggestion string) {
	forms := `write "default", the rule's origin as FILE:LINE relative to the policy directory ("github.cue:12"), or the rule as policyc explain names it (deny_list "delete_*", optionally followed by (SCOPE scope))`
	if s == "default" {
		return &ruleRef{byDefault: true}, "", ""
	}
	if m := originRE.FindStringSubmatch(s); m != nil {
		if m[3] != "" {
			return nil, fmt.Sprintf("%s has a column: a rule's origin is FILE:LINE", clip.Quote(s)), fmt.Sprintf("write %q", m[1]+":"+m[2])
		}
		return &ruleRef{origin: s}, "", ""
	}
	if m := labelRE.FindStringSubmatch(s); m != nil {
		pattern, err := strconv.Unquote(m[2])
		if err == nil {
			return &ruleRef{list: m[1], pattern: pattern, scope: m[3]}, "", ""
		}
	}
	return nil, fmt.Sprintf("%s names no rule", clip.Quote(s)), forms
}

// refText is how a message names what a ref names.
func refText(ref *ruleRef) string {
	if ref.origin != "" {
		return "written at " + clip.Quote(ref.origin) // quoted: as the case wrote it, relative to the policy directory
	}
	s := fmt.Sprintf("%s %q", ref.list, ref.pattern)
	if ref.scope != "" {
		s += " in scope " + ref.scope
	}
	return s
}

// elsewhere says what the table holds where a ref points, when it is not
// a rule of the case's server and kind: a rule of another block, or a
// default.
func elsewhere(ref *ruleRef, c *Case, t *table.Table, rs *rules) string {
	for i := range rs.all {
		r := &rs.all[i]
		if r.matches(ref) {
			server := r.server
			if server == table.AllServers {
				server = "every server"
			}
			return fmt.Sprintf(" (%s is a rule of %s's %ss)", r.label(), server, r.kind)
		}
	}
	if ref.origin == "" {
		return ""
	}
	if a := t.Servers[c.Server]; a.Access(c.Kind) != nil && a.Access(c.Kind).DefaultOrigin == ref.origin {
		return fmt.Sprintf(` (%s is where the %s default of %s is set: write rule: "default")`, ref.origin, c.Kind, c.Server)
	}
	return ""
}

// candidates suggests the rule of the case's server and kind a ref may
// have meant: the rule written at the same place relative to the policy
// directory, else the rule or default that decides the case (the nearest
// line or spelling is most often another rule, and the case would still
// fail), else the nearest in spelling, or those written in the same file.
func candidates(ref *ruleRef, c *Case, rs *rules, decided func(*Case) (decide.Decision, bool)) string {
	var names []string
	seen := map[string]bool{}
	for _, i := range rs.of[serverKind{c.Server, c.Kind}] {
		r := &rs.all[i]
		n := r.rule.Origin
		if ref.origin == "" {
			n = fmt.Sprintf("%s %q", listOf(r.rule.Effect), r.rule.Pattern)
		}
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return fmt.Sprintf("%s has no rules of its own or of any scope: only a default decides them; write rule: \"default\"", fmt.Sprintf("%s's %ss", c.Server, c.Kind))
	}
	if ref.origin != "" {
		for _, n := range names {
			if strings.HasSuffix(ref.origin, "/"+n) {
				return fmt.Sprintf("origins are relative to the policy directory: did you mean %q?", n)
			}
		}
	}
	if d, ok := decided(c); ok {
		if name := decider(ref, d, rs); name != "" {
			if d.Effect != c.Expect {
				return fmt.Sprintf("the case is decided %s, not %s, by %q: check its server, kind, name and expect (policyc explain shows the decision)", d.Effect, c.Expect, name)
			}
			return fmt.Sprintf("did you mean %q? it decides the case", name)
		}
	}
	want := ref.origin
	if want == "" {
		want = fmt.Sprintf("%s %q", ref.list, ref.pattern)
	}
	if near := compiler.Suggest(want, names); near != "" {
		return fmt.Sprintf("did you mean %q?", near)
	}
	const shown = 5
	list := strings.Join(names[:min(shown, len(names))], ", ")
	if len(names) > shown {
		list += fmt.Sprintf(" and %d more", len(names)-shown)
	}
	return "its rules are " + list
}

// decider names what made decision d as a case's rule names it, in the
// form of ref: "default", the rule's FILE:LINE, or the rule as explain
// names it (its scope only when it is not the server's). It is "" when
// neither a rule nor a default decided.
func decider(ref *ruleRef, d decide.Decision, rs *rules) string {
	switch {
	case d.Reason == decide.ByDefault:
		return "default"
	case d.Rule == nil:
		return ""
	case ref.origin != "":
		return d.Rule.Origin
	}
	i, ok := rs.byPtr[d.Rule]
	if !ok {
		return ""
	}
	r := &rs.all[i]
	if r.narrowing() {
		return r.label()
	}
	return fmt.Sprintf("%s %q", listOf(r.rule.Effect), r.rule.Pattern)
}

// nearest suggests the known name closest to name, or lists the known
// names (what they are: "servers", "groups").
func nearest(what, name string, known []string) string {
	if near := compiler.Suggest(name, known); near != "" {
		return fmt.Sprintf("did you mean %q?", near)
	}
	if len(known) == 0 {
		return "the policy defines no " + what
	}
	return "check the name; the policy's " + what + " are " + strings.Join(known, ", ")
}
