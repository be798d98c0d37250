package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/policyc/policyc/runtime/table"
)

func b(v bool) *bool { return &v }

func sample() *Snapshot {
	return &Snapshot{
		Server: "github",
		Tools: []Tool{
			{Name: "search", InputSchema: json.RawMessage(`{ "type": "object", "properties": {"q": {"type": "string"}} }`),
				Annotations: &Annotations{ReadOnlyHint: b(true)}},
			{Name: "delete_repo", InputSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: "create_issue", Annotations: &Annotations{DestructiveHint: b(false)}},
		},
		Prompts:           []Prompt{{Name: "triage"}, {Name: "summarize", Arguments: []PromptArgument{{Name: "z", Required: true}, {Name: "a"}}}},
		Resources:         []Resource{{URI: "repo://b"}, {URI: "repo://a", MIMEType: "text/plain"}},
		ResourceTemplates: []ResourceTemplate{{URITemplate: "repo://{x}"}},
	}
}

func TestEncodeIsCanonicalAndSorted(t *testing.T) {
	got, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "github.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Encode:\n%s\nwant (testdata/github.json):\n%s", got, want)
	}
	s, canonical, err := Decode(got)
	if err != nil || !canonical {
		t.Fatalf("Decode of Encode: canonical=%v err=%v", canonical, err)
	}
	again, _ := Encode(s)
	if !bytes.Equal(again, got) {
		t.Errorf("re-encoding changed the bytes")
	}
	// Argument order is the server's, not sorted.
	if s.Prompts[0].Name != "summarize" || s.Prompts[0].Arguments[0].Name != "z" {
		t.Errorf("prompts: %+v", s.Prompts)
	}
}

func TestDecodeAcceptsHandEditedLayout(t *testing.T) {
	canon, _ := Encode(sample())
	var v any
	json.Unmarshal(canon, &v)
	compact, _ := json.Marshal(v)
	s, canonical, err := Decode(compact)
	if err != nil {
		t.Fatal(err)
	}
	if canonical {
		t.Errorf("compact JSON reported canonical")
	}
	if !Equal(s, sample()) {
		t.Errorf("hand-edited layout decodes to a different snapshot")
	}
}

func TestDecodeRefuses(t *testing.T) {
	canon, _ := Encode(sample())
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not json", `{`, "not a catalogue snapshot"},
		{"no format", `{"server":"x"}`, `no "format" field`},
		{"other format", `{"format":"policyc.catalog/v9"}`, `unknown catalogue format "policyc.catalog/v9"`},
		{"unknown field", strings.Replace(string(canon), `"server"`, `"extra": 1, "server"`, 1), `unknown field "extra"`},
		{"duplicate tool", `{"format":"policyc.catalog/v1","server":"s","tools":[{"name":"a"},{"name":"a"}]}`, `tools: "a" is listed twice`},
		{"nameless tool", `{"format":"policyc.catalog/v1","server":"s","tools":[{"name":""}]}`, `a tool without a name`},
		{"bad server", `{"format":"policyc.catalog/v1","server":"-x"}`, `server "-x" is not a server name`},
		{"resource without uri", `{"format":"policyc.catalog/v1","server":"s","resources":[{"name":"r"}]}`, `a resource without a URI`},
		{"trailing", string(canon) + "{}", "after top-level value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Decode([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// A snapshot that does not decode is reported at its file:line:col, and a
// misspelt field with the field it was likely meant to be.
func TestDecodeErrorPositions(t *testing.T) {
	canon, _ := Encode(sample())
	lines := strings.Split(string(canon), "\n")
	at := func(substr string) int { // the 1-based line of substr in canon
		for i, l := range lines {
			if strings.Contains(l, substr) {
				return i + 1
			}
		}
		t.Fatalf("%q is not in the sample", substr)
		return 0
	}
	for _, tc := range []struct {
		name, in, want string
	}{
		{"misspelt field", strings.Replace(string(canon), `"annotations"`, `"annotation"`, 1),
			fmt.Sprintf(`^github.json:%d:\d+: unknown field "annotation"; did you mean "annotations"\?$`, at(`"annotations"`))},
		// A key of that name inside an input schema is not the field, nor
		// is the field suggested as itself: uri is a resource's field, not
		// a tool's.
		{"field of another kind", strings.Replace(strings.Replace(string(canon), `"q"`, `"uri"`, 1), `"name": "search"`, `"name": "search", "uri": "x"`, 1),
			fmt.Sprintf(`^github.json:%d:\d+: unknown field "uri"$`, at(`"name": "search"`))},
		{"not an object", `[]`, `^github.json:1:\d+: .*an array where the format has an object`},
		{"tools not an array", `{"format": "policyc.catalog/v1", "tools": {}}`, `^github.json:1:\d+: tools: an object where the format has an array$`},
		{"syntax error", strings.Replace(string(canon), `"tools": [`, `"tools": [,`, 1),
			fmt.Sprintf(`^github.json:%d:\d+: not a catalogue snapshot: invalid character ','`, at(`"tools": [`))},
		{"wrong type", strings.Replace(string(canon), `"destructiveHint": false`, `"destructiveHint": "yes"`, 1),
			fmt.Sprintf(`^github.json:%d:\d+: tools\[0\].annotations.destructiveHint: a string where the format has true or false$`, at(`"destructiveHint"`))},
		// A type error names the item by its index.
		{"wrong type in the second tool", `{"format": "policyc.catalog/v1", "server": "github", "tools": [{"name": "a"}, {"name": 5}]}`,
			`^github.json:1:\d+: tools\[1\].name: a number where the format has a string$`},
		{"wrong type in a prompt argument", `{"format": "policyc.catalog/v1", "server": "github", "prompts": [{"name": "p", "arguments": [{"name": "x"}, {"name": "y", "required": "no"}]}]}`,
			`^github.json:1:\d+: prompts\[0\].arguments\[1\].required: a string where the format has true or false$`},
		// The decoder would keep the last and drop the first without a word,
		// matching keys without regard to case.
		{"duplicate key", strings.Replace(string(canon), `"tools": [`, `"Tools": [], "tools": [`, 1),
			fmt.Sprintf(`^github.json:%d:\d+: "tools" is the second key for field "tools" of this object \(after "Tools"\): keep one$`, at(`"tools": [`))},
		{"duplicate key in a tool", strings.Replace(string(canon), `"name": "search"`, `"name": "search", "name": "delete_repo"`, 1),
			fmt.Sprintf(`^github.json:%d:\d+: "name" is the second key for field "name" of this object \(after "name"\): keep one$`, at(`"name": "search"`))},
		// The decoder would read the byte as U+FFFD, and the snapshot would
		// name a tool the server does not have.
		{"not UTF-8", strings.Replace(string(canon), `"name": "search"`, "\"name\": \"sea\xffrch\"", 1),
			fmt.Sprintf(`^github.json:%d:19: not valid UTF-8 \(byte 0xff\): a snapshot is JSON, which is UTF-8$`, at(`"name": "search"`))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]File{{Name: "github.json", Data: []byte(tc.in)}})
			if err == nil || !regexp.MustCompile(tc.want).MatchString(err.Error()) {
				t.Fatalf("Parse: %v, want an error matching %s", err, tc.want)
			}
		})
	}
}

func TestParseChecksFileNames(t *testing.T) {
	canon, _ := Encode(sample())
	if _, err := Parse([]File{{Name: "gitlab.json", Data: canon}}); err == nil ||
		!strings.Contains(err.Error(), `gitlab.json: holds the snapshot of server "github"`) {
		t.Fatalf("Parse: %v", err)
	}
	c, err := Parse([]File{{Name: "github.json", Data: canon}, {Name: "README.md", Data: []byte("#")}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for it := range c.Items() {
		got = append(got, it.Kind+" "+it.Name)
	}
	want := []string{"tool create_issue", "tool delete_repo", "tool search", "prompt summarize", "prompt triage", "resource repo://a", "resource repo://b"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Items: %v, want %v", got, want)
	}
	if c.Tool("github", "search") == nil || c.Tool("github", "nope") != nil || c.Tool("x", "search") != nil {
		t.Errorf("Tool lookup")
	}
	if n := c.ItemNames("github", table.Resource.String()); strings.Join(n, ",") != "repo://a,repo://b" {
		t.Errorf("ItemNames: %v", n)
	}
}

func TestReadDirMissingIsEmpty(t *testing.T) {
	c, err := ReadDir(filepath.Join(t.TempDir(), "catalog"))
	if err != nil || len(c.Servers) != 0 {
		t.Fatalf("ReadDir of a missing directory: %v %v", c, err)
	}
}

func TestWriteFileOnlyWhenChanged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "catalog")
	changed, err := WriteFile(dir, sample())
	if err != nil || !changed {
		t.Fatalf("first write: %v %v", changed, err)
	}
	changed, err = WriteFile(dir, sample())
	if err != nil || changed {
		t.Fatalf("second write of the same snapshot: changed=%v err=%v", changed, err)
	}
	c, err := ReadDir(dir)
	if err != nil || !Equal(c.Servers["github"], sample()) || len(c.NotCanonical) != 0 {
		t.Fatalf("read back: %v", err)
	}
}

// The annotation defaults of the MCP specification: readOnlyHint false,
// destructiveHint true (meaningful only when not read-only).
func TestMayDestroy(t *testing.T) {
	for _, tc := range []struct {
		a                  *Annotations
		readOnly, mayDestr bool
	}{
		{nil, false, true},
		{&Annotations{}, false, true},
		{&Annotations{ReadOnlyHint: b(true)}, true, false},
		{&Annotations{ReadOnlyHint: b(true), DestructiveHint: b(true)}, true, false},
		{&Annotations{ReadOnlyHint: b(false), DestructiveHint: b(false)}, false, false},
		{&Annotations{DestructiveHint: b(true)}, false, true},
	} {
		tool := Tool{Name: "t", Annotations: tc.a}
		if tool.ReadOnly() != tc.readOnly || tool.MayDestroy() != tc.mayDestr {
			t.Errorf("%+v: ReadOnly=%v MayDestroy=%v, want %v %v", tc.a, tool.ReadOnly(), tool.MayDestroy(), tc.readOnly, tc.mayDestr)
		}
	}
}

func TestInputSchemaDigestIgnoresLayout(t *testing.T) {
	a := Tool{InputSchema: json.RawMessage(`{"b":1,"a":[1,2]}`)}
	c := Tool{InputSchema: json.RawMessage("{ \"a\" : [1, 2],\n \"b\": 1 }")}
	d := Tool{InputSchema: json.RawMessage(`{"b":1,"a":[2,1]}`)}
	if a.InputSchemaDigest() != c.InputSchemaDigest() {
		t.Errorf("layout changed the digest")
	}
	if a.InputSchemaDigest() == d.InputSchemaDigest() {
		t.Errorf("a different schema has the same digest")
	}
	if (&Tool{}).InputSchemaDigest() != "" {
		t.Errorf("no schema: want no digest")
	}
}

// The input-schema digest reads numbers as the definition digest (RFC 8785)
// does: 10, 10.0 and 1e1 are one number, so a schema spelt either way has
// one digest, snapshots that differ only so are Equal, and a diff names
// only what changed. A schema written with plain integers keeps the digest
// of its bytes in canonical form, as before.
func TestInputSchemaDigestNumberSpelling(t *testing.T) {
	tool := func(max, desc string) Tool {
		return Tool{Name: "t", Description: desc, InputSchema: json.RawMessage(`{"type":"integer","maximum":` + max + `}`)}
	}
	plain := tool("10", "")
	sum := sha256.Sum256([]byte(`{"maximum":10,"type":"integer"}`))
	if got, want := plain.InputSchemaDigest(), "sha256:"+hex.EncodeToString(sum[:]); got != want {
		t.Errorf("the digest of a schema with a plain integer changed: %s, want %s", got, want)
	}
	for _, max := range []string{"10.0", "1e1", "10E0", "1.0e+1", "100e-1"} {
		other := tool(max, "")
		if other.DefinitionDigest() != plain.DefinitionDigest() {
			t.Fatalf("maximum %s: the definition digests differ", max)
		}
		if other.InputSchemaDigest() != plain.InputSchemaDigest() {
			t.Errorf("maximum %s: input-schema digest %s, %s for 10", max, other.InputSchemaDigest(), plain.InputSchemaDigest())
		}
		a, b := &Snapshot{Server: "s", Tools: []Tool{plain}}, &Snapshot{Server: "s", Tools: []Tool{other}}
		if !Equal(a, b) || len(Diff(a, b)) != 0 {
			t.Errorf("maximum %s: Equal=%v, Diff=%v", max, Equal(a, b), Diff(a, b))
		}
		if got := DiffTool(tool("10", "Reads."), tool(max, "Reads one.")); len(got) != 1 || !strings.HasPrefix(got[0], "description changed: ") {
			t.Errorf("maximum %s and a new description: %q, want the description only", max, got)
		}
	}
	if eleven := tool("11", ""); eleven.InputSchemaDigest() == plain.InputSchemaDigest() ||
		Equal(&Snapshot{Server: "s", Tools: []Tool{plain}}, &Snapshot{Server: "s", Tools: []Tool{eleven}}) {
		t.Errorf("another number has the same digest, or is Equal")
	}
	// A number JCS cannot write still has a digest of its own.
	huge, huger := tool("1e400", ""), tool("1e401", "")
	if huge.InputSchemaDigest() == "" || huge.InputSchemaDigest() == huger.InputSchemaDigest() {
		t.Errorf("1e400: digest %q", huge.InputSchemaDigest())
	}
}

func TestDiff(t *testing.T) {
	old := sample()
	new := sample()
	new.Tools[0].InputSchema = json.RawMessage(`{"type":"object"}`)
	new.Tools[0].Annotations = &Annotations{ReadOnlyHint: b(false)}
	new.Tools = new.Tools[:2]
	new.Tools = append(new.Tools, Tool{Name: "archive_repo"})
	new.Prompts[1].Arguments[0].Required = false
	new.Resources = new.Resources[1:]
	var got []string
	for _, c := range Diff(old, new) {
		got = append(got, c.String())
	}
	want := []string{
		"tool archive_repo: added",
		"tool create_issue: removed",
		"tool search: input schema changed; readOnlyHint true -> false",
		"prompt summarize: arguments changed",
		"resource repo://b: removed",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d := Diff(sample(), sample()); len(d) != 0 {
		t.Errorf("Diff of equal snapshots: %v", d)
	}
}

// A Catalog supplies the catalogued names policyc diff compares
// (decisiondiff.Items).
func TestCatalogIsDecisionDiffItems(t *testing.T) {
	var items interface {
		Names(server string, kind table.Kind) []string
	} = &Catalog{Servers: map[string]*Snapshot{"github": sample()}}
	if got := items.Names("github", table.Tool); strings.Join(got, ",") != "create_issue,delete_repo,search" {
		t.Errorf("tools: %v", got)
	}
	if got := items.Names("github", table.Resource); strings.Join(got, ",") != "repo://a,repo://b" {
		t.Errorf("resources: %v", got)
	}
	if got := items.Names("other", table.Prompt); got != nil {
		t.Errorf("unknown server: %v", got)
	}
}

// A name from the server that would write lines or escapes of its own into
// catalog pull --check's output is quoted, and a long one shortened.
func TestChangeStringQuotesUnprintableNames(t *testing.T) {
	for name, want := range map[string]string{
		"create_issue":               "tool create_issue: added",
		"file:///a b":                "tool file:///a b: added",
		"x\ngithub: tool y: removed": `tool "x\ngithub: tool y: removed": added`,
		"\x1b[2Kok":                  `tool "\x1b[2Kok": added`,
		"a\xff":                      `tool "a\xff": added`,
		strings.Repeat("n", 1<<20):   `tool "` + strings.Repeat("n", 60) + `"… (1048576 bytes): added`,
	} {
		if got := (Change{Kind: "tool", Name: name, What: "added"}).String(); got != want {
			t.Errorf("%q: got %q, want %q", clipForTest(name), got, want)
		}
	}
}

func clipForTest(s string) string {
	if len(s) > 40 {
		return s[:40]
	}
	return s
}
