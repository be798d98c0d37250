package lint

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/policyc/policyc/compiler"
)

// sarifSchema compiles the OASIS SARIF 2.1.0 JSON schema (errata 01,
// testdata/sarif-schema-2.1.0.json, vendored unchanged), with formats
// such as uri asserted.
func sarifSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "sarif-schema-2.1.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("sarif-schema-2.1.0.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("sarif-schema-2.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func readDir(dir string) []compiler.File {
	files, err := compiler.ReadDir(dir)
	if err != nil {
		panic(err)
	}
	return files
}

func TestSARIFValidAgainstSchema(t *testing.T) {
	sch := sarifSchema(t)
	abs, err := filepath.Abs(filepath.Join("..", "examples", "team"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		files []compiler.File
		root  string
	}{
		{"examples/team", readDir(filepath.Join("..", "examples", "team")), "examples/team"},
		{"absolute root", readDir(abs), abs},
		{"no files", nil, "empty dir"},
		{"every level", policy(`mcp_servers: s: access: tool: {
	deny_list: ["get_*", "bad_["]
	allow_list: ["get_issue", "x", "x"]
}
global: access: tool: deny_list: ["delete_*"]
`), "."},
		{"clean", policy("mcp_servers: s: access: tool: allow_list: [\"get_*\"]\n"), "."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := Lint(tc.files, nil)
			var b bytes.Buffer
			if err := WriteSARIF(&b, rep, Output{Root: tc.root}); err != nil {
				t.Fatal(err)
			}
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(inst); err != nil {
				t.Fatalf("SARIF output is not valid SARIF 2.1.0: %v\n%s", err, b.String())
			}
			// Every result points at a rule of the run, with its page.
			var log sarifLog
			if err := json.Unmarshal(b.Bytes(), &log); err != nil {
				t.Fatal(err)
			}
			rules := log.Runs[0].Tool.Driver.Rules
			if len(rules) != len(compiler.Codes) {
				t.Fatalf("%d rules in the run, %d in the catalogue", len(rules), len(compiler.Codes))
			}
			if len(log.Runs[0].Results) != len(rep.Findings) {
				t.Fatalf("%d results for %d findings", len(log.Runs[0].Results), len(rep.Findings))
			}
			for _, r := range log.Runs[0].Results {
				if rules[r.RuleIndex].ID != r.RuleID || rules[r.RuleIndex].HelpURI != HelpURL+r.RuleID+".md" {
					t.Errorf("result %s points at rule %d (%s)", r.RuleID, r.RuleIndex, rules[r.RuleIndex].ID)
				}
			}
			// The other formats print the page SARIF links to: the
			// linted repository has no docs/rules of its own.
			for _, f := range rep.Findings {
				if !strings.HasPrefix(f.Help, "https://") || !slices.ContainsFunc(rules, func(r sarifRule) bool { return r.ID == f.Code && r.HelpURI == f.Help }) {
					t.Errorf("finding %s links to %q, not to its rule's helpUri", f.Code, f.Help)
				}
			}
		})
	}
}

// TestSARIFSchemaRejects makes sure the validation can fail: a log without
// its version or with an unknown level is refused.
func TestSARIFSchemaRejects(t *testing.T) {
	sch := sarifSchema(t)
	for _, bad := range []string{
		`{"runs": []}`,
		`{"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "policyc"}}, "results": [{"level": "fatal", "message": {"text": "x"}}]}]}`,
		`{"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "policyc", "rules": [{"id": "a", "helpUri": "not a uri"}]}}}]}`,
	} {
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(bad)))
		if err != nil {
			t.Fatal(err)
		}
		if sch.Validate(inst) == nil {
			t.Errorf("schema accepted %s", bad)
		}
	}
}

// SARIF columns count UTF-16 code units (its default columnKind), as code
// scanning places them; the other formats keep CUE's byte columns.
func TestSARIFColumnsInUTF16(t *testing.T) {
	files := policy("mcp_servers: s: access: tool: deny_list: [\"éé😀\", \"éé😀\"]\n")
	rep := Lint(files, nil)
	if len(rep.Findings) != 1 || rep.Findings[0].Code != "duplicate-pattern" {
		t.Fatalf("findings = %+v; want one duplicate-pattern", rep.Findings)
	}
	f := rep.Findings[0]
	line := strings.Split(string(files[0].Data), "\n")[f.Pos.Line-1]
	before := line[:f.Pos.Column-1]
	if !strings.HasSuffix(before, "\"éé😀\", ") {
		t.Fatalf("the finding's byte column %d is not at the second entry: %q", f.Pos.Column, before)
	}
	want := len([]rune(before)) + 1 + 1 // 😀 is two UTF-16 code units
	var b bytes.Buffer
	if err := WriteSARIF(&b, rep, Output{Root: ".", Sources: map[string][]byte{files[0].Name: files[0].Data}}); err != nil {
		t.Fatal(err)
	}
	var log sarifLog
	if err := json.Unmarshal(b.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	r := log.Runs[0].Results[0].Locations[0].PhysicalLocation.Region
	if r.StartLine != f.Pos.Line || r.StartColumn != want {
		t.Fatalf("region %+v; want line %d, column %d (byte column %d)", r, f.Pos.Line, want, f.Pos.Column)
	}
	// Without the source the byte column stays.
	b.Reset()
	if err := WriteSARIF(&b, rep, Output{Root: "."}); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	if got := log.Runs[0].Results[0].Locations[0].PhysicalLocation.Region.StartColumn; got != f.Pos.Column {
		t.Fatalf("without the source: column %d; want %d", got, f.Pos.Column)
	}
}

func TestUTF16Column(t *testing.T) {
	for _, tc := range []struct {
		src          string
		line, column int
		want         int
	}{
		{"ab", 1, 3, 3},
		{"é😀x", 1, 7, 4},       // é is 2 bytes, 1 unit; 😀 4 bytes, 2 units
		{"x\n\té😀y", 2, 8, 5},  // a tab is one unit, as one byte
		{"ab\r\nééé", 1, 8, 8}, // past the line's end: the byte column stays
		{"a\xffb", 1, 3, 3},    // an invalid byte is one unit
		{"one line", 3, 1, 1},  // no such line
		{"", 0, 0, 0},          // no position
	} {
		if got := utf16Column([]byte(tc.src), tc.line, tc.column); got != tc.want {
			t.Errorf("utf16Column(%q, %d, %d) = %d; want %d", tc.src, tc.line, tc.column, got, tc.want)
		}
	}
}
