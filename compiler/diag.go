package compiler

import (
	"cmp"
	"fmt"
	"path"
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
}

// Format renders the diagnostic as "file:line:col: severity[code]: message"
// with the file joined to root (the directory the user named), so positions
// print relative to where the user stands.
func (d Diagnostic) Format(root string) string {
	pos := d.Pos
	if pos.File != "" && root != "" && root != "." {
		pos.File = path.Join(strings.ReplaceAll(root, "\\", "/"), pos.File)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s[%s]: %s", pos, d.Severity, d.Code, d.Message)
	if d.Suggestion != "" {
		fmt.Fprintf(&b, "\n\t%s", d.Suggestion)
	}
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
