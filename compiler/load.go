package compiler

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/scanner"
	"cuelang.org/go/cue/token"

	"github.com/policyc/policyc/internal/clip"
	"github.com/policyc/policyc/internal/fileio"
	"github.com/policyc/policyc/internal/jsonerr"
)

// File is one policy source: its slash-separated name relative to the policy
// root, and its bytes.
type File struct {
	Name string
	Data []byte
}

// PackageName is the CUE package every policy file must declare.
const PackageName = "policy"

// ReadDir reads the .cue files directly in dir (a CUE package is one
// directory), sorted by name. The lint config file, if present, is skipped:
// it is not part of the policy, and so are directories (and symbolic links
// to them). A .cue name that is not a regular file (a named pipe, a device,
// a broken symbolic link) is an error naming it: reading a pipe would wait
// for a writer forever.
func ReadDir(dir string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".cue") || IsConfigFile(name) {
			continue
		}
		data, err := fileio.ReadRegular(filepath.Join(dir, name))
		if errors.Is(err, fileio.ErrDirectory) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w; policyc reads every .cue file in the policy directory: make it a regular file, or remove it or rename it so its name does not end in .cue", err)
		}
		files = append(files, File{Name: name, Data: data})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, nil
}

// ConfigFileName is the lint configuration at the policy root. It is CUE but
// not part of the policy package.
const ConfigFileName = "policyc.cue"

// IsConfigFile reports whether a file name (relative to the policy root) is
// the lint configuration rather than a policy source.
func IsConfigFile(name string) bool { return name == ConfigFileName }

// parsed is the syntax of the policy files that parsed.
type parsed struct {
	files []*ast.File
	// keyPos maps a dotted key path to where the key was first written.
	keyPos map[string]Position
	// listAt maps a dotted key path to every place a list is written as
	// its value, in source order (see splitLists).
	listAt map[string][]Position
	// sources are the bytes of the files that parsed, by name.
	sources map[string][]byte
}

func posOf(p token.Pos) Position {
	if !p.IsValid() {
		return Position{}
	}
	return Position{File: p.Filename(), Line: p.Line(), Column: p.Column()}
}

// parseFiles checks encoding, syntax and package clause of every file and
// returns the syntax trees of those that parsed.
func (c *compilation) parseFiles(files []File) *parsed {
	p := &parsed{keyPos: map[string]Position{}, listAt: map[string][]Position{}, sources: map[string][]byte{}}
	for _, f := range files {
		if !utf8.Valid(f.Data) {
			c.add(Diagnostic{Pos: invalidUTF8Pos(f), Code: CodeNotUTF8, Severity: Error,
				Message:    "file is not valid UTF-8",
				Suggestion: "save the file as UTF-8; CUE sources must be UTF-8"})
			continue
		}
		tree, err := parser.ParseFile(f.Name, f.Data, parser.ParseComments)
		if err != nil {
			c.add(syntaxError(f, cueerrors.Errors(err)))
			continue
		}
		if name := tree.PackageName(); name != c.pkg {
			pos := Position{File: f.Name, Line: 1, Column: 1}
			msg := "file has no package clause"
			if name != "" {
				msg = fmt.Sprintf("file is in package %s", clip.Quote(name))
				for _, d := range tree.Decls {
					if pkg, ok := d.(*ast.Package); ok {
						pos = posOf(pkg.Name.Pos())
					}
				}
			}
			c.add(Diagnostic{Pos: pos, Code: CodeWrongPackage, Severity: Error,
				Message:    msg + "; it must be in package " + c.pkg,
				Suggestion: "start the file with: package " + c.pkg})
			continue
		}
		p.files = append(p.files, tree)
		p.sources[f.Name] = f.Data
	}
	return p
}

// syntaxError is the diagnostic of a file CUE cannot parse: its first
// error alone (the parser's later ones mostly follow from it, as a list
// left open makes every line after it wrong), saying how many others
// there are and, where a bracket is still open at the error, which one.
func syntaxError(f File, errs []cueerrors.Error) Diagnostic {
	if len(errs) == 0 {
		return Diagnostic{Pos: Position{File: f.Name}, Code: CodeSyntax, Severity: Error, Message: "the file does not parse as CUE"}
	}
	slices.SortStableFunc(errs, func(a, b cueerrors.Error) int { return a.Position().Offset() - b.Position().Offset() })
	first := errs[0]
	format, args := first.Msg()
	d := Diagnostic{Pos: posOf(first.Position()), Code: CodeSyntax, Severity: Error, Message: fmt.Sprintf(format, args...)}
	var hints []string
	// A bracket left open is the cause where the error is at the end of
	// the file, or where a list or parenthesis opened on an earlier line
	// is still open (a struct is open around most lines of a policy).
	off := first.Position().Offset()
	atEnd := len(bytes.TrimRight(f.Data[min(off, len(f.Data)):], " \t\r\n")) == 0
	if open, ok := openBracket(f, off); ok && (atEnd || open.tok != token.LBRACE && open.pos.Line < first.Position().Line()) {
		what := map[token.Token]string{token.LBRACK: "list", token.LBRACE: "struct", token.LPAREN: "parenthesis"}[open.tok]
		hints = append(hints, fmt.Sprintf("the %s opened at %d:%d is still open here: if it should end before this, close it with %s", what, open.pos.Line, open.pos.Column, closing[open.tok]))
	}
	// One problem per place: the scanner reports a NUL outside a string
	// twice ("NUL", then "U+0000").
	others := map[Position]bool{d.Pos: true}
	for _, e := range errs[1:] {
		others[posOf(e.Position())] = true
	}
	switch n := len(others) - 1; {
	case n >= 10:
		// The parser stops after eleven.
		hints = append(hints, "10 or more syntax errors after it may follow from this one: fix it and check again")
	case n > 0:
		errors := "errors"
		if n == 1 {
			errors = "error"
		}
		hints = append(hints, fmt.Sprintf("the %d more syntax %s after it may follow from this one: fix it and check again", n, errors))
	}
	d.Suggestion = strings.Join(hints, "; ")
	return d
}

var closing = map[token.Token]string{token.LBRACK: "]", token.LBRACE: "}", token.LPAREN: ")"}

// bracket is an opening bracket and where it is.
type bracket struct {
	tok token.Token
	pos token.Position
	// interp marks the parenthesis of a string interpolation.
	interp bool
}

// openBracket returns the innermost bracket still open at offset off of
// f, by CUE's own scanner (so brackets in strings and comments do not
// count).
func openBracket(f File, off int) (bracket, bool) {
	var sc scanner.Scanner
	sc.Init(token.NewFile(f.Name, -1, len(f.Data)), f.Data, nil, scanner.ScanComments)
	var stack []bracket
	// An interpolation "a\(x)b" scans as the string up to "\(", then
	// "(", x and ")", after which the rest of the string is scanned on
	// request (ResumeInterpolation), as the parser does.
	interp := false
	for {
		pos, tok, _ := sc.Scan()
		if tok == token.EOF || pos.Offset() >= off {
			break
		}
		switch tok {
		case token.INTERPOLATION:
			interp = true
		case token.LBRACK, token.LBRACE, token.LPAREN:
			stack = append(stack, bracket{tok: tok, pos: pos.Position(), interp: interp && tok == token.LPAREN})
			interp = false
		case token.RBRACK, token.RBRACE, token.RPAREN:
			if len(stack) > 0 {
				top := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if top.interp {
					interp = strings.HasSuffix(sc.ResumeInterpolation(), "(")
				}
			}
		}
	}
	// An interpolation's parenthesis is not a bracket the author left
	// open: what is open around it is.
	for len(stack) > 0 && stack[len(stack)-1].interp {
		stack = stack[:len(stack)-1]
	}
	if len(stack) == 0 {
		return bracket{}, false
	}
	return stack[len(stack)-1], true
}

func invalidUTF8Pos(f File) Position {
	line, col := jsonerr.LineColumn(f.Data, jsonerr.FirstInvalidUTF8(f.Data))
	return Position{File: f.Name, Line: line, Column: col}
}

// instance builds the CUE instance of the parsed files; with report set,
// a file it refuses is reported.
func (c *compilation) instance(p *parsed, report bool) *build.Instance {
	inst := build.NewContext().NewInstance("", nil)
	for _, f := range p.files {
		if report {
			c.checkImports(f)
		}
		if err := inst.AddSyntax(f); err != nil && report {
			c.cueErrors(err, CodeSyntax)
		}
	}
	return inst
}

// reportedImport says whether m is CUE's error about an import that
// checkImports has reported.
func (c *compilation) reportedImport(m cueMessage) bool {
	path, ok := m.importPath()
	return ok && c.badImports[path]
}

// checkImports reports each import of f that is not of CUE's standard
// library: the sources are read as one package, without a module, so
// nothing else can be found. CUE's own error for it is cut short.
func (c *compilation) checkImports(f *ast.File) {
	for spec := range f.ImportSpecs() {
		path, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue // CUE reports it
		}
		first, _, _ := strings.Cut(path, "/")
		if !strings.Contains(first, ".") {
			continue // a standard library name; CUE says if there is no such package
		}
		if c.badImports == nil {
			c.badImports = map[string]bool{}
		}
		c.badImports[path] = true
		c.add(Diagnostic{Pos: posOf(spec.Path.Pos()), Code: CodeType, Severity: Error,
			Message:    fmt.Sprintf("import %s: the files of package %s are read without a CUE module, so only CUE's standard library can be imported (\"strings\", \"list\", ...)", clip.Quote(path), c.pkg),
			Suggestion: "write what it defines in a .cue file of the directory (package " + c.pkg + "), or remove the import"})
	}
}

// cueErrors turns CUE errors into diagnostics (see cueErrorList).
func (c *compilation) cueErrors(err error, code string) {
	c.cueErrorList(cueerrors.Errors(err), code)
}

// errorPath is the key path of a CUE error, without the schema definition
// it starts with when the error is about the sources checked against it.
func errorPath(e cueerrors.Error) []string {
	path := e.Path()
	if len(path) > 0 && strings.HasPrefix(path[0], "#") {
		path = path[1:]
	}
	return path
}

// cueErrorList turns CUE errors into diagnostics, each error once.
// "field not allowed" errors for keys the key check already reported are
// dropped; the others, for keys it could not see, get the diagnostic the
// key check would have given. A conflict between two values of the sources
// names both and where each was written; the branches of a failed
// disjunction at one path become one diagnostic listing the allowed values.
func (c *compilation) cueErrorList(errs []cueerrors.Error, code string) {
	type enumErr struct {
		d      Diagnostic
		values []map[string]bool
		// given is the value as the sources show it, when they do.
		given string
	}
	var enums []*enumErr
	byPath := map[string]*enumErr{}
	// conflicts counts the conflict errors at each path: one is two values
	// set in two places, more are the branches of a disjunction.
	conflicts := map[string]int{}
	counted := map[string]bool{}
	// conflictAt holds every place in the sources a conflict at a path
	// names, for configurations whose values are never repeated.
	conflictAt := map[string][]token.Pos{}
	// conflictVals holds every value a conflict at a path names, in the
	// order the errors give them.
	conflictVals := map[string][]string{}
	for _, e := range errs {
		cm := messageOf(e)
		msg, dotted := cm.String(), joinPath(errorPath(e))
		if vals, _, ok := cm.conflict(); ok && !counted[dotted+"\x00"+msg] {
			counted[dotted+"\x00"+msg] = true
			conflicts[dotted]++
			for _, v := range vals {
				if !slices.Contains(conflictVals[dotted], v) {
					conflictVals[dotted] = append(conflictVals[dotted], v)
				}
			}
			for _, p := range cueerrors.Positions(e) {
				if !strings.HasPrefix(p.Filename(), "schema/") && !slices.ContainsFunc(conflictAt[dotted], func(q token.Pos) bool { return posOf(q) == posOf(p) }) {
					conflictAt[dotted] = append(conflictAt[dotted], p)
				}
			}
		}
	}
	conflictDone := map[string]bool{}
	seen := map[string]bool{}
	split := c.splitLists(errs)
	for _, e := range errs {
		cm := messageOf(e)
		msg := cm.String()
		path := errorPath(e)
		dotted := joinPath(path)
		if seen[dotted+"\x00"+msg] {
			continue // the sources alone and checked against the schema give some errors twice
		}
		if list, ok := splitList(cm, path, split); ok {
			if !conflictDone[list] {
				conflictDone[list] = true
				c.add(c.splitListDiagnostic(list))
			}
			continue
		}
		if c.reportedImport(cm) {
			continue // reported at the import by checkImports
		}
		seen[dotted+"\x00"+msg] = true
		var user []token.Pos
		inSchema := false
		for _, p := range cueerrors.Positions(e) {
			if strings.HasPrefix(p.Filename(), "schema/") {
				inSchema = true
			} else if !slices.ContainsFunc(user, func(q token.Pos) bool { return posOf(q) == posOf(p) }) {
				user = append(user, p)
			}
		}
		pos := Position{}
		if len(user) > 0 {
			pos = posOf(user[0])
		}
		d := Diagnostic{Pos: pos, Code: code, Severity: Error, Path: dotted}
		if d.Pos.File == "" {
			d.Pos = c.keyPos(dotted)
		}
		if cm.is(cueEmptyDisjunction) {
			continue // its branches follow as errors of their own
		}
		vals, kinds, isConflict := cm.conflict()
		// m is the conflict as m[1] and m[2], nil when there is none.
		var m []string
		if isConflict {
			m = []string{msg, vals[0], vals[1]}
		}
		if m != nil && !inSchema && len(user) >= 2 && conflicts[dotted] == 1 {
			d.Message, d.Suggestion = c.conflict(dotted, []string{m[1], m[2]}, user)
			c.add(d)
			continue
		}
		if m != nil && !inSchema {
			// Values set in three or more places (or against the author's
			// own disjunction): one diagnostic at the path, naming the
			// places, and the values where they may be shown. They are
			// not what the schema allows, which the branches of a
			// schema disjunction below are.
			if !conflictDone[dotted] {
				conflictDone[dotted] = true
				d.Message, d.Suggestion = c.conflict(dotted, conflictVals[dotted], conflictAt[dotted])
				c.add(d)
			}
			continue
		}
		// types holds the two kinds as types[1] and types[2] when they
		// differ, else nil.
		var types []string
		if kinds[0] != "" {
			types = []string{"", kinds[0], kinds[1]}
		}
		if m != nil && strings.HasPrefix(m[1], `"`) && strings.HasPrefix(m[2], `"`) ||
			m != nil && types != nil && c.showsValues() && strings.HasPrefix(c.schemaSide(m, user), `"`) {
			ee := byPath[dotted]
			if ee == nil {
				ee = &enumErr{d: d}
				byPath[dotted] = ee
				enums = append(enums, ee)
			}
			ee.values = append(ee.values, map[string]bool{m[1]: true, m[2]: true})
			if side := c.schemaSide(m, user); ee.given == "" && side != "" {
				ee.given = m[1]
				if side == m[1] {
					ee.given = m[2]
				}
			}
			continue
		}
		if m != nil && inSchema && types != nil && len(user) > 0 && c.showsValues() {
			// A value of the wrong type: say which type, and what to write.
			// (Other configurations word these themselves, without
			// repeating values that may be secrets.)
			given, want, gt, wt := m[1], m[2], types[1], types[2]
			if !c.writtenAt(user[0], given) && c.writtenAt(user[0], want) {
				given, want, gt, wt = want, given, wt, gt
			}
			if a, b := kindName[gt], kindName[wt]; a != "" && b != "" {
				d.Message = fmt.Sprintf("%s: %s is %s, where %s is expected", dotted, given, a, b)
				switch {
				case wt == "list" && gt == "string":
					d.Suggestion = fmt.Sprintf("write a list, even of one entry: [%s]", given)
				case gt == "string" && (wt == "int" || wt == "number" || wt == "float"):
					// Only for a number of the kind the key takes: "thirty"
					// unquoted is no number, and "1.5" no integer.
					if u, err := strconv.Unquote(given); err == nil && numberFits(wt, u) {
						d.Suggestion = fmt.Sprintf("write the number without quotes: %s", u)
					}
				case wt == "string" && (gt == "int" || gt == "float" || gt == "bool") && quotedFits(want, given):
					d.Suggestion = fmt.Sprintf("write it in quotes: %s", clip.Quote(given))
				}
				c.add(d)
				continue
			}
		}
		switch {
		case cm.is(cueNotAllowed):
			if c.reportedKey(dotted) {
				continue
			}
			keyPath, parent, ok := c.schemaParent(path)
			if ok && !c.schemaAllows(parent, keyPath[len(keyPath)-1]) {
				// A key the key check could not see (written in a
				// definition, an embedding or a comprehension): the same
				// diagnostic as when it is written in place.
				ud := c.unknownKey(parent, keyPath, d.Pos)
				ud.Pos = d.Pos
				d = ud
				break
			}
			d.Code = CodeUnknownKey
			d.Message = fmt.Sprintf("%s: key not allowed here", dotted)
			if ok {
				d.Message += ": the schema defines it, but a closed definition this value is unified with does not declare it"
				d.Suggestion = "declare the key in that definition, or embed the definition instead of unifying with it"
			}
		case c.markedKeys[dotted] && cm.is(cueRequired):
			continue // the marker is reported: the field has no value because of it
		case cm.is(cueIncomplete):
			d.Message = fmt.Sprintf("%s: missing or incomplete value (%s)", dotted, msg)
			d.Suggestion = "give it a concrete value"
		case dotted != "":
			d.Message, d.CUE = dotted+": "+msg, &CUEMessage{cm}
			if value, bound, ok := d.CUE.OutOfBound(); ok {
				if strings.HasPrefix(bound, `=~"^[A-Za-z0-9]`) {
					d.Suggestion = nameRule
				} else if m, s, ok := numberBound(dotted, value, bound); ok {
					d.Message, d.Suggestion = m, s
				}
			}
			if cm.unresolved() {
				d.Suggestion = "check the name, or define it in a file of the package"
			}
		default:
			d.Message, d.CUE = msg, &CUEMessage{cm}
		}
		c.add(d)
	}
	for _, ee := range enums {
		// The user's value is the one every branch conflicted with; the
		// others are what the schema allows.
		given := ee.given
		for v := range ee.values[0] {
			if ee.given != "" {
				break
			}
			all := true
			for _, vs := range ee.values[1:] {
				all = all && vs[v]
			}
			if all && (given == "" || v < given) {
				given = v
			}
		}
		var allowed []string
		for _, vs := range ee.values {
			for v := range vs {
				if v != given && !slices.Contains(allowed, v) {
					allowed = append(allowed, v)
				}
			}
		}
		sort.Strings(allowed)
		d := ee.d
		if len(ee.values) == 1 {
			d.Message = fmt.Sprintf("%s: %s is not allowed here; the only allowed value is %s", d.Path, given, allowed[0])
		} else {
			d.Message = fmt.Sprintf("%s: %s is not allowed here; allowed values: %s", d.Path, given, strings.Join(allowed, ", "))
		}
		if given == `"approve"` && (strings.HasSuffix(d.Path, ".default") || strings.HasPrefix(d.Path, "defaults.")) {
			d.Suggestion = "approve is not a default: list the tools that need a human in approval_list"
		}
		c.add(d)
	}
}

// splitLists returns the key paths of lists written in more than one
// place whose entries CUE could not unify: a list in a.cue and another in
// b.cue for one key. CUE unifies two lists entry by entry (they must have
// the same length and equal entries); it never joins them, which is what
// an author splitting a server's rules across files means. The errors it
// gives (entries that conflict, incompatible list lengths) say neither.
// Only a policy's lists are reported so: other configurations word their
// conflicts themselves.
func (c *compilation) splitLists(errs []cueerrors.Error) map[string]bool {
	split := map[string]bool{}
	if c.def != "#Policy" {
		return split // other configurations keep their own wording
	}
	for _, e := range errs {
		cm := messageOf(e)
		if list, ok := listOf(cm, errorPath(e)); ok && len(c.parsed.listAt[list]) > 1 {
			split[list] = true
		}
	}
	return split
}

// listOf returns the list key an error is about, when it is one of those
// unifying two lists gives: a conflict at an entry, or lengths that differ.
func listOf(cm cueMessage, path []string) (string, bool) {
	if cm.is(cueListLengths) {
		return joinPath(path), len(path) > 0
	}
	if _, _, ok := cm.conflict(); ok && len(path) > 1 {
		if last := path[len(path)-1]; last != "" && strings.Trim(last, "0123456789") == "" {
			return joinPath(path[:len(path)-1]), true
		}
	}
	return "", false
}

// splitList reports the list of split an error is about.
func splitList(cm cueMessage, path []string, split map[string]bool) (string, bool) {
	list, ok := listOf(cm, path)
	return list, ok && split[list]
}

// splitListDiagnostic is the one error for a list written in several
// places, at the first, naming every place.
func (c *compilation) splitListDiagnostic(list string) Diagnostic {
	at := c.parsed.listAt[list]
	where := make([]string, len(at))
	for i, p := range at {
		where[i] = p.String()
	}
	places := "two places"
	if len(at) > 2 {
		places = fmt.Sprintf("%d places", len(at))
	}
	key := list[strings.LastIndexByte(list, '.')+1:]
	return Diagnostic{Pos: at[0], Code: CodeType, Severity: Error, Path: list,
		Message: fmt.Sprintf("%s: a list is written for it in %s (%s), and their entries differ: CUE does not join lists set in several places (in one file or in several), it unifies them entry by entry, so they would have to be equal",
			list, places, andList(where)),
		Suggestion: fmt.Sprintf("write every entry in one list, in one file; to keep parts in several files, give each part a hidden field of its own (_part1: [...] in one file, _part2: [...] in another) and join them in the one place the key is set: %s: list.Concat([_part1, _part2]), with import \"list\"", key)}
}

// showsValues reports whether errors may repeat the values of the sources:
// for policies and the lint configuration; other configurations may hold
// secrets.
func (c *compilation) showsValues() bool {
	return c.def == "#Policy" || c.def == "#LintConfig"
}

// schemaSide is the value of a conflict m that the sources do not show at
// the user's position, or "" when that cannot be told.
func (c *compilation) schemaSide(m []string, user []token.Pos) string {
	if len(user) == 0 {
		return ""
	}
	switch a, b := c.writtenAt(user[0], m[1]), c.writtenAt(user[0], m[2]); {
	case a && !b:
		return m[2]
	case b && !a:
		return m[1]
	}
	return ""
}

// quotedFits reports whether the text v, quoted, meets the schema's string
// constraint want: the type string, or a pattern it matches.
func quotedFits(want, v string) bool {
	if want == "string" {
		return true
	}
	pat, ok := strings.CutPrefix(want, "=~")
	if !ok {
		return false
	}
	pat, err := strconv.Unquote(pat)
	if err != nil {
		return false
	}
	re, err := regexp.Compile(pat)
	return err == nil && re.MatchString(v)
}

// numberFits reports whether text, written without quotes, is a number of
// CUE kind kind ("int", "float" or "number").
func numberFits(kind, text string) bool {
	if kind == "int" {
		_, err := strconv.ParseInt(text, 10, 64)
		return err == nil
	}
	_, err := strconv.ParseFloat(text, 64)
	return err == nil && strings.Trim(text, "+-.0123456789eE") == ""
}

// KindName is how a diagnostic names a CUE kind ("int" is "an integer"):
// the kind itself for one it does not know.
func KindName(kind string) string {
	if n, ok := kindName[kind]; ok {
		return n
	}
	return kind
}

// kindName is how a diagnostic names a CUE kind.
var kindName = map[string]string{
	"int":    "an integer",
	"float":  "a decimal number",
	"number": "a number",
	"string": "a string",
	"bytes":  "bytes",
	"bool":   "a boolean",
	"null":   "null",
	"list":   "a list",
	"struct": "a struct",
}

// conflict words an error about a key set to two different values in the
// sources (in one file or in two), with where each was written. Values are
// shown for policies and the lint configuration only: other configurations
// may hold secrets, which are never repeated in an error.
func (c *compilation) conflict(dotted string, vals []string, at []token.Pos) (msg, suggestion string) {
	slices.SortFunc(at, func(p, q token.Pos) int {
		return CompareDiagnostics(Diagnostic{Pos: posOf(p)}, Diagnostic{Pos: posOf(q)})
	})
	var where []string
	for _, p := range at {
		where = append(where, posOf(p).String())
	}
	written := fmt.Sprintf(" (%s)", strings.Join(where, " and "))
	if c.showsValues() {
		written = fmt.Sprintf(", %s%s", andList(vals), written)
		// Name each value with its place when the sources show which is
		// which: every place holds one of the values, and every value is
		// at some place.
		var named []string
		used := map[string]bool{}
		for i, p := range at {
			v := ""
			for _, cand := range vals {
				if c.writtenAt(p, cand) && len(cand) > len(v) {
					v = cand
				}
			}
			if v == "" {
				named = nil
				break
			}
			used[v] = true
			named = append(named, fmt.Sprintf("%s (%s)", v, where[i]))
		}
		if named != nil && len(used) == len(vals) {
			written = ", " + andList(named)
		}
	}
	places := "two places"
	if len(at) > 2 {
		places = "several places"
	}
	return fmt.Sprintf("%s: set in %s to different values%s, which conflict: a key has one value, and CUE keeps neither", dotted, places, written),
		"keep one of them: a key set in more than one place, in one file or in several, must have the same value in each"
}

// andList joins items as "a, b and c".
func andList(items []string) string {
	if len(items) <= 1 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// writtenAt reports whether the source at p starts with the value text v.
// It tells the sides of a conflict apart: CUE (cuelang.org/go v0.17.1)
// gives a conflict's two values and its positions, but not which value was
// written at which position, and formats a literal value as it is written
// (TestCUEFormats pins both).
func (c *compilation) writtenAt(p token.Pos, v string) bool {
	data, ok := c.parsed.sources[p.Filename()]
	off := p.Offset()
	return ok && off >= 0 && off <= len(data) && strings.HasPrefix(string(data[off:]), v)
}

// joinPath renders a CUE error path as the policy's key path, with list
// indexes in brackets: mcp_servers.fs.access.tool.allow_list[3].
func joinPath(path []string) string {
	var b strings.Builder
	for _, p := range path {
		if u, err := strconv.Unquote(p); err == nil {
			p = u // CUE quotes labels that are not identifiers
		}
		if p != "" && strings.Trim(p, "0123456789") == "" {
			b.WriteString("[" + p + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

const nameRule = "a name starts with a letter or digit and continues with letters, digits, '.', '_' or '-' (principal names may also use '@', '+', ':' and '/')"

// reportedKey reports whether the key check already reported dotted, a
// key above it, or an entry of the list it holds: whether dotted, or a
// prefix of it followed by '.' or '[', is a reported key. Each such prefix
// is looked up, so a check costs the length of dotted whatever the number
// of reported keys (it compared dotted with every one of them, which made
// thousands of unknown keys quadratic).
func (c *compilation) reportedKey(dotted string) bool {
	for i := 0; i < len(dotted); i++ {
		if (dotted[i] == '.' || dotted[i] == '[') && c.badKeys[dotted[:i]] {
			return true
		}
	}
	return c.badKeys[dotted]
}

// shownPath is a key path as a message shows it: its keys joined by
// dots, each long one shortened (see clip.String).
func shownPath(keyPath []string) string {
	keys := make([]string, len(keyPath))
	for i, k := range keyPath {
		keys[i] = clip.String(k)
	}
	return strings.Join(keys, ".")
}

// keyPos returns where a dotted key path was written, or the closest
// enclosing key that was.
func (c *compilation) keyPos(dotted string) Position {
	for dotted != "" {
		if p, ok := c.parsed.keyPos[dotted]; ok {
			return p
		}
		i := strings.LastIndexByte(dotted, '.')
		if i < 0 {
			break
		}
		dotted = dotted[:i]
	}
	return Position{}
}

// checkKeys walks the syntax of every file beside the schema and reports
// each key the schema does not define, with a suggestion. It is done on the
// syntax, not the evaluated value, so the position is the key's own.
func (c *compilation) checkKeys(p *parsed) {
	for _, f := range p.files {
		c.walkStruct(f.Decls, c.policyDef, nil, "")
	}
}

// walkStruct checks the fields of decls against schema; path is the key
// path of the struct, and parent the same joined by dots.
func (c *compilation) walkStruct(decls []ast.Decl, schema cue.Value, path []string, parent string) {
	for _, d := range decls {
		field, ok := d.(*ast.Field)
		if !ok {
			continue
		}
		name, _, err := ast.LabelName(field.Label)
		if err != nil || name == "" || strings.HasPrefix(name, "#") || strings.HasPrefix(name, "_") {
			// Pattern constraints, interpolations, definitions and hidden
			// fields are the author's own helpers; CUE checks what they
			// produce when it is unified with the schema.
			continue
		}
		keyPath := append(path[:len(path):len(path)], name) // a new array: path is shared
		dotted := name
		if len(path) > 0 {
			dotted = parent + "." + name
		}
		pos := posOf(field.Label.Pos())
		if _, seen := c.parsed.keyPos[dotted]; !seen {
			c.parsed.keyPos[dotted] = pos
		}
		if l, ok := field.Value.(*ast.ListLit); ok {
			c.parsed.listAt[dotted] = append(c.parsed.listAt[dotted], posOf(l.Lbrack))
		}
		marker := ""
		if field.Constraint == token.OPTION || field.Constraint == token.NOT {
			marker = field.Constraint.String()
			c.markedKeys[dotted] = true
			c.markedAt[pos] = true
		}
		child, ok := c.schemaChild(schema, name)
		if !ok {
			c.badKeys[dotted] = true
			d := c.unknownKey(schema, keyPath, pos)
			if marker != "" {
				// One problem at a time for the key: fixed as suggested,
				// it must still lose its marker.
				also := fmt.Sprintf("the %s after the key has no meaning in %s either: write the key without it", marker, c.sourceNoun())
				if d.Suggestion == "" {
					d.Suggestion = also
				} else {
					d.Suggestion += " (" + also + ")"
				}
			}
			c.add(d)
			continue
		}
		if marker != "" {
			c.add(c.markedKey(keyPath, marker, pos))
		}
		if st, ok := field.Value.(*ast.StructLit); ok && child.IncompleteKind()&cue.StructKind != 0 {
			c.walkStruct(st.Elts, child, keyPath, dotted)
		}
	}
}

// markedKey is the diagnostic for a key written with a field constraint
// marker: name? (optional) or name! (required). In a schema these say whether
// a key may be left out; in the data they make the field a constraint with
// no value, so CUE leaves the key out and whatever it held would silently
// not exist (a deny_list? denies nothing).
func (c *compilation) markedKey(keyPath []string, marker string, pos Position) Diagnostic {
	dotted, name := strings.Join(keyPath, "."), keyPath[len(keyPath)-1]
	kind := "optional"
	if marker == "!" {
		kind = "required"
	}
	what := c.sourceNoun()
	if !ast.IsValidIdent(name) || strings.HasPrefix(name, "#") || strings.HasPrefix(name, "_") {
		name = clip.Quote(name) // as it must be written
	} else {
		name = clip.String(name)
	}
	return Diagnostic{Pos: pos, Code: CodeUnknownKey, Severity: Error, Path: dotted,
		Message: fmt.Sprintf("%s%s: %s-field markers (%s) have no meaning in %s: CUE reads %s%s as a constraint, not a value, so it would silently set nothing",
			shownPath(keyPath), marker, kind, marker, what, name, marker),
		Suggestion: fmt.Sprintf("remove the %s and write %s: (the schema marks keys with ? or ! to say whether they may be left out; %s sets them without a marker)",
			marker, name, what)}
}

// sourceNoun names what the sources being checked are, for messages.
func (c *compilation) sourceNoun() string {
	switch c.def {
	case "#Policy":
		return "a policy"
	case "#LintConfig":
		return "the lint configuration"
	case "#Gateway":
		return "a gateway configuration"
	}
	return "a configuration"
}

// checkMarkedValues reports the fields of the evaluated sources that are
// optional or required constraints but hold data: fields written with a
// marker in a definition, a hidden field or a comprehension that the key
// check, which reads the syntax of plain fields, does not see. A field that
// only constrains (an open list, a type) is the author's own schema, and is
// left alone.
func (c *compilation) checkMarkedValues(v cue.Value, path []string) {
	if v.IncompleteKind()&cue.StructKind == 0 {
		return
	}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return
	}
	for it.Next() {
		sel := it.Selector()
		if sel.LabelType() != cue.StringLabel {
			continue
		}
		name := sel.Unquoted()
		keyPath := append(append([]string(nil), path...), name)
		dotted := strings.Join(keyPath, ".")
		if c.reportedKey(dotted) {
			continue
		}
		fv := it.Value()
		if ct := sel.ConstraintType(); ct&(cue.OptionalConstraint|cue.RequiredConstraint) != 0 && !c.markedKeys[dotted] && holdsData(fv) {
			marker := "?"
			if ct&cue.RequiredConstraint != 0 {
				marker = "!"
			}
			pos := posOf(fv.Pos())
			if pos.File == "" {
				pos = c.keyPos(dotted)
			}
			c.markedKeys[dotted] = true
			if !c.markedAt[pos] { // a pattern constraint gives one field per key it applies to
				c.markedAt[pos] = true
				c.add(c.markedKey(keyPath, marker, pos))
			}
		}
		c.checkMarkedValues(fv, keyPath)
	}
}

// plainData reports whether the files are data only: fields with plain
// labels and no marker, whose values are literals, structs and lists of
// them. Such sources have no field that is an optional or required
// constraint, so checkMarkedValues has nothing to find in them: every such
// field comes from a marker, a definition or hidden field referred to, a
// pattern constraint, an embedding or a comprehension, none of which plain
// data has.
func plainData(files []*ast.File) bool {
	for _, f := range files {
		for _, d := range f.Decls {
			if _, ok := d.(*ast.Package); !ok && !plainDecl(d) {
				return false
			}
		}
	}
	return true
}

func plainDecl(d ast.Decl) bool {
	switch d := d.(type) {
	case *ast.CommentGroup:
		return true
	case *ast.Field:
		if d.Constraint != token.ILLEGAL || d.Alias != nil {
			return false
		}
		switch d.Label.(type) {
		case *ast.Ident, *ast.BasicLit:
		default:
			return false // a pattern, an alias or an interpolated label
		}
		return plainValue(d.Value)
	}
	return false
}

func plainValue(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return true
	case *ast.UnaryExpr:
		_, ok := e.X.(*ast.BasicLit)
		return ok && (e.Op == token.SUB || e.Op == token.ADD)
	case *ast.StructLit:
		for _, d := range e.Elts {
			if !plainDecl(d) {
				return false
			}
		}
		return true
	case *ast.ListLit:
		for _, x := range e.Elts {
			if !plainValue(x) {
				return false
			}
		}
		return true
	}
	return false
}

// holdsData reports whether v is data rather than only a constraint: a
// concrete scalar, a closed list or one with entries, or a struct with a
// field that holds data.
func holdsData(v cue.Value) bool {
	switch v.IncompleteKind() {
	case cue.StructKind:
		it, err := v.Fields(cue.Optional(true))
		if err != nil {
			return false
		}
		for it.Next() {
			if holdsData(it.Value()) {
				return true
			}
		}
		return false
	case cue.ListKind:
		it, err := v.List()
		if err != nil {
			return false
		}
		return it.Next() || !v.Allows(cue.AnyIndex)
	}
	return v.IsConcrete()
}

// schemaParent returns the key path of a CUE error path and the schema of
// the struct that holds its last key, when every key above it is one the
// schema defines (no list index on the way).
func (c *compilation) schemaParent(path []string) ([]string, cue.Value, bool) {
	if len(path) == 0 {
		return nil, cue.Value{}, false
	}
	keyPath := make([]string, len(path))
	schema := c.policyDef
	for i, p := range path {
		if u, err := strconv.Unquote(p); err == nil {
			p = u
		}
		if p == "" || strings.Trim(p, "0123456789") == "" {
			return nil, cue.Value{}, false
		}
		keyPath[i] = p
		if i == len(path)-1 {
			break
		}
		child, ok := c.schemaChild(schema, p)
		if !ok {
			return nil, cue.Value{}, false
		}
		schema = child
	}
	return keyPath, schema, true
}

// schemaAllows reports whether the schema defines key name in schema. A
// key it defines can still be refused by the author's own closed
// definition.
func (c *compilation) schemaAllows(schema cue.Value, name string) bool {
	_, ok := c.schemaChild(schema, name)
	return ok
}

// schemaChild returns the schema of field name inside schema, following
// pattern constraints such as mcp_servers: [#Name]: #Server.
//
// Answers are kept: by key, and, for a key that only pattern constraints
// define, by the set of the struct's patterns the key matches, since CUE
// gives every key the values of the patterns it matches and nothing that
// depends on the key itself (the embedded schema binds no label). The
// thousands of keys of one map (servers, test cases) then share one
// schema value, and so do the lookups below it, where each would
// otherwise have CUE evaluate the pattern's value again.
func (c *compilation) schemaChild(schema cue.Value, name string) (cue.Value, bool) {
	key := childKey{schema, name}
	if a, ok := c.children[key]; ok {
		return a.v, a.ok
	}
	if schema.IncompleteKind()&cue.StructKind == 0 || !schema.Allows(cue.Str(name)) {
		c.children[key] = childAnswer{}
		return cue.Value{}, false
	}
	var pk patternKey
	byPattern := false
	if sh := c.shapeOf(schema); sh != nil && !sh.fixed[name] {
		pk, byPattern = patternKey{schema, sh.matching(name)}, true
		if a, ok := c.byPattern[pk]; ok {
			return a.v, a.ok
		}
	}
	v, ok := lookupChild(c.ctx, schema, name)
	if byPattern {
		c.byPattern[pk] = childAnswer{v, ok}
	} else {
		c.children[key] = childAnswer{v, ok}
	}
	return v, ok
}

// lookupChild is schemaChild without its memory: the field of that name,
// or what the struct's pattern constraints make of it.
func lookupChild(ctx *cue.Context, schema cue.Value, name string) (cue.Value, bool) {
	sel := cue.Str(name)
	if v := schema.LookupPath(cue.MakePath(sel.Optional())); v.Exists() {
		return v, true
	}
	if v := schema.LookupPath(cue.MakePath(sel)); v.Exists() {
		return v, true
	}
	probe := ctx.CompileString(fmt.Sprintf("{%q: _}", name))
	v := schema.Unify(probe).LookupPath(cue.MakePath(sel))
	return v, v.Exists()
}

type childKey struct {
	schema cue.Value
	name   string
}

type patternKey struct {
	schema cue.Value
	// matched has one byte per pattern constraint of schema: 1 when the
	// key matches it.
	matched string
}

type childAnswer struct {
	v  cue.Value
	ok bool
}

// schemaShape is what schemaChild needs to know of a struct of the schema:
// the keys it declares, and for each of its pattern constraints a closed
// struct with only that pattern, which allows exactly the keys the
// pattern matches.
type schemaShape struct {
	fixed    map[string]bool
	matchers []cue.Value
}

// shapeOf returns the shape of a struct of the schema, or nil when keys
// its patterns define cannot share answers: when the schema binds a label
// (an alias), or the struct is a disjunction, or has a default or a pattern
// CUE cannot evaluate.
func (c *compilation) shapeOf(schema cue.Value) *schemaShape {
	if sh, ok := c.shapes[schema]; ok {
		return sh
	}
	sh := c.newShape(schema)
	c.shapes[schema] = sh
	return sh
}

func (c *compilation) newShape(schema cue.Value) *schemaShape {
	if !c.labelFree {
		return nil
	}
	if op, _ := schema.Expr(); op == cue.OrOp {
		return nil
	}
	if _, hasDefault := schema.Default(); hasDefault {
		return nil
	}
	it, err := schema.Fields(cue.Optional(true), cue.Patterns(true))
	if err != nil {
		return nil
	}
	sh := &schemaShape{fixed: map[string]bool{}}
	for it.Next() {
		sel := it.Selector()
		switch {
		case sel.ConstraintType()&cue.PatternConstraint != 0:
			p := sel.Pattern()
			if p.Err() != nil {
				return nil
			}
			scope := c.ctx.CompileString("{}").FillPath(cue.MakePath(cue.Str("p")), p)
			m := c.ctx.CompileString("close({[p]: _})", cue.Scope(scope))
			if m.Err() != nil {
				return nil
			}
			sh.matchers = append(sh.matchers, m)
		case sel.LabelType() == cue.StringLabel:
			sh.fixed[sel.Unquoted()] = true
		}
	}
	return sh
}

// matching returns which of the shape's patterns a key matches, one byte
// each: CUE's answer to whether the pattern's closed struct allows it.
func (sh *schemaShape) matching(name string) string {
	sel := cue.Str(name)
	m := make([]byte, len(sh.matchers))
	for i, p := range sh.matchers {
		if p.Allows(sel) {
			m[i] = 1
		}
	}
	return string(m)
}

// bindsLabel reports whether a schema file has an alias, which may bind a
// field's label to a name its value uses.
func bindsLabel(f *ast.File) bool {
	found := false
	ast.Walk(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Alias, *ast.PostfixAlias:
			found = true
		case *ast.Field:
			found = found || n.Alias != nil
		}
		return !found
	}, nil)
	return found
}

// unknownKey builds the diagnostic for a key the schema does not allow,
// with the reason when the key is known elsewhere (approvals on a fetch, a
// default in a narrowing scope) and a suggestion when a known key is near.
func (c *compilation) unknownKey(schema cue.Value, keyPath []string, pos Position) Diagnostic {
	dotted := strings.Join(keyPath, ".")
	shown := shownPath(keyPath)
	name := keyPath[len(keyPath)-1]
	parent := ""
	if len(keyPath) >= 2 {
		parent = keyPath[len(keyPath)-2]
	}
	if c.def != "#Policy" {
		return c.plainUnknownKey(schema, keyPath, pos)
	}
	narrowing := keyPath[0] == "groups" || keyPath[0] == "principals" || keyPath[0] == "global"
	fetch := parent == "prompt" || parent == "resource"
	d := Diagnostic{Pos: pos, Code: CodeUnknownKey, Severity: Error, Path: dotted}
	switch {
	case fetch && name == "approval_list":
		d.Code = CodeApprovalOnFetch
		d.Message = fmt.Sprintf("%s: approval_list is not allowed on a %s: no approval hold exists on %s, so a human could never be asked and the entries would never be enforced",
			shown, parent, fetchMethod(parent))
		d.Suggestion = fmt.Sprintf("approval holds apply to tool calls only; to withhold these %ss, move the patterns to deny_list", parent)
		return d
	case fetch && (name == "approval_timeout_seconds" || name == "approval_channel"):
		d.Message = fmt.Sprintf("%s: %s applies to tool approvals only; no approval hold exists on %s", shown, name, fetchMethod(parent))
		d.Suggestion = "remove it; use deny_list to withhold an item"
		return d
	case narrowing && name == "default" && keyPath[0] != "global":
		d.Message = fmt.Sprintf("%s: a group or principal cannot set a default: a narrower scope can only take access away", shown)
		d.Suggestion = "use allow_list to restrict this scope to some names, or deny_list to remove names"
		return d
	case keyPath[0] == "global" && name == "default":
		d.Message = fmt.Sprintf("%s: defaults are set in the top-level defaults block or per server, not in global", shown)
		d.Suggestion = fmt.Sprintf("write defaults: %s: %q, or set default in mcp_servers.<server>.access.%s", parent, "deny", parent)
		return d
	case narrowing && keyPath[0] != "global" && name == "approval_channel":
		d.Message = fmt.Sprintf("%s: approval channels are chosen per server or in global, not per group or principal", shown)
		d.Suggestion = "set approval_channel in mcp_servers.<server>.access.tool or global.access.tool"
		return d
	}
	return c.plainUnknownKey(schema, keyPath, pos)
}

// plainUnknownKey is the diagnostic for an unknown key with no special
// reason: the closest known key, or the list of known keys.
func (c *compilation) plainUnknownKey(schema cue.Value, keyPath []string, pos Position) Diagnostic {
	dotted := strings.Join(keyPath, ".")
	shown := shownPath(keyPath)
	name := keyPath[len(keyPath)-1]
	d := Diagnostic{Pos: pos, Code: CodeUnknownKey, Severity: Error, Path: dotted}
	known := c.knownKeys(schema)
	if len(known) == 0 && schema.IncompleteKind()&cue.StructKind != 0 && schema.Allows(cue.Str("a")) {
		// A map keyed by name (servers, channels, groups, principals): the
		// key is not unknown, it is not a valid name.
		d.Code = CodeType
		d.Message = fmt.Sprintf("%s: %s is not a valid name", shown, clip.Quote(name))
		d.Suggestion = nameRule
		return d
	}
	if len(known) == 0 && len(keyPath) >= 2 && schema.IncompleteKind()&cue.StructKind != 0 {
		// A struct with no keys at all (approvals_page: {}).
		container := shownPath(keyPath[:len(keyPath)-1])
		d.Message = fmt.Sprintf("%s: unknown key %s: %s takes no keys", shown, clip.Quote(name), container)
		d.Suggestion = fmt.Sprintf("write %s: {}", keyPath[len(keyPath)-2])
		if len(keyPath) >= 3 {
			if _, up, ok := c.schemaParent(keyPath[:len(keyPath)-1]); ok && c.schemaAllows(up, name) {
				d.Suggestion += fmt.Sprintf(", and %s beside it, in %s", name, shownPath(keyPath[:len(keyPath)-2]))
			}
		}
		return d
	}
	d.Message = fmt.Sprintf("%s: unknown key %s", shown, clip.Quote(name))
	if s := Suggest(name, known); s != "" {
		d.Suggestion = fmt.Sprintf("did you mean %q?", s)
	} else if len(known) > 0 {
		d.Suggestion = "known keys here: " + strings.Join(known, ", ")
	}
	return d
}

func fetchMethod(kind string) string {
	if kind == "prompt" {
		return "prompts/get"
	}
	return "resources/read"
}

func (c *compilation) knownKeys(schema cue.Value) []string {
	if schema.IncompleteKind()&cue.StructKind == 0 {
		return nil
	}
	it, err := schema.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	var keys []string
	for it.Next() {
		keys = append(keys, it.Selector().Unquoted())
	}
	sort.Strings(keys)
	return keys
}

// numberBound words CUE's refusal of a number out of a numeric bound
// ("invalid value 100000 (out of bound <=86400)") as the limit it passed
// and what to write instead.
func numberBound(path, value, bound string) (msg, suggestion string, ok bool) {
	op := strings.TrimRight(bound, "0123456789.-+eE")
	limit := bound[len(op):]
	if _, err := strconv.ParseFloat(limit, 64); err != nil {
		return "", "", false
	}
	if _, err := strconv.ParseFloat(value, 64); err != nil {
		return "", "", false
	}
	switch op {
	case "<=":
		return fmt.Sprintf("%s: %s is more than %s, the most allowed", path, value, limit), "write at most " + limit, true
	case ">=":
		return fmt.Sprintf("%s: %s is less than %s, the least allowed", path, value, limit), "write at least " + limit, true
	case "<":
		return fmt.Sprintf("%s: %s is too large: it must be less than %s", path, value, limit), "write a number less than " + limit, true
	case ">":
		return fmt.Sprintf("%s: %s is too small: it must be more than %s", path, value, limit), "write a number more than " + limit, true
	}
	return "", "", false
}
