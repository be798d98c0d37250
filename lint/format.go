package lint

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/policyc/policyc/compiler"
)

// Formats are the output formats of a report.
var Formats = []string{"text", "json", "sarif", "github"}

// Output says how to print a report.
type Output struct {
	// Root is the policy directory as the user named it; file names are
	// printed joined to it, so they are relative to where the user stands.
	Root string
	// Color enables ANSI colours in the text format (only on a terminal).
	Color bool
	// Sources holds the text of the linted files by the names findings
	// give them, for formats that count columns otherwise than in bytes
	// (SARIF, in UTF-16 code units). A file not in it keeps byte columns.
	Sources map[string][]byte
}

// rooted returns f as printed: its file, and every place its message and
// suggestion name, joined to the root. A finding about no file in
// particular is about the root itself.
func (o Output) rooted(f Finding) Finding {
	if f.Pos.File == "" {
		f.Pos.File = "."
	}
	f.Diagnostic = f.Rooted(compiler.JoinRoot(o.Root))
	return f
}

// Write prints the report in format.
func Write(w io.Writer, format string, rep *Report, o Output) error {
	switch format {
	case "text":
		return WriteText(w, rep, o)
	case "json":
		return WriteJSON(w, rep, o)
	case "sarif":
		return WriteSARIF(w, rep, o)
	case "github":
		return WriteGitHub(w, rep, o)
	}
	return fmt.Errorf("unknown format %q", format)
}

const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

func (o Output) paint(code, s string) string {
	if !o.Color {
		return s
	}
	return code + s + ansiReset
}

func severityColor(s compiler.Severity) string {
	switch s {
	case compiler.Error:
		return ansiRed
	case compiler.Warning:
		return ansiYellow
	}
	return ansiCyan
}

// WriteText prints the findings grouped by file, then a summary table of
// findings per rule and a one-line total.
func WriteText(w io.Writer, rep *Report, o Output) error {
	ew := &errWriter{w: w}
	current := ""
	for i, f := range rep.Findings {
		f = o.rooted(f)
		if name := f.Pos.File; i == 0 || name != current {
			if i > 0 {
				ew.printf("\n")
			}
			current = name
			ew.printf("%s\n", o.paint(ansiBold, name))
		}
		where := "-"
		switch {
		case f.Pos.Line > 0 && f.Pos.Column > 0:
			where = fmt.Sprintf("%d:%d", f.Pos.Line, f.Pos.Column)
		case f.Pos.Line > 0:
			where = fmt.Sprintf("%d", f.Pos.Line)
		}
		ew.printf("  %s %s %s\n", where, o.paint(severityColor(f.Severity), fmt.Sprintf("%s[%s]", f.Severity, f.Code)), f.Message)
		if f.Suggestion != "" {
			ew.printf("      %s\n", f.Suggestion)
		}
		ew.printf("      %s\n", o.paint(ansiDim, f.Help))
	}
	if ew.err != nil {
		return ew.err
	}
	if len(rep.Findings) > 0 {
		ew.printf("\n")
		if err := summaryTable(w, rep, o); err != nil {
			return err
		}
	}
	ew.printf("%s\n", Summary(rep))
	return ew.err
}

// Summary is the one-line total of a report.
func Summary(rep *Report) string {
	files := plural(rep.Files, "file")
	var s string
	if len(rep.Findings) == 0 {
		s = "no findings in " + files
	} else {
		s = fmt.Sprintf("%s, %s, %s in %s", plural(rep.Count(compiler.Error), "error"),
			plural(rep.Count(compiler.Warning), "warning"), plural(rep.Count(compiler.Info), "info"), files)
	}
	if rep.Suppressed > 0 {
		s += fmt.Sprintf(" (%d suppressed)", rep.Suppressed)
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// summaryTable prints findings per rule, most severe first.
func summaryTable(w io.Writer, rep *Report, o Output) error {
	type row struct {
		id       string
		level    compiler.Severity
		category compiler.Category
		n        int
	}
	var rows []*row
	byKey := map[string]*row{}
	for _, f := range rep.Findings {
		key := f.Code + "\x00" + f.Severity.String()
		if r := byKey[key]; r != nil {
			r.n++
			continue
		}
		r := &row{f.Code, f.Severity, f.Category, 1}
		byKey[key] = r
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].level != rows[j].level {
			return rows[i].level > rows[j].level
		}
		return rows[i].id < rows[j].id
	})
	t := newTable(w)
	t.Header("Rule", "Level", "Category", "Findings")
	for _, r := range rows {
		if err := t.Append(r.id, o.paint(severityColor(r.level), r.level.String()), string(r.category), fmt.Sprint(r.n)); err != nil {
			return err
		}
	}
	return t.Render()
}

// newTable is a plain table: light borders, no automatic wrapping, so
// messages and ids print whole.
func newTable(w io.Writer) *tablewriter.Table {
	return tablewriter.NewTable(w,
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
	)
}

// WriteRules prints the rule catalogue as a table; cfg (may be nil) gives
// the configured levels.
func WriteRules(w io.Writer, cfg *Config) error {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	t := newTable(w)
	t.Header("Rule", "Category", "Level", "Summary")
	for _, c := range compiler.Codes {
		level := cfg.Level(c.ID).String()
		if LevelOf(c.Level) != cfg.Level(c.ID) {
			level += " (default " + c.Level.String() + ")"
		}
		if err := t.Append(c.ID, string(c.Category), level, c.Summary); err != nil {
			return err
		}
	}
	return t.Render()
}

// RuleJSON is one rule of the catalogue in JSON.
type RuleJSON struct {
	ID           string `json:"id"`
	Category     string `json:"category"`
	Level        string `json:"level"`
	DefaultLevel string `json:"default_level"`
	Summary      string `json:"summary"`
	Help         string `json:"help"`
}

// WriteRulesJSON prints the rule catalogue as a JSON array.
func WriteRulesJSON(w io.Writer, cfg *Config) error {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	out := []RuleJSON{}
	for _, c := range compiler.Codes {
		out = append(out, RuleJSON{ID: c.ID, Category: string(c.Category), Level: cfg.Level(c.ID).String(),
			DefaultLevel: c.Level.String(), Summary: c.Summary, Help: Help(c.ID)})
	}
	return encodeJSON(w, out)
}

// FindingJSON is one finding in the JSON format.
type FindingJSON struct {
	File       string `json:"file"`
	Line       int    `json:"line"`
	Column     int    `json:"column"`
	Rule       string `json:"rule"`
	Level      string `json:"level"`
	Category   string `json:"category"`
	Path       string `json:"path,omitempty"`
	Message    string `json:"message"`
	Suggestion string `json:"suggestion,omitempty"`
	Help       string `json:"help"`
}

// ReportJSON is the JSON format of a report.
type ReportJSON struct {
	Findings []FindingJSON `json:"findings"`
	Summary  struct {
		Errors     int `json:"errors"`
		Warnings   int `json:"warnings"`
		Infos      int `json:"infos"`
		Suppressed int `json:"suppressed"`
		Files      int `json:"files"`
	} `json:"summary"`
}

// WriteJSON prints the report as one JSON object.
func WriteJSON(w io.Writer, rep *Report, o Output) error {
	out := ReportJSON{Findings: []FindingJSON{}}
	for _, f := range rep.Findings {
		f = o.rooted(f)
		out.Findings = append(out.Findings, FindingJSON{File: f.Pos.File, Line: f.Pos.Line, Column: f.Pos.Column,
			Rule: f.Code, Level: f.Severity.String(), Category: string(f.Category), Path: f.Path,
			Message: f.Message, Suggestion: f.Suggestion, Help: f.Help})
	}
	out.Summary.Errors = rep.Count(compiler.Error)
	out.Summary.Warnings = rep.Count(compiler.Warning)
	out.Summary.Infos = rep.Count(compiler.Info)
	out.Summary.Suppressed = rep.Suppressed
	out.Summary.Files = rep.Files
	return encodeJSON(w, out)
}

func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// WriteGitHub prints one GitHub Actions workflow command per finding, so
// findings show as annotations on the pull request.
func WriteGitHub(w io.Writer, rep *Report, o Output) error {
	ew := &errWriter{w: w}
	for _, f := range rep.Findings {
		f = o.rooted(f)
		cmd := "notice"
		switch f.Severity {
		case compiler.Error:
			cmd = "error"
		case compiler.Warning:
			cmd = "warning"
		}
		props := []string{"file=" + ghProperty(f.Pos.File)}
		if f.Pos.Line > 0 {
			props = append(props, fmt.Sprintf("line=%d", f.Pos.Line))
			if f.Pos.Column > 0 {
				props = append(props, fmt.Sprintf("col=%d", f.Pos.Column))
			}
		}
		props = append(props, "title="+ghProperty("policyc "+f.Code))
		msg := f.Message
		if f.Suggestion != "" {
			msg += "\n" + f.Suggestion
		}
		msg += "\n" + f.Help
		ew.printf("::%s %s::%s\n", cmd, strings.Join(props, ","), ghData(msg))
	}
	return ew.err
}

// ghData escapes a workflow command's message.
func ghData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// ghProperty escapes a workflow command's property value.
func ghProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
