package cmd

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/testcase"
)

// The JUnit XML report of policyc test, in the shape of Jenkins'
// junit-4.xsd (the schema CI test reporters read): testsuites, one
// testsuite per group of cases, one testcase per case, a failure element
// for a case that failed and an error element for a problem that stopped
// the run. No time or timestamp: the report of a run is the same bytes
// every time. The suites policyc adds, for --coverage-min and for the
// problems that stopped a run, are named "policyc test ...": a name with a
// space, which no group of cases can have (schema #Name), so each suite
// name is one thing.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Error     *junitProblem `xml:"error,omitempty"`
	Failure   *junitProblem `xml:"failure,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func (o testOutput) writeJUnit(w io.Writer, rep *testcase.Report, cov *testcase.Coverage, diags []compiler.Diagnostic) error {
	out := junitSuites{Name: "policyc test"}
	at := map[string]int{} // group → index of its suite
	for i := range rep.Results {
		r := &rep.Results[i]
		g := r.Case.Group
		if _, ok := at[g]; !ok {
			at[g] = len(out.Suites)
			out.Suites = append(out.Suites, junitSuite{Name: g})
		}
		s := &out.Suites[at[g]]
		jc := junitCase{Name: r.Case.Name, Classname: g}
		if !r.Passed {
			msg := o.failure(r)
			jc.Failure = &junitProblem{Message: msg, Type: "decision",
				Text: fmt.Sprintf("%s: %s\n%s", o.pos(r.Case.Pos), msg, o.explanation(r))}
			s.Failures++
		}
		s.Tests++
		s.Cases = append(s.Cases, jc)
	}
	if cov != nil && o.min != nil {
		s := junitSuite{Name: "policyc test coverage", Tests: 1}
		jc := junitCase{Name: "coverage-min " + o.minText, Classname: s.Name}
		if !cov.Meets(o.min) {
			var text strings.Builder
			for _, rc := range cov.Rules {
				if rc.Reach != compiler.Unreachable && rc.Cases == 0 {
					fmt.Fprintf(&text, "%s: not covered: %s\n", o.pos(rc.Pos), rc.Label())
				}
			}
			jc.Failure = &junitProblem{Message: fmt.Sprintf("coverage %s%% is below --coverage-min %s: %s", cov.Percent(), o.minText, coverageSummary(cov)),
				Type: "coverage", Text: text.String()}
			s.Failures++
		}
		s.Cases = []junitCase{jc}
		out.Suites = append(out.Suites, s)
	}
	if errs := errorsOf(diags); len(errs) > 0 || o.noMatch != "" {
		s := junitSuite{Name: "policyc test"}
		if o.noMatch != "" {
			s.Cases = append(s.Cases, junitCase{Name: "--run " + strconv.Quote(o.runText), Classname: s.Name, Error: &junitProblem{Message: o.noMatch, Type: "run"}})
			s.Tests++
			s.Errors++
		}
		for _, d := range errs {
			d = d.Rooted(o.join)
			text := d.Format("")
			s.Cases = append(s.Cases, junitCase{Name: d.Pos.String(), Classname: "policyc test",
				Error: &junitProblem{Message: d.Message, Type: d.Code, Text: text}})
			s.Tests++
			s.Errors++
		}
		out.Suites = append(out.Suites, s)
	}
	for _, s := range out.Suites {
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Errors += s.Errors
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// errorsOf returns the errors among diagnostics.
func errorsOf(diags []compiler.Diagnostic) []compiler.Diagnostic {
	var out []compiler.Diagnostic
	for _, d := range diags {
		if d.Severity == compiler.Error {
			out = append(out, d)
		}
	}
	return out
}
