package compiler

import (
	"cmp"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Severity is how much a diagnostic matters. Errors stop compilation.
type Severity int

// Severities, least to most severe.
const (
	Info Severity = iota
	Warning
	Error
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return fmt.Sprintf("severity(%d)", int(s))
}

// ParseSeverity reads "error", "warning" or "info".
func ParseSeverity(s string) (Severity, bool) {
	switch s {
	case "error":
		return Error, true
	case "warning":
		return Warning, true
	case "info":
		return Info, true
	}
	return 0, false
}

// MarshalText makes severities print as words in JSON.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Position is a place in a policy source. File is slash-separated and
// relative to the policy root; Line and Column are 1-based (0: unknown).
type Position struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

func (p Position) String() string {
	switch {
	case p.File == "":
		return "-"
	case p.Line == 0:
		return p.File
	case p.Column == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column)
}

// Origin is the file:line form used in tables: stable under reformatting of
// a line's indentation, precise enough for blame.
func (p Position) Origin() string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d", p.File, p.Line)
}

// Diagnostic is one problem found in a policy, by the compiler or the
// linter: the same type for both, so both print and sort the same way.
type Diagnostic struct {
	Pos      Position `json:"pos"`
	Code     string   `json:"code"`
	Severity Severity `json:"severity"`
	// Path is the CUE key path the diagnostic is about, when there is one.
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
	// Suggestion says what to do instead, when that helps.
	Suggestion string `json:"suggestion,omitempty"`
	// CUE is CUE's own message, when Message repeats it as CUE wrote it
	// (after the key path), for callers that word CUE's refusals
	// themselves; nil when the compiler worded the diagnostic.
	CUE *CUEMessage `json:"-"`
}

// Format renders the diagnostic as "file:line:col: severity[code]: message"
// with the file joined to root (the directory the user named), so positions
// print relative to where the user stands.
func (d Diagnostic) Format(root string) string {
	d = d.Rooted(JoinRoot(root))
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s[%s]: %s", d.Pos, d.Severity, d.Code, d.Message)
	if d.Suggestion != "" {
		fmt.Fprintf(&b, "\n\t%s", d.Suggestion)
	}
	return b.String()
}

// JoinRoot returns the function Rooted takes to print a file name joined
// to root, the directory the user named (none for "" and ".").
func JoinRoot(root string) func(string) string {
	if root == "" || root == "." {
		return func(file string) string { return file }
	}
	root = strings.ReplaceAll(root, "\\", "/")
	return func(file string) string { return path.Join(root, file) }
}

// Rooted returns d with the file of its position, and every place its
// message and suggestion name, passed through join: a diagnostic and the
// places it speaks of are relative to the policy (or configuration)
// directory, and are printed relative to where the user stands. Rooted is
// applied once, by what prints the diagnostic.
func (d Diagnostic) Rooted(join func(file string) string) Diagnostic {
	if d.Pos.File != "" {
		d.Pos.File = join(d.Pos.File)
	}
	d.Message = RootPlaces(d.Message, join)
	d.Suggestion = RootPlaces(d.Suggestion, join)
	return d
}

// placeRE is a place a message names: a relative .cue or .json file name,
// maybe with a line and a column.
var placeRE = regexp.MustCompile(`[\w.-]+(?:/[\w.-]+)*\.(?:cue|json)(?::\d+(?::\d+)?)?`)

// RootPlaces passes the file of every place text names through join. A
// place counts only as a word of its own: after the start, a space or an
// opening parenthesis, and before the end, a space or punctuation. A file
// name inside quotes (an author's value) or inside a longer name (an
// absolute path, git's REV:path) is left as it is.
func RootPlaces(text string, join func(file string) string) string {
	var b strings.Builder
	last := 0
	for _, m := range placeRE.FindAllStringIndex(text, -1) {
		start, end := m[0], m[1]
		if start > 0 && !strings.ContainsRune(" \t\n(", rune(text[start-1])) ||
			end < len(text) && !strings.ContainsRune(" \t\n),;:.", rune(text[end])) {
			continue
		}
		file, rest := text[start:end], ""
		if i := strings.IndexByte(file, ':'); i >= 0 {
			file, rest = file[:i], file[i:]
		}
		b.WriteString(text[last:start])
		b.WriteString(join(file))
		b.WriteString(rest)
		last = end
	}
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}

// SortDiagnostics orders diagnostics by file, line, column, then code and
// message, so output is stable.
func SortDiagnostics(ds []Diagnostic) {
	slices.SortStableFunc(ds, CompareDiagnostics)
}

// CompareDiagnostics is the order of SortDiagnostics: file, line, column,
// code, message.
func CompareDiagnostics(a, b Diagnostic) int {
	return cmp.Or(
		cmp.Compare(a.Pos.File, b.Pos.File),
		cmp.Compare(a.Pos.Line, b.Pos.Line),
		cmp.Compare(a.Pos.Column, b.Pos.Column),
		cmp.Compare(a.Code, b.Code),
		cmp.Compare(a.Message, b.Message),
	)
}

// HasErrors reports whether any diagnostic is an error.
func HasErrors(ds []Diagnostic) bool {
	for _, d := range ds {
		if d.Severity == Error {
			return true
		}
	}
	return false
}
