package config

import (
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"github.com/policyc/policyc/schema"
)

// gatewayDef is the schema's #Gateway, built once, for missingRequired.
var gatewayDef = sync.OnceValue(func() cue.Value {
	text, ok := schema.Text(Package)
	if !ok {
		panic("the embedded schema has no gateway surface")
	}
	v := cuecontext.New().CompileBytes(text, cue.Filename("schema/gateway.cue"))
	if err := v.Err(); err != nil {
		panic("the embedded gateway schema does not compile: " + err.Error())
	}
	return v.LookupPath(cue.ParsePath("#Gateway"))
})

// missingRequired lists the required keys (dotted) the configuration v
// leaves out, in the blocks it sets. CUE checks required keys only once
// every value is valid (cuelang.org/go v0.17.1), so a refused value
// elsewhere would hide them until a second run; skip says which keys not
// to look into (refused as a whole).
func missingRequired(v cue.Value, skip func(string) bool) []string {
	var out []string
	walkRequired(gatewayDef(), v, "", skip, &out)
	return out
}

func walkRequired(def, v cue.Value, path string, skip func(string) bool, out *[]string) {
	join := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	declared := map[string]bool{}
	it, err := def.Fields(cue.Optional(true))
	if err != nil {
		return
	}
	for it.Next() {
		sel := it.Selector()
		if !sel.IsString() {
			continue
		}
		name := sel.Unquoted()
		declared[name] = true
		key := join(name)
		if skip(key) {
			continue
		}
		uv := v.LookupPath(cue.MakePath(cue.Str(name)))
		if !uv.Exists() {
			if sel.ConstraintType() == cue.RequiredConstraint {
				*out = append(*out, key)
			}
			continue
		}
		if uv.IncompleteKind() == cue.StructKind {
			walkRequired(it.Value(), uv, key, skip, out)
		}
	}
	// The entries of a map (principals, approvers) are checked against
	// its pattern's element, as the schema applies it to each.
	ut, err := v.Fields()
	if err != nil {
		return
	}
	var unified cue.Value
	for ut.Next() {
		name := ut.Selector().Unquoted()
		key := join(name)
		if declared[name] || skip(key) || ut.Value().IncompleteKind() != cue.StructKind {
			continue
		}
		if !unified.Exists() {
			unified = def.Unify(v)
		}
		if elem := unified.LookupPath(cue.MakePath(cue.Str(name))); elem.Exists() {
			walkRequired(elem, ut.Value(), key, skip, out)
		}
	}
}
