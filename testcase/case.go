// Package testcase runs a policy's test cases: decisions written down beside
// the policy (in its tests/ directory, CUE of package tests, checked against
// #Tests in schema/test.cue) and what each must be. Every case is decided
// by the compiled table loaded into runtime/decide, the code the gateway
// decides with; nothing here evaluates a rule itself. A run also counts, per
// rule, the cases it decided (Coverage), and Snapshot writes the current
// decision of every catalogued item as cases.
//
// Test files are not policy files: the policy's readers (compiler.ReadDir
// and the git readers of internal/gitsrc) read the .cue files directly in
// the policy directory, never a subdirectory, so the tests never enter the
// table and a policy without tests compiles as it did.
package testcase

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/table"
)

// Dir is the directory of a policy's test files, relative to the policy
// root.
const Dir = "tests"

// Package is the CUE package every test file declares.
const Package = "tests"

// Case is one test case: who asks for which item, and the decision it must
// get.
type Case struct {
	// Group and Name are the case's keys: cases: GROUP: NAME: {...}.
	Group, Name string
	// Pos is where the case's name is written.
	Pos compiler.Position
	// Principal is who asks; "" with Groups empty is anyone in no group and
	// with no scope of their own.
	Principal string
	// Groups, when set, are the groups the asker is a member of, exactly,
	// with no scope of their own.
	Groups []string
	Server string
	Kind   table.Kind
	// Item is the tool or prompt name, or the resource URI.
	Item   string
	Expect table.Effect
	// Rule is what must decide it, as written ("" when anything may).
	Rule string

	// at holds where each field of the case is written.
	at map[string]compiler.Position
	// ref is Rule, resolved against the table.
	ref *ruleRef
	// who is the principal the case is decided as: Principal, or one made
	// a member of Groups (see Runner).
	who string
}

// FullName is GROUP/NAME, what --run matches.
func (c *Case) FullName() string { return c.Group + "/" + c.Name }

// At returns where a field of the case is written, or the case's own
// position when the field is not.
func (c *Case) At(field string) compiler.Position {
	if p, ok := c.at[field]; ok {
		return p
	}
	return c.Pos
}

// Parse reads test files (names relative to the policy root, such as
// tests/github.cue) and checks them against the #Tests schema as policies
// are checked against #Policy: encoding, syntax, package, unknown keys with
// suggestions, types. It returns the cases in the order of their positions
// and every problem found; cases whose values the schema refused are left
// out.
func Parse(files []compiler.File) ([]*Case, []compiler.Diagnostic) {
	if len(files) == 0 {
		return nil, nil
	}
	ev := compiler.Evaluate(files, Package, "#Tests")
	diags := slices.Clone(ev.Diagnostics)
	if !ev.Value.Exists() {
		return nil, diags
	}
	var cases []*Case
	groups, err := ev.Value.LookupPath(cue.ParsePath("cases")).Fields()
	if err != nil {
		return nil, diags
	}
	// A case's fields written as a group's cases: their keys, and the
	// one problem of each group that holds them.
	ungrouped := map[string]bool{}
	var misplaced []compiler.Diagnostic
	for groups.Next() {
		group := groups.Selector().Unquoted()
		it, err := groups.Value().Fields()
		if err != nil {
			continue
		}
		var fields []string
		var server string
		hasCases := false
		for it.Next() {
			name := it.Selector().Unquoted()
			key := "cases." + group + "." + name
			if caseFields[name] && it.Value().IncompleteKind()&cue.StructKind == 0 {
				// A case's field where a case is expected: the case is
				// written without its group (cases: "a": {server: ...}).
				fields = append(fields, name)
				ungrouped[key] = true
				if name == "server" {
					server, _ = it.Value().String()
				}
				continue
			}
			hasCases = true
			c, problems := decodeCase(it.Value(), group, name, ev.KeyPos(key))
			diags = append(diags, problems...)
			if c != nil {
				cases = append(cases, c)
			}
		}
		if len(fields) > 0 {
			at := "cases." + group // the case written as its group
			if hasCases {
				at += "." + fields[0] // a field among the cases
			} else {
				ungrouped[at] = true // its name is a case's, not a group's
			}
			misplaced = append(misplaced, ungroupedCase(group, fields, server, hasCases, ev.KeyPos(at)))
		}
	}
	if len(misplaced) > 0 {
		// Their own errors (a string is not a case, a group's name has no
		// space) say less than the one problem of their group.
		diags = slices.DeleteFunc(diags, func(d compiler.Diagnostic) bool {
			for key := d.Path; key != ""; key = key[:max(strings.LastIndexByte(key, '.'), 0)] {
				if ungrouped[key] {
					return true
				}
			}
			return false
		})
		diags = append(diags, misplaced...)
	}
	diags = dropMissing(diags)
	slices.SortStableFunc(cases, func(a, b *Case) int {
		return cmp.Or(cmp.Compare(a.Pos.File, b.Pos.File), cmp.Compare(a.Pos.Line, b.Pos.Line), cmp.Compare(a.Pos.Column, b.Pos.Column),
			cmp.Compare(a.Group, b.Group), cmp.Compare(a.Name, b.Name))
	})
	compiler.SortDiagnostics(diags)
	return cases, diags
}

// caseFields are the fields of a case (#Case in schema/test.cue).
var caseFields = map[string]bool{"principal": true, "groups": true, "server": true, "kind": true, "name": true, "expect": true, "rule": true}

// ungroupedCase is the problem of a group that holds fields of a case,
// not cases: a case written without its group, or (when the group has
// cases too) a field meant for each of them.
func ungroupedCase(group string, fields []string, server string, hasCases bool, pos compiler.Position) compiler.Diagnostic {
	path := "cases." + group
	what := "field " + fields[0]
	if len(fields) > 1 {
		what = "fields " + strings.Join(fields[:len(fields)-1], ", ") + " and " + fields[len(fields)-1]
	}
	in := "GROUP"
	if server != "" {
		in = label(server)
	}
	d := compiler.Diagnostic{Pos: pos, Code: compiler.CodeType, Severity: compiler.Error, Path: path,
		Message:    fmt.Sprintf("%s: a case's %s, written where a case is expected: cases are grouped, cases: GROUP: NAME: {...}", path, what),
		Suggestion: fmt.Sprintf("write the case in a group: cases: %s: %q: {...}", in, group)}
	if hasCases {
		d.Message = fmt.Sprintf("%s: a case's %s, written among the cases of group %q", path, what, group)
		d.Suggestion = fmt.Sprintf("to give every case of the group a field, write it under a pattern: cases: %s: [_]: %s: ...", label(group), fields[0])
	}
	return d
}

// identRE matches a CUE label that needs no quotes.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// label is name as a CUE label: quoted unless it is an identifier.
func label(name string) string {
	if identRE.MatchString(name) {
		return name
	}
	return strconv.Quote(name)
}

// decodeCase reads one case. A field the schema refused is not read (its
// error is reported already) and leaves the case out; a required field
// that is missing is reported here.
func decodeCase(v cue.Value, group, name string, pos compiler.Position) (*Case, []compiler.Diagnostic) {
	c := &Case{Group: group, Name: name, Pos: pos, Kind: table.Tool, at: map[string]compiler.Position{}}
	var problems []compiler.Diagnostic
	ok := v.Err() == nil
	path := "cases." + group + "." + name
	// One pass over the case's fields (a lookup per field costs more).
	fields := map[string]cue.Value{}
	if it, err := v.Fields(); err == nil {
		for it.Next() {
			f := it.Value()
			fields[it.Selector().Unquoted()] = f
			if p := f.Pos(); p.IsValid() {
				c.at[it.Selector().Unquoted()] = compiler.Position{File: p.Filename(), Line: p.Line(), Column: p.Column()}
			}
		}
	}
	str := func(field string) (string, bool) {
		f, found := fields[field]
		if !found {
			return "", false
		}
		s, err := f.String()
		if err != nil {
			ok = false // the schema's error says why
			return "", false
		}
		return s, true
	}
	required := func(field, what string) string {
		_, present := fields[field]
		s, _ := str(field)
		if !present && ok {
			problems = append(problems, compiler.Diagnostic{Pos: pos, Code: compiler.CodeType, Severity: compiler.Error, Path: path,
				Message:    fmt.Sprintf("%s%s%s: %s", path, missingField, field, what),
				Suggestion: "add it, for example " + example[field]})
			ok = false
		}
		return s
	}
	c.Principal, _ = str("principal")
	if g, found := fields["groups"]; found {
		if err := g.Decode(&c.Groups); err != nil {
			ok = false
		} else if c.Groups == nil {
			c.Groups = []string{}
		}
	}
	c.Server = required("server", "every case names the server whose item it decides")
	if k, found := str("kind"); found {
		c.Kind, _ = table.ParseKind(k)
	}
	c.Item = required("name", "every case names the tool, the prompt or the resource URI it decides")
	if e := required("expect", "every case says the decision it must get"); e != "" {
		c.Expect, _ = table.ParseEffect(e)
	}
	c.Rule, _ = str("rule")
	if !ok {
		return nil, problems
	}
	return c, problems
}

// missingField marks the diagnostics decodeCase gives for a required field
// that is missing.
const missingField = ": the case has no "

// dropMissing drops the diagnostic of a missing field of a case that has a
// problem the schema reported: an unknown key is most often the missing
// field misspelt (expcet), and its suggestion says so.
func dropMissing(diags []compiler.Diagnostic) []compiler.Diagnostic {
	reported := map[string]bool{}
	for _, d := range diags {
		if !strings.Contains(d.Message, missingField) {
			if i := strings.LastIndexByte(d.Path, '.'); i > 0 {
				reported[d.Path[:i]] = true
			}
		}
	}
	return slices.DeleteFunc(diags, func(d compiler.Diagnostic) bool {
		return strings.Contains(d.Message, missingField) && reported[d.Path]
	})
}

// example is what a missing required field could be.
var example = map[string]string{
	"server": `server: "github"`,
	"name":   `name: "get_issue"`,
	"expect": `expect: "allow" (or "approve", or "deny")`,
}

// Filter returns the cases whose full name (GROUP/NAME) match selects.
func Filter(cases []*Case, match func(string) bool) []*Case {
	if match == nil {
		return cases
	}
	var out []*Case
	for _, c := range cases {
		if match(c.FullName()) {
			out = append(out, c)
		}
	}
	return out
}

// groupList names groups for messages and for the principal a case
// naming them is decided as.
func groupList(groups []string) string {
	if len(groups) == 0 {
		return "no group"
	}
	return "group " + strings.Join(groups, ", group ")
}
