package compiler

import (
	"fmt"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
)

// EvaluationBudget is how much CUE evaluation the sources of one policy
// may ask for, in units of one entry of a list or struct compared with
// another of the same list or struct.
//
// CUE (cuelang.org/go v0.17.1) finds an entry's place among the entries
// already evaluated in its list or struct by going through them one by
// one, so evaluating a list or struct of n entries costs about n² units.
// Sizes are read from the syntax before CUE runs, so a policy over the
// budget is refused at its largest list or struct without being
// evaluated. One list or struct of up to 44,721 entries fits by itself;
// one of a thousand entries costs a two-thousandth of it.
const EvaluationBudget = 2_000_000_000

// sizedValue is a list or struct of the sources and its entries.
type sizedValue struct {
	path    string // dotted key path, with [i] for list elements
	pos     Position
	entries int64
	list    bool
}

// evaluationCost returns the units of EvaluationBudget the files ask
// for, and their largest list or struct. A struct's entries are its
// distinct keys, however many files and literals write them; each list
// literal is a list of its own. Values CUE computes (comprehensions,
// references) are not counted: their size is not written in the syntax.
func evaluationCost(files []*ast.File) (cost int64, largest sizedValue) {
	structs := map[string]*sizedValue{}
	keys := map[string]map[string]bool{}
	var lists []*sizedValue
	var walkExpr func(e ast.Expr, path string)
	walkDecls := func(decls []ast.Decl, path string, at Position) {
		for _, d := range decls {
			switch d := d.(type) {
			case *ast.Field:
				name, _, err := ast.LabelName(d.Label)
				if err != nil || name == "" {
					// A pattern or computed label: count the field as its
					// own key at its position.
					name = "\x00" + posOf(d.Label.Pos()).String()
				}
				s := structs[path]
				if s == nil {
					s = &sizedValue{path: path, pos: at}
					structs[path] = s
					keys[path] = map[string]bool{}
				}
				if !keys[path][name] {
					keys[path][name] = true
					s.entries++
				}
				walkExpr(d.Value, joinKey(path, name))
			case *ast.EmbedDecl:
				walkExpr(d.Expr, path)
			case *ast.Comprehension:
				walkExpr(d.Value, path+"[for]")
			}
		}
	}
	walkExpr = func(e ast.Expr, path string) {
		switch e := e.(type) {
		case *ast.StructLit:
			walkDecls(e.Elts, path, posOf(e.Pos()))
		case *ast.ListLit:
			l := &sizedValue{path: path, pos: posOf(e.Pos()), entries: int64(len(e.Elts)), list: true}
			lists = append(lists, l)
			for i, x := range e.Elts {
				walkExpr(x, path+"["+strconv.Itoa(i)+"]")
			}
		case *ast.BinaryExpr:
			walkExpr(e.X, path)
			walkExpr(e.Y, path)
		case *ast.ParenExpr:
			walkExpr(e.X, path)
		case *ast.UnaryExpr:
			walkExpr(e.X, path)
		}
	}
	for _, f := range files {
		walkDecls(f.Decls, "", Position{File: f.Filename, Line: 1, Column: 1})
	}
	consider := func(v *sizedValue) {
		cost += v.entries * v.entries
		if v.entries > largest.entries {
			largest = *v
		}
	}
	for _, s := range structs {
		consider(s)
	}
	for _, l := range lists {
		consider(l)
	}
	return cost, largest
}

func joinKey(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// checkSize reports, and returns false for, sources whose evaluation would
// cost more than EvaluationBudget.
func (c *compilation) checkSize(files []*ast.File) bool {
	cost, v := evaluationCost(files)
	if cost <= EvaluationBudget {
		return true
	}
	what, noun := "struct", "keys"
	if v.list {
		what, noun = "list", "entries"
	}
	where := v.path
	if where == "" {
		where = "the top level"
	}
	c.add(Diagnostic{Pos: v.pos, Code: CodeTooLarge, Severity: Error, Path: v.path,
		Message: fmt.Sprintf("%s: this %s has %s %s; CUE's work on a list or struct grows with the square of its entries, and the policy's lists and structs would cost %s units of evaluation, over the evaluation budget of %s, so the policy is not evaluated",
			where, what, largeNumber(v.entries), noun, largeNumber(cost), largeNumber(EvaluationBudget)),
		Suggestion: "split it into smaller lists or structs (for example across servers), or cover more names with fewer patterns (prefix_* instead of one entry per name)"})
	return false
}

// largeNumber is n with thousands separated, for messages.
func largeNumber(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
