// Package importer converts access policy written for other tools, MCP
// Hangar's config.yaml and Claude Code's permission rules, into a policyc CUE
// policy that decides the same.
//
// An import never guesses. Every key of the source is either carried over,
// reported as not carried over with the reason, or refused as an error with
// its position; with any error no policy is produced. Where policyc cannot
// say exactly what the source says, the import says something stricter and
// reports it; it never produces a policy that allows more.
package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/policyc/policyc/compiler"

	"cuelang.org/go/cue/format"

	"github.com/policyc/policyc/runtime/table"
)

// Pos is a position in the imported file: 1-based line and column.
type Pos struct {
	File         string
	Line, Column int
}

func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Column == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column)
}

// Finding is something the import reports: an error (the source cannot be
// imported as it is) or a note (something not carried over, and why).
type Finding struct {
	Pos Pos
	// Path is the key path in the source, e.g.
	// mcp_servers.github.tools.deny_list[2].
	Path    string
	Error   bool
	Message string
	// Suggestion says what to do instead, when there is something to do.
	Suggestion string
}

func (f Finding) String() string {
	kind := "note"
	if f.Error {
		kind = "error"
	}
	s := fmt.Sprintf("%s: %s: ", f.Pos, kind)
	if f.Path != "" {
		s += f.Path + ": "
	}
	s += f.Message
	if f.Suggestion != "" {
		s += "\n\t" + f.Suggestion
	}
	return s
}

// Result is the outcome of an import.
type Result struct {
	// CUE is the policy, formatted; nil when Findings hold an error.
	CUE      []byte
	Findings []Finding
}

// sortFindings orders findings by position, as they appear in the file.
func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i].Pos, fs[j].Pos
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}

// HasErrors reports whether any finding is an error.
func (r *Result) HasErrors() bool {
	for _, f := range r.Findings {
		if f.Error {
			return true
		}
	}
	return false
}

// ApprovalChannel is the channel imported approval lists use: the gateway's
// approvals page, which reaches a human.
const ApprovalChannel = "approvals"

// policy is what an import builds before it is written as CUE.
type policy struct {
	// tool names the command in the header, e.g. "policyc import hangar".
	tool   string
	source string
	// header holds comment lines about the whole import.
	header  []string
	servers map[string]*server
}

type server struct {
	name  string
	pos   Pos
	kinds map[string]*access
}

type access struct {
	def string
	// why explains the default in a comment.
	why                   string
	deny, approval, allow []entry
	timeout               int
	timeoutPos            Pos
}

type entry struct {
	glob string
	// from is the pattern as the source wrote it, when it differs.
	from string
	pos  Pos
}

func (p *policy) server(name string, pos Pos) *server {
	if s := p.servers[name]; s != nil {
		return s
	}
	s := &server{name: name, pos: pos, kinds: map[string]*access{}}
	p.servers[name] = s
	return s
}

func (p *policy) needsApprovals() bool {
	for _, s := range p.servers {
		if a := s.kinds[table.Tool.String()]; a != nil && len(a.approval) > 0 {
			return true
		}
	}
	return false
}

// cue writes the policy as formatted CUE.
func (p *policy) cue() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Imported by %s from %s.\n", p.tool, p.source)
	for _, h := range p.header {
		fmt.Fprintf(&b, "// %s\n", h)
	}
	b.WriteString("package policy\n\n")
	if p.needsApprovals() {
		b.WriteString("// Approval lists hold calls on the gateway's approvals page, where a\n// human decides.\n")
		fmt.Fprintf(&b, "approval_channels: %s: approvals_page: {}\n\n", quote(ApprovalChannel))
	}
	names := make([]string, 0, len(p.servers))
	for n := range p.servers {
		names = append(names, n)
	}
	sort.Strings(names)
	b.WriteString("mcp_servers: {\n")
	for _, n := range names {
		s := p.servers[n]
		if s.pos.Line > 0 {
			fmt.Fprintf(&b, "// %s\n", s.pos)
		}
		fmt.Fprintf(&b, "%s: access: {\n", quote(n))
		for _, k := range []string{table.Tool.String(), table.Prompt.String(), table.Resource.String()} {
			if a := s.kinds[k]; a != nil {
				a.write(&b, k)
			}
		}
		b.WriteString("}\n")
	}
	b.WriteString("}\n")
	out, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format the imported policy: %w\n%s", err, b.Bytes())
	}
	return out, nil
}

func (a *access) write(b *bytes.Buffer, kind string) {
	if a.why != "" {
		for _, line := range strings.Split(a.why, "\n") {
			fmt.Fprintf(b, "// %s\n", line)
		}
	}
	fmt.Fprintf(b, "%s: {\n", kind)
	fmt.Fprintf(b, "default: %s\n", quote(a.def))
	list := func(key string, es []entry) {
		if len(es) == 0 {
			return
		}
		fmt.Fprintf(b, "%s: [\n", key)
		for _, e := range es {
			fmt.Fprintf(b, "%s,", quote(e.glob))
			switch {
			case e.from != "" && e.pos.Line > 0:
				fmt.Fprintf(b, " // %s: %s", e.pos, quote(e.from))
			case e.pos.Line > 0:
				fmt.Fprintf(b, " // %s", e.pos)
			}
			b.WriteString("\n")
		}
		b.WriteString("]\n")
	}
	list("deny_list", a.deny)
	list("approval_list", a.approval)
	list("allow_list", a.allow)
	if a.timeout > 0 {
		fmt.Fprintf(b, "approval_timeout_seconds: %d", a.timeout)
		if a.timeoutPos.Line > 0 {
			fmt.Fprintf(b, " // %s", a.timeoutPos)
		}
		b.WriteString("\n")
	}
	if len(a.approval) > 0 {
		fmt.Fprintf(b, "approval_channel: %s\n", quote(ApprovalChannel))
	}
	b.WriteString("}\n")
}

// quote writes s as a CUE string literal. JSON's escapes are all valid in
// CUE, and JSON never writes the `\(` of an interpolation.
func quote(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// suggest returns the known key closest to key when it is close enough to
// be a misspelling, else "".
func suggest(key string, known []string) string { return compiler.Suggest(key, known) }
