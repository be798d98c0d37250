package lint

import (
	"bytes"
	"fmt"
	"strings"

	"cuelang.org/go/cue/scanner"
	"cuelang.org/go/cue/token"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/clip"
)

// IgnoreDirective is the comment that silences one finding:
//
//	// policyc:ignore <rule-id> <reason>
//
// written on the finding's line, after the code, or alone on the line
// above it.
const IgnoreDirective = "policyc:ignore"

// ignore is one ignore comment.
type ignore struct {
	pos compiler.Position // of the comment
	// line is the line it silences findings on.
	line   int
	id     string
	reason string
	used   bool
}

// parseIgnores finds the ignore comments of a policy file. Comments are
// found with the CUE scanner, so text inside strings is never taken for
// one. Malformed ignores are returned as invalid-ignore diagnostics; they
// silence nothing.
func parseIgnores(f compiler.File) ([]*ignore, []compiler.Diagnostic) {
	if !bytes.Contains(f.Data, []byte(IgnoreDirective)) {
		return nil, nil
	}
	lines := bytes.Split(f.Data, []byte("\n"))
	var s scanner.Scanner
	s.Init(token.NewFile(f.Name, -1, len(f.Data)), f.Data, func(token.Pos, string, []interface{}) {}, scanner.ScanComments)
	var out []*ignore
	var bad []compiler.Diagnostic
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok != token.COMMENT || !strings.HasPrefix(lit, "//") {
			continue
		}
		text := strings.TrimSpace(strings.TrimPrefix(lit, "//"))
		if !strings.HasPrefix(text, IgnoreDirective) {
			continue
		}
		p := compiler.Position{File: f.Name, Line: pos.Line(), Column: pos.Column()}
		invalid := func(msg, suggestion string) {
			bad = append(bad, compiler.Diagnostic{Pos: p, Code: compiler.CodeInvalidIgnore, Severity: compiler.Warning,
				Message: msg, Suggestion: suggestion})
		}
		rest := strings.TrimPrefix(text, IgnoreDirective)
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			continue // another word that starts the same, e.g. policyc:ignored
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			invalid("policyc:ignore names no rule: it silences nothing",
				"write // policyc:ignore <rule-id> <reason>, e.g. // policyc:ignore redundant-deny kept as a guard")
			continue
		}
		id := fields[0]
		reason := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), id))
		if _, ok := compiler.LookupCode(id); !ok {
			invalid(fmt.Sprintf("policyc:ignore names %s, which is not a rule: it silences nothing", clip.Quote(id)), suggestID(id))
			continue
		}
		if Fixed(id) || id == compiler.CodeUnusedIgnore || id == compiler.CodeInvalidIgnore {
			invalid(fmt.Sprintf("policyc:ignore %s: %s cannot be ignored", id, id),
				"fix what it reports instead; findings that stop compilation are never silenced")
			continue
		}
		if reason == "" {
			invalid(fmt.Sprintf("policyc:ignore %s gives no reason: it silences nothing", id),
				fmt.Sprintf("say why after the rule id: // policyc:ignore %s <reason>", id))
			continue
		}
		out = append(out, &ignore{pos: p, line: targetLine(lines, p.Line, pos.Column()), id: id, reason: reason})
	}
	return out, bad
}

// targetLine is the line a comment at line:col silences: its own line when
// code precedes it there, else the next line that holds code.
func targetLine(lines [][]byte, line, col int) int {
	if line-1 < len(lines) && col-1 <= len(lines[line-1]) && len(bytes.TrimSpace(lines[line-1][:col-1])) > 0 {
		return line
	}
	for l := line + 1; l <= len(lines); l++ {
		t := bytes.TrimSpace(lines[l-1])
		if len(t) > 0 && !bytes.HasPrefix(t, []byte("//")) {
			return l
		}
	}
	return line + 1
}

// suggestID suggests the rule id closest to a misspelt one.
func suggestID(id string) string {
	ids := make([]string, len(compiler.Codes))
	for i, c := range compiler.Codes {
		ids[i] = c.ID
	}
	if best := compiler.Suggest(id, ids); best != "" {
		return fmt.Sprintf("did you mean %q? (policyc lint --list-rules lists the rules)", best)
	}
	return "policyc lint --list-rules lists the rules"
}
