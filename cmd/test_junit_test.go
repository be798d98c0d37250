package cmd

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// junitSchema is what Jenkins' junit-4.xsd (the JUnit XML schema CI test
// reporters read) requires of each element: its attributes, those it
// must have, its children in order with how often each may occur, and
// whether it may hold text.
var junitSchema = map[string]junitElement{
	"testsuites": {attrs: []string{"name", "time", "tests", "failures", "disabled", "errors"},
		children: []junitChild{{"testsuite", 0, -1}}},
	"testsuite": {attrs: []string{"name", "tests", "failures", "errors", "time", "disabled", "skipped", "timestamp", "hostname", "id", "package"},
		required: []string{"name", "tests"},
		children: []junitChild{{"properties", 0, 1}, {"testcase", 0, -1}, {"system-out", 0, 1}, {"system-err", 0, 1}}},
	"properties": {children: []junitChild{{"property", 1, -1}}},
	"property":   {attrs: []string{"name", "value"}, required: []string{"name", "value"}},
	"testcase": {attrs: []string{"name", "assertions", "time", "classname", "status"}, required: []string{"name"},
		children: []junitChild{{"skipped", 0, 1}, {"error", 0, -1}, {"failure", 0, -1}, {"system-out", 0, -1}, {"system-err", 0, -1}}},
	"failure":    {attrs: []string{"type", "message"}, text: true},
	"error":      {attrs: []string{"type", "message"}, text: true},
	"skipped":    {text: true},
	"system-out": {text: true},
	"system-err": {text: true},
}

type junitElement struct {
	attrs, required []string
	children        []junitChild
	text            bool
}

type junitChild struct {
	name     string
	min, max int // max -1: unbounded
}

// junitNode is an element of a parsed document.
type junitNode struct {
	name     string
	attrs    map[string]string
	children []*junitNode
	text     string
}

func parseJUnit(data []byte) (*junitNode, error) {
	dec := xml.NewDecoder(bytes.NewReader(data))
	var stack []*junitNode
	var root *junitNode
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			n := &junitNode{name: t.Name.Local, attrs: map[string]string{}}
			for _, a := range t.Attr {
				n.attrs[a.Name.Local] = a.Value
			}
			if len(stack) > 0 {
				parent := stack[len(stack)-1]
				parent.children = append(parent.children, n)
			} else if root != nil {
				return nil, fmt.Errorf("a second root element <%s>", n.name)
			} else {
				root = n
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text += string(t)
			}
		}
	}
	if root == nil {
		return nil, fmt.Errorf("no root element")
	}
	return root, nil
}

// validateJUnit checks a document against junitSchema: the root is one of
// its global elements (testsuites or testsuite), every element is known,
// has only its attributes and all the required ones, its children in the
// schema's sequence and number, and text only where the schema allows it.
func validateJUnit(data []byte) error {
	root, err := parseJUnit(data)
	if err != nil {
		return err
	}
	if root.name != "testsuites" && root.name != "testsuite" {
		return fmt.Errorf("root element <%s>, want testsuites or testsuite", root.name)
	}
	return validateNode(root, root.name)
}

func validateNode(n *junitNode, where string) error {
	el, ok := junitSchema[n.name]
	if !ok {
		return fmt.Errorf("%s: element <%s> is not in the schema", where, n.name)
	}
	for a := range n.attrs {
		if !contains(el.attrs, a) {
			return fmt.Errorf("%s: attribute %s is not allowed on <%s>", where, a, n.name)
		}
	}
	for _, a := range el.required {
		if _, ok := n.attrs[a]; !ok {
			return fmt.Errorf("%s: <%s> has no %s, which the schema requires", where, n.name, a)
		}
	}
	if !el.text && strings.TrimSpace(n.text) != "" {
		return fmt.Errorf("%s: <%s> holds text %q, which the schema does not allow", where, n.name, strings.TrimSpace(n.text))
	}
	i := 0
	for _, c := range el.children {
		seen := 0
		for i < len(n.children) && n.children[i].name == c.name {
			if err := validateNode(n.children[i], fmt.Sprintf("%s/%s[%d]", where, c.name, seen)); err != nil {
				return err
			}
			seen++
			i++
		}
		if seen < c.min || c.max >= 0 && seen > c.max {
			return fmt.Errorf("%s: %d <%s> in <%s>, the schema allows %d to %d", where, seen, c.name, n.name, c.min, c.max)
		}
	}
	if i < len(n.children) {
		return fmt.Errorf("%s: <%s> is not allowed in <%s> where it is (the schema's order: %v)", where, n.children[i].name, n.name, el.children)
	}
	return nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// checkCounts checks what the schema cannot: each testsuite's tests,
// failures and errors count its testcases, failure and error elements, and
// testsuites' their sums; no two testsuites have one name (a CI report
// would show them as one).
func checkCounts(root *junitNode) error {
	total := map[string]int{}
	names := map[string]bool{}
	for _, s := range root.children {
		if names[s.attrs["name"]] {
			return fmt.Errorf("two testsuites are named %q", s.attrs["name"])
		}
		names[s.attrs["name"]] = true
		got := map[string]int{"tests": len(s.children)}
		for _, c := range s.children {
			for _, p := range c.children {
				if p.name == "failure" || p.name == "error" {
					got[p.name+"s"]++
				}
			}
		}
		for _, a := range []string{"tests", "failures", "errors"} {
			if n, _ := strconv.Atoi(s.attrs[a]); n != got[a] {
				return fmt.Errorf("testsuite %q says %s=%q, it has %d", s.attrs["name"], a, s.attrs[a], got[a])
			}
			total[a] += got[a]
		}
	}
	for _, a := range []string{"tests", "failures", "errors"} {
		if n, _ := strconv.Atoi(root.attrs[a]); n != total[a] {
			return fmt.Errorf("testsuites says %s=%q, its suites add up to %d", a, root.attrs[a], total[a])
		}
	}
	return nil
}

// TestJUnitValidates: policyc test --format junit writes documents the
// JUnit schema accepts, with counts that add up, for a run with failures
// and coverage, a run that passes, a run --run matched no case of, and a
// run that bad input or a policy that does not compile stopped; and the
// validator refuses what the schema refuses.
func TestJUnitValidates(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("policy.cue", "package policy\n\nmcp_servers: github: access: tool: {\n\tallow_list: [\"get_*\", \"list_*\"]\n\tdeny_list: [\"get_secret\"]\n}\n")
	write("tests/a.cue", "package tests\n\ncases: github: {\n\t\"reads\": {server: \"github\", name: \"get_issue\", expect: \"allow\"}\n\t\"reads a <secret> & ]]> \\u0007\": {server: \"github\", name: \"get_secret\", expect: \"allow\"}\n}\ncases: other: x: {server: \"github\", name: \"x\", expect: \"deny\"}\ncases: coverage: x: {server: \"github\", name: \"x\", expect: \"deny\"}\n")
	run := func(want int, args ...string) []byte {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := Run(append([]string{"test", "--format", "junit"}, args...), strings.NewReader(""), &stdout, &stderr); code != want {
			t.Fatalf("policyc test %v: exit %d, want %d; %s", args, code, want, stderr.String())
		}
		return stdout.Bytes()
	}
	reports := map[string][]byte{
		"failures and coverage": run(1, "--coverage-min", "100", dir),
		"passes":                run(0, "--run", "reads$|other|coverage", dir),
		"no case":               run(1, "--run", "nosuch", dir),
	}
	write("tests/bad.cue", "package tests\n\ncases: bad: x: {server: \"gihub\", name: \"x\", expect: \"deny\", rulle: 1}\n")
	reports["bad input"] = run(1, dir)
	write("broken.cue", "package policy\n\nmcp_servers: linear: access: tool: alow_list: [\"list_*\"]\n")
	reports["policy error"] = run(1, dir)
	for name, doc := range reports {
		if err := validateJUnit(doc); err != nil {
			t.Errorf("%s: %v\n%s", name, err, doc)
			continue
		}
		root, _ := parseJUnit(doc)
		if err := checkCounts(root); err != nil {
			t.Errorf("%s: %v\n%s", name, err, doc)
		}
	}
	if !bytes.Contains(reports["no case"], []byte(`<error message="--run &#34;nosuch&#34; matches no case`)) {
		t.Errorf("the report of a --run that matches no case has no error:\n%s", reports["no case"])
	}
	if !bytes.Contains(reports["bad input"], []byte("<error ")) || !bytes.Contains(reports["policy error"], []byte(`<error message="mcp_servers.linear.access.tool.alow_list: unknown key`)) || !bytes.Contains(reports["failures and coverage"], []byte(`<failure message="coverage 66.6% is below --coverage-min 100`)) {
		t.Errorf("the reports lack their error or coverage failure:\n%s\n%s", reports["bad input"], reports["failures and coverage"])
	}

	// The validator is live: it refuses documents the schema refuses.
	for _, bad := range []string{
		`<testsuites><testsuite tests="1"><testcase name="x"/></testsuite></testsuites>`,                                      // no name
		`<testsuites><testsuite name="s" tests="1"><testcase classname="c"/></testsuite></testsuites>`,                        // no name
		`<testsuites><testsuite name="s" tests="1" file="a"><testcase name="x"/></testsuite></testsuites>`,                    // unknown attribute
		`<testsuites><testsuite name="s" tests="1"><testcase name="x"><failure/><error/></testcase></testsuite></testsuites>`, // order
		`<testsuites><testsuite name="s" tests="1"><testcase name="x">text</testcase></testsuite></testsuites>`,               // text
		`<testsuites><testsuite name="s" tests="1"><properties/></testsuite></testsuites>`,                                    // empty properties
		`<testsuites><suite name="s"/></testsuites>`,                                                                          // unknown element
		`<report/>`,
	} {
		if err := validateJUnit([]byte(bad)); err == nil {
			t.Errorf("the validator accepts %s", bad)
		}
	}
}
