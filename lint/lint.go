// Package lint reports what the compiler finds in a policy (every
// diagnostic and the reachability analysis) as findings, at the levels the
// lint configuration sets, with the silences it allows, in the formats its
// readers need: text for people, JSON, SARIF 2.1.0 for code scanning and
// GitHub workflow annotations.
//
// It never decides anything the compiler does not: a rule's findings come
// from package compiler, so compile and lint always agree. It never lets a
// configuration or a comment hide a finding that stops compilation, so a
// policy that does not compile never lints clean.
package lint

import (
	"fmt"
	"slices"

	"github.com/policyc/policyc/compiler"
)

// HelpURL is the address of the rule pages. Every format links a finding
// to its page by URL (see Help): the policy repositories lint reads have no
// docs/rules of their own.
const HelpURL = "https://github.com/policyc/policyc/blob/main/docs/rules/"

// Help returns the address of a rule's docs page, as every output format
// prints it (text, JSON, GitHub annotations, SARIF's helpUri).
func Help(id string) string { return HelpURL + id + ".md" }

// Finding is a diagnostic as the linter reports it: at its configured
// level, with its rule's category and docs page.
type Finding struct {
	compiler.Diagnostic
	Category compiler.Category `json:"category"`
	Help     string            `json:"help"`
}

// Report is the outcome of a lint run.
type Report struct {
	// Findings are sorted by position.
	Findings []Finding
	// Suppressed counts findings silenced by the configuration (level off,
	// ignored files) or by ignore comments.
	Suppressed int
	// Files is the number of files linted: the policy's, and the
	// catalogue's snapshots when it is linted against one.
	Files int
}

// Count returns the number of findings at severity s.
func (r *Report) Count(s compiler.Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// Fails reports whether any finding is at level or above.
func (r *Report) Fails(level compiler.Severity) bool {
	for _, f := range r.Findings {
		if f.Severity >= level {
			return true
		}
	}
	return false
}

// Lint compiles files (policy sources, names relative to the policy root)
// and returns the findings cfg asks for. A nil cfg is the default.
func Lint(files []compiler.File, cfg *Config) *Report { return lint(files, cfg, nil) }

func lint(files []compiler.File, cfg *Config, cat *Catalogue) *Report {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	res := compiler.Compile(compiler.Input{Files: files})
	diags := res.Diagnostics
	placeGroupFindings(files, diags)
	diags = append(diags, catalogueDiagnostics(res.Policy, res.Table, cat)...)
	if res.Policy != nil && cfg.MaxApprovalTimeout != compiler.DefaultMaxApprovalTimeout {
		kept := diags[:0:0]
		for _, d := range diags {
			if d.Code != compiler.CodeApprovalTimeout {
				kept = append(kept, d)
			}
		}
		diags = append(kept, compiler.ApprovalTimeoutDiagnostics(res.Policy, cfg.MaxApprovalTimeout)...)
	}

	var ignores []*ignore
	for _, f := range files {
		ig, bad := parseIgnores(f)
		ignores = append(ignores, ig...)
		diags = append(diags, bad...)
	}
	rep := &Report{Files: len(files)}
	if cat != nil {
		rep.Files += len(cat.Files) // findings may point into the snapshots too
	}
	for _, d := range diags {
		if !Fixed(d.Code) && d.Code != compiler.CodeInvalidIgnore {
			if silenced(d, ignores) {
				rep.Suppressed++
				continue
			}
		}
		rep.add(d, cfg)
	}
	for _, ig := range ignores {
		if ig.used {
			continue
		}
		rep.add(compiler.Diagnostic{Pos: ig.pos, Code: compiler.CodeUnusedIgnore, Severity: compiler.Warning,
			Message:    fmt.Sprintf("policyc:ignore %s silences nothing: no %s finding on line %d", ig.id, ig.id, ig.line),
			Suggestion: "remove the comment, or move it to the line of the finding or the line above it"}, cfg)
	}
	sortFindings(rep.Findings)
	return rep
}

// placeGroupFindings moves each empty-group finding to the key it is
// about: the group's members, or the group's own key when it has none.
// The compiled policy keeps no position of either (the compiler reports
// the finding at the group's first block), so the sources are read again
// for their keys, only when there is such a finding.
func placeGroupFindings(files []compiler.File, diags []compiler.Diagnostic) {
	var ev *compiler.Evaluation
	for i, d := range diags {
		if d.Code != compiler.CodeEmptyGroup {
			continue
		}
		if ev == nil {
			ev = compiler.Evaluate(files, compiler.PackageName, "#Policy")
		}
		if p := ev.KeyPos(d.Path); p.File != "" && p.Line > 0 {
			diags[i].Pos = p
		}
	}
}

// silenced marks and reports the ignore comment that silences d, if any.
func silenced(d compiler.Diagnostic, ignores []*ignore) bool {
	for _, ig := range ignores {
		if ig.id == d.Code && ig.pos.File == d.Pos.File && ig.line == d.Pos.Line {
			ig.used = true
			return true
		}
	}
	return false
}

// add applies the configuration to d and keeps it when it is not off. A
// finding its rule reports below the rule's default level (a deny that
// pattern-not-in-catalog calls a guard) is a milder case of the rule: the
// configured level applies to it too, but never raises it above the level
// it was reported at.
func (r *Report) add(d compiler.Diagnostic, cfg *Config) {
	info, known := compiler.LookupCode(d.Code)
	if known && !Fixed(d.Code) {
		level := cfg.Level(d.Code)
		if level == Off || cfg.ignoresFile(d.Code, d.Pos.File) {
			r.Suppressed++
			return
		}
		if d.Severity >= info.Level || compiler.Severity(level) < d.Severity {
			d.Severity = compiler.Severity(level)
		}
	}
	r.Findings = append(r.Findings, Finding{Diagnostic: d, Category: info.Category, Help: Help(d.Code)})
}

// sortFindings orders findings as compiler.SortDiagnostics orders
// diagnostics.
func sortFindings(fs []Finding) {
	slices.SortStableFunc(fs, func(x, y Finding) int { return compiler.CompareDiagnostics(x.Diagnostic, y.Diagnostic) })
}
