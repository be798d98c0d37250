package compiler

import (
	"slices"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/parser"
)

// schemaChildNames are keys to look up in every struct of a schema besides
// the ones it declares: names its patterns match and names they do not.
var schemaChildNames = []string{"a", "web", "b1", "bx", "ABC", "x.y", "u@example.com", "case 1",
	"-lead", "Bad Name", "line\nbreak", "", "_h", "#d", "name", "server"}

// checkSchemaChild compares schemaChild, which shares answers between keys
// that match the same patterns, with the lookup it saves, for every key of
// schemaChildNames and every key declared, in every struct under schema
// down to depth levels.
func checkSchemaChild(t *testing.T, c *compilation, schema cue.Value, path string, depth int) {
	t.Helper()
	if depth == 0 || schema.IncompleteKind()&cue.StructKind == 0 {
		return
	}
	names := append(c.knownKeys(schema), schemaChildNames...)
	for _, name := range names {
		got, gotOK := c.schemaChild(schema, name)
		want, wantOK := cue.Value{}, false
		if schema.Allows(cue.Str(name)) {
			want, wantOK = lookupChild(c.ctx, schema, name)
		}
		at := path + "." + name
		if gotOK != wantOK {
			t.Errorf("%s: schemaChild says %v, the lookup %v", at, gotOK, wantOK)
			continue
		}
		if !gotOK {
			continue
		}
		if err := got.Subsume(want, cue.Schema()); err != nil {
			t.Errorf("%s: the shared answer %v does not subsume the lookup's %v: %v", at, got, want, err)
		}
		if err := want.Subsume(got, cue.Schema()); err != nil {
			t.Errorf("%s: the lookup's answer %v does not subsume the shared %v: %v", at, want, got, err)
		}
		if g, w := c.knownKeys(got), c.knownKeys(want); !slices.Equal(g, w) {
			t.Errorf("%s: known keys %v, the lookup's %v", at, g, w)
		}
		if g, w := got.IncompleteKind(), want.IncompleteKind(); g != w {
			t.Errorf("%s: kind %v, the lookup's %v", at, g, w)
		}
		if slices.Contains(schemaChildNames, name) && depth <= 2 {
			continue // a pattern's value is explored under the keys it declares
		}
		checkSchemaChild(t, c, got, at, depth-1)
	}
}

func TestSchemaChildAgreesWithLookup(t *testing.T) {
	for _, tc := range []struct{ pkg, def string }{
		{PackageName, "#Policy"}, {"policyc", "#LintConfig"}, {"gateway", "#Gateway"}, {"tests", "#Tests"},
	} {
		t.Run(tc.def, func(t *testing.T) {
			c := newCompilation(tc.pkg, tc.def)
			c.policyDef = c.schema().LookupPath(cue.ParsePath(tc.def))
			if !c.labelFree {
				t.Fatal("the embedded schema binds a label: keys matched by one pattern share no answer")
			}
			checkSchemaChild(t, c, c.policyDef, tc.def, 5)
		})
	}
}

// TestSchemaChildSharesAnswers: the keys of one map get one schema value,
// so the lookups under them are done once.
func TestSchemaChildSharesAnswers(t *testing.T) {
	c := newCompilation("tests", "#Tests")
	c.policyDef = c.schema().LookupPath(cue.ParsePath("#Tests"))
	cases, _ := c.schemaChild(c.policyDef, "cases")
	group, _ := c.schemaChild(cases, "github")
	one, ok1 := c.schemaChild(group, "alice merges")
	two, ok2 := c.schemaChild(group, "bob reads")
	if !ok1 || !ok2 || one != two {
		t.Fatalf("two cases of a group: %v (%v) and %v (%v), want one shared value", one, ok1, two, ok2)
	}
	if _, ok := c.schemaChild(group, "two\nlines"); ok {
		t.Fatal("a case name with a line break is allowed")
	}
}

// TestSchemaChildOtherSchemas: structs with overlapping patterns, open
// structs, and patterns whose value uses the key through an alias.
func TestSchemaChildOtherSchemas(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		labelFree bool
	}{
		{"overlapping patterns", `#S: {
	m?: {[=~"^[a-z]"]: {x?: int}, [=~"^b"]: {y?: string}, [=~"x$"]: close({z?: bool}), fixed?: {w?: int}}
	n?: [string]: [=~"^[a-z]+$"]: {k?: int}
}`, true},
		{"open structs", `#S: {
	o?: {[=~"^b"]: {y?: int}, ...}
	p?: {a?: int, ...}
}`, true},
		{"alias", `#S: {
	m?: [N=string]: {name: N, x?: int}
}`, false},
		{"postfix alias", `@experiment(aliasv2)
#S: {
	m?: [string]~(K,_): {name: K, x?: int}
}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parser.ParseFile("s.cue", tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if bindsLabel(f) == tc.labelFree {
				t.Fatalf("bindsLabel = %v, want %v", tc.labelFree, !tc.labelFree)
			}
			c := newCompilation("s", "#S")
			c.labelFree = !bindsLabel(f)
			v := c.ctx.BuildFile(f)
			if err := v.Err(); err != nil {
				t.Fatal(err)
			}
			c.policyDef = v.LookupPath(cue.ParsePath("#S"))
			checkSchemaChild(t, c, c.policyDef, "#S", 4)
		})
	}
}
