package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"strings"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
	"github.com/policyc/policyc/testcase"
)

// testOutput prints a test run.
type testOutput struct {
	// join prints a file name relative to the policy root as the user
	// reads it.
	join func(string) string
	// file names a file in a workflow annotation's file property
	// (testSource.file).
	file func(string) string
	// min is --coverage-min, nil without it; minText as it was given.
	min     *big.Rat
	minText string
	// list: --coverage lists every rule; without it only the rules no
	// case covered are listed, when coverage is asked for at all.
	list bool
	// noMatch says why the run failed when --run (runText as given)
	// matched no case.
	noMatch, runText string
}

func (o testOutput) pos(p compiler.Position) compiler.Position {
	if p.File != "" {
		p.File = o.join(p.File)
	}
	return p
}

// write prints the report in format.
func (o testOutput) write(w io.Writer, format string, rep *testcase.Report, cov *testcase.Coverage) error {
	switch format {
	case "json":
		return o.writeJSON(w, rep, cov, nil)
	case "junit":
		return o.writeJUnit(w, rep, cov, nil)
	case "github":
		return o.writeGitHub(w, rep, cov, nil)
	}
	return o.writeText(w, rep, cov)
}

// writeErrors prints the problems that stop a run, in the policy or in
// the tests: on standard error in text, and in a format other than text
// also on standard output, so a report or an annotation says why no case
// ran. where ends the count of errors: "in the tests: no case was run".
func (o testOutput) writeErrors(stdout, stderr io.Writer, format string, diags []compiler.Diagnostic, where string) error {
	errs := 0
	for _, d := range diags {
		if d.Severity == compiler.Error {
			errs++
		}
		fmt.Fprintln(stderr, d.Rooted(o.join).Format(""))
	}
	fmt.Fprintf(stderr, "%s %s\n", count(errs, "error"), where)
	switch format {
	case "json":
		return o.writeJSON(stdout, &testcase.Report{}, nil, diags)
	case "junit":
		return o.writeJUnit(stdout, &testcase.Report{}, nil, diags)
	case "github":
		return o.writeGitHub(stdout, &testcase.Report{}, nil, diags)
	}
	return nil
}

// failure is what a failed case's message says: what it expected and what
// was decided.
func (o testOutput) failure(r *testcase.Result) string {
	c, d := r.Case, r.Decision
	want := c.Expect.String()
	if c.Rule != "" {
		want += " by " + c.Rule
	}
	got := d.Effect.String()
	if d.Effect == c.Expect && c.Rule != "" {
		switch {
		case d.Rule != nil:
			got += fmt.Sprintf(" by %s %q (%s scope) at %s", listName(d.Rule.Effect), d.Rule.Pattern, d.Scope, o.join(d.Rule.Origin))
		case d.Reason == decide.ByDefault:
			got += " by a default"
		default:
			got += " (" + d.Reason.String() + ")"
		}
	}
	return fmt.Sprintf("expected %s; decided %s", want, got)
}

// explanation is explain's text for a failed case, with every origin
// printed as the user reads it.
func (o testOutput) explanation(r *testcase.Result) string {
	ex := rootedExplanation(*r.Explanation, o.join)
	var b bytes.Buffer
	c := r.Case
	writeExplainText(&b, "", r.Who(), c.Server, c.Kind.String(), c.Item, ex)
	return b.String()
}

// rootedExplanation is ex with the origins of its decision and of the rules
// it names passed through join.
func rootedExplanation(ex decide.Explanation, join func(string) string) decide.Explanation {
	rooted := func(origin string) string {
		if origin == "" {
			return ""
		}
		return join(origin)
	}
	rule := func(r *table.Rule) *table.Rule {
		if r == nil {
			return nil
		}
		c := *r
		c.Origin = rooted(c.Origin)
		return &c
	}
	ex.Decision.Origin = rooted(ex.Decision.Origin)
	ex.Decision.Rule = rule(ex.Decision.Rule)
	beaten := make([]decide.Match, len(ex.Beaten))
	for i, m := range ex.Beaten {
		m.Rule = rule(m.Rule)
		beaten[i] = m
	}
	ex.Beaten = beaten
	return ex
}

func (o testOutput) writeText(w io.Writer, rep *testcase.Report, cov *testcase.Coverage) error {
	ew := &testWriter{w: w}
	for i := range rep.Results {
		r := &rep.Results[i]
		if r.Passed {
			continue
		}
		ew.printf("%s: FAIL %s: %s\n", o.pos(r.Case.Pos), r.Case.FullName(), o.failure(r))
		for _, line := range strings.SplitAfter(strings.TrimSuffix(o.explanation(r), "\n"), "\n") {
			ew.printf("    %s", line)
		}
		ew.printf("\n")
	}
	if cov != nil {
		o.writeCoverageText(ew, cov)
	}
	n := len(rep.Results)
	switch {
	case o.noMatch != "":
		ew.printf("FAIL: %s\n", o.noMatch)
	case rep.Failed > 0:
		ew.printf("FAIL: %d of %s failed\n", rep.Failed, count(n, "case"))
	case n == 0:
		ew.printf("ok: no case to run\n")
	default:
		ew.printf("ok: %s passed\n", count(n, "case"))
	}
	if cov != nil && o.min != nil && !cov.Meets(o.min) {
		ew.printf("FAIL: coverage %s%% is below --coverage-min %s\n", cov.Percent(), o.minText)
	}
	return ew.err
}

func (o testOutput) writeCoverageText(ew *testWriter, cov *testcase.Coverage) {
	ew.printf("coverage: %s\n", coverageSummary(cov))
	for i := range cov.Rules {
		rc := &cov.Rules[i]
		var what string
		switch {
		case rc.Reach == compiler.Unreachable && o.list:
			what = "unreachable"
			if rc.Why != "" {
				what += " (" + rc.Why + ")"
			}
		case rc.Reach == compiler.Unreachable:
			continue
		case rc.Cases == 0:
			what = "not covered"
		case !o.list:
			continue
		case rc.Keeps:
			what = "kept " + count(rc.Cases, "case")
		default:
			what = count(rc.Cases, "case")
		}
		ew.printf("%s: %s: %s\n", o.pos(rc.Pos), what, rc.Label())
	}
}

// coverageSummary says how many rules decided a case, of how many.
func coverageSummary(cov *testcase.Coverage) string {
	s := fmt.Sprintf("%d of %s decided a case (%s%%)", cov.Covered, count(cov.Counted, "rule"), cov.Percent())
	if cov.Unreachable > 0 {
		s += fmt.Sprintf("; %s that can never decide %s not counted", count(cov.Unreachable, "unreachable rule"),
			map[bool]string{true: "is", false: "are"}[cov.Unreachable == 1])
	}
	return s
}

type testCaseJSON struct {
	Name       string          `json:"name"`
	Group      string          `json:"group"`
	Case       string          `json:"case"`
	File       string          `json:"file"`
	Line       int             `json:"line"`
	Column     int             `json:"column"`
	Passed     bool            `json:"passed"`
	Expect     string          `json:"expect"`
	ExpectRule string          `json:"expect_rule,omitempty"`
	Decision   string          `json:"decision"`
	Origin     string          `json:"origin,omitempty"`
	Message    string          `json:"message,omitempty"`
	Explain    json.RawMessage `json:"explanation,omitempty"`
}

type ruleCoverageJSON struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Scope   string `json:"scope"`
	Server  string `json:"server"`
	Kind    string `json:"kind"`
	List    string `json:"list"`
	Pattern string `json:"pattern"`
	Origin  string `json:"origin"`
	Cases   int    `json:"cases"`
	Status  string `json:"status"`
	Why     string `json:"why,omitempty"`
	Keeps   bool   `json:"keeps,omitempty"`
}

type coverageJSON struct {
	Rules       []ruleCoverageJSON `json:"rules"`
	Covered     int                `json:"covered"`
	Counted     int                `json:"counted"`
	Unreachable int                `json:"unreachable"`
	Percent     string             `json:"percent"`
	Min         string             `json:"min,omitempty"`
	Met         *bool              `json:"met,omitempty"`
}

type testErrorJSON struct {
	File       string `json:"file"`
	Line       int    `json:"line"`
	Column     int    `json:"column"`
	Level      string `json:"level"`
	Code       string `json:"code"`
	Path       string `json:"path,omitempty"`
	Message    string `json:"message"`
	Suggestion string `json:"suggestion,omitempty"`
}

type testReportJSON struct {
	Cases   []testCaseJSON `json:"cases"`
	Summary struct {
		Cases  int `json:"cases"`
		Passed int `json:"passed"`
		Failed int `json:"failed"`
	} `json:"summary"`
	Coverage *coverageJSON   `json:"coverage,omitempty"`
	Errors   []testErrorJSON `json:"errors"`
}

func (o testOutput) writeJSON(w io.Writer, rep *testcase.Report, cov *testcase.Coverage, diags []compiler.Diagnostic) error {
	out := testReportJSON{Cases: []testCaseJSON{}, Errors: []testErrorJSON{}}
	for i := range rep.Results {
		r := &rep.Results[i]
		c, p := r.Case, o.pos(r.Case.Pos)
		cj := testCaseJSON{Name: c.FullName(), Group: c.Group, Case: c.Name, File: p.File, Line: p.Line, Column: p.Column,
			Passed: r.Passed, Expect: c.Expect.String(), ExpectRule: c.Rule, Decision: r.Decision.Effect.String(), Origin: r.Decision.Origin}
		if !r.Passed {
			var b bytes.Buffer
			if err := writeExplainJSON(&b, *r.Explanation); err != nil {
				return err
			}
			cj.Message, cj.Explain = o.failure(r), bytes.TrimSpace(b.Bytes())
		}
		out.Cases = append(out.Cases, cj)
	}
	out.Summary.Cases, out.Summary.Failed = len(rep.Results), rep.Failed
	out.Summary.Passed = len(rep.Results) - rep.Failed
	if cov != nil {
		cj := &coverageJSON{Rules: []ruleCoverageJSON{}, Covered: cov.Covered, Counted: cov.Counted, Unreachable: cov.Unreachable, Percent: cov.Percent()}
		for _, rc := range cov.Rules {
			p := o.pos(rc.Pos)
			status := "covered"
			switch {
			case rc.Reach == compiler.Unreachable:
				status = "unreachable"
			case rc.Cases == 0:
				status = "not covered"
			}
			cj.Rules = append(cj.Rules, ruleCoverageJSON{File: p.File, Line: p.Line, Column: p.Column, Scope: rc.Scope, Server: rc.Server,
				Kind: rc.Kind, List: listName(rc.Effect), Pattern: rc.Pattern, Origin: rc.Origin, Cases: rc.Cases, Status: status, Why: rc.Why, Keeps: rc.Keeps})
		}
		if o.min != nil {
			met := cov.Meets(o.min)
			cj.Min, cj.Met = o.minText, &met
		}
		out.Coverage = cj
	}
	if o.noMatch != "" {
		out.Errors = append(out.Errors, testErrorJSON{Level: compiler.Error.String(), Code: "run", Message: o.noMatch})
	}
	for _, d := range diags {
		d = d.Rooted(o.join)
		out.Errors = append(out.Errors, testErrorJSON{File: d.Pos.File, Line: d.Pos.Line, Column: d.Pos.Column, Level: d.Severity.String(),
			Code: d.Code, Path: d.Path, Message: d.Message, Suggestion: d.Suggestion})
	}
	return writeJSON(w, out)
}

func (o testOutput) writeGitHub(w io.Writer, rep *testcase.Report, cov *testcase.Coverage, diags []compiler.Diagnostic) error {
	ew := &testWriter{w: w}
	// p is relative to the policy root: the file property names it as
	// o.file does; the message names places as the text does.
	annotate := func(cmd string, p compiler.Position, title, msg string) {
		var props []string
		if p.File != "" {
			props = append(props, "file="+ghEscape(o.file(p.File), true))
			if p.Line > 0 {
				props = append(props, fmt.Sprintf("line=%d", p.Line))
				if p.Column > 0 {
					props = append(props, fmt.Sprintf("col=%d", p.Column))
				}
			}
		}
		props = append(props, "title="+ghEscape(title, true))
		ew.printf("::%s %s::%s\n", cmd, strings.Join(props, ","), ghEscape(msg, false))
	}
	for _, d := range diags {
		rooted := d.Rooted(o.join)
		msg := rooted.Message
		if rooted.Suggestion != "" {
			msg += "\n" + rooted.Suggestion
		}
		annotate(map[bool]string{true: "error", false: "warning"}[d.Severity == compiler.Error], d.Pos, "policyc "+d.Code, msg)
	}
	for i := range rep.Results {
		if r := &rep.Results[i]; !r.Passed {
			annotate("error", r.Case.Pos, "policyc test "+r.Case.FullName(), o.failure(r)+"\n"+o.explanation(r))
		}
	}
	if cov != nil {
		for _, rc := range cov.Rules {
			if rc.Reach != compiler.Unreachable && rc.Cases == 0 {
				annotate("notice", rc.Pos, "policyc test coverage", "no case decided "+rc.Label())
			}
		}
		if o.min != nil && !cov.Meets(o.min) {
			annotate("error", compiler.Position{}, "policyc test coverage", fmt.Sprintf("coverage %s%% is below --coverage-min %s: %s", cov.Percent(), o.minText, coverageSummary(cov)))
		}
	}
	if o.noMatch != "" {
		annotate("error", compiler.Position{}, "policyc test --run", o.noMatch)
	}
	return ew.err
}

// ghEscape escapes a workflow command's message, or with property set one
// of its property values.
func ghEscape(s string, property bool) string {
	r := strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A")
	if property {
		r = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C")
	}
	return r.Replace(s)
}

// testWriter keeps the first write error.
type testWriter struct {
	w   io.Writer
	err error
}

func (e *testWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
