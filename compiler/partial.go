package compiler

import (
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
)

// evalErrors returns the errors of the evaluated sources v: those of the
// sources alone (conflicts between files, references not found), then those
// of the sources checked against the schema, except at or inside a key the
// first already have an error at: the same error again, or one that
// follows from it.
func (c *compilation) evalErrors(v cue.Value) []cueerrors.Error {
	errs := cueerrors.Errors(v.Err())
	var broken []string
	for _, e := range errs {
		if p := joinPath(errorPath(e)); p != "" {
			broken = append(broken, p)
		}
	}
	inBroken := func(p string) bool {
		return slices.ContainsFunc(broken, func(b string) bool {
			return p == b || strings.HasPrefix(p, b+".") || strings.HasPrefix(p, b+"[")
		})
	}
	for _, e := range cueerrors.Errors(c.policyDef.Unify(v).Validate(cue.Concrete(true))) {
		if !inBroken(joinPath(errorPath(e))) {
			errs = append(errs, e)
		}
	}
	return errs
}

// finalErrors returns the errors that more sources could not take back,
// among errs (the errors of the sources that parsed) or, when errs has
// references not found, among those of the sources evaluated without them.
//
// A file that did not parse, or a reference not found, leaves out what it
// would define, so most errors of the rest could be follow-ons: a value left
// incomplete, a required key missing, a key that a definition would allow.
// A conflict between values, or a value out of bounds, is not: CUE only adds
// constraints, so no more sources can take it back. A reference not found
// is made _ (any value), which only takes constraints away, unless it is in
// a label (a pattern [#Name] would then match every key). A default (*) is
// the exception: another file could settle it otherwise, so with one in the
// sources nothing is reported.
func (c *compilation) finalErrors(errs []cueerrors.Error) []cueerrors.Error {
	if usesDefaults(c.parsed.files) {
		return nil
	}
	for round := 0; round < 8; round++ {
		refs := unresolved(errs)
		if len(refs) == 0 {
			break
		}
		restore, ok := dropReferences(c.parsed.files, refs)
		defer restore()
		if !ok {
			return nil
		}
		errs = c.evalErrors(c.ctx.BuildInstance(c.instance(c.parsed, false)))
	}
	return slices.DeleteFunc(errs, func(e cueerrors.Error) bool {
		m := messageOf(e)
		_, _, conflict := m.conflict()
		_, outOfBound := m.outOfBound()
		return !conflict && !outOfBound
	})
}

// unresolved returns where errs say a reference is not found.
func unresolved(errs []cueerrors.Error) map[Position]bool {
	refs := map[Position]bool{}
	for _, e := range errs {
		if messageOf(e).unresolved() {
			refs[posOf(e.Position())] = true
		}
	}
	return refs
}

// dropReferences makes the identifiers at refs _ in files, and returns how
// to undo it. It reports false, having changed nothing, when one is in a
// label.
func dropReferences(files []*ast.File, refs map[Position]bool) (restore func(), ok bool) {
	var idents []*ast.Ident
	inLabel := false
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Field:
			ast.Walk(n.Label, func(l ast.Node) bool {
				if id, isIdent := l.(*ast.Ident); isIdent && refs[posOf(id.Pos())] {
					inLabel = true
				}
				return true
			}, nil)
			if n.Value != nil {
				ast.Walk(n.Value, visit, nil)
			}
			return false
		case *ast.Ident:
			if refs[posOf(n.Pos())] {
				idents = append(idents, n)
			}
		}
		return true
	}
	for _, f := range files {
		ast.Walk(f, visit, nil)
	}
	if inLabel {
		return func() {}, false
	}
	names := make([]string, len(idents))
	for i, id := range idents {
		names[i], id.Name = id.Name, "_"
	}
	return func() {
		for i, id := range idents {
			id.Name = names[i]
		}
	}, true
}

// usesDefaults reports whether any of files marks a default value (*).
func usesDefaults(files []*ast.File) bool {
	found := false
	for _, f := range files {
		ast.Walk(f, func(n ast.Node) bool {
			if u, ok := n.(*ast.UnaryExpr); ok && u.Op == token.MUL {
				found = true
			}
			return !found
		}, nil)
	}
	return found
}
