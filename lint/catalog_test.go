package lint

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/policygen"
)

// pageCatalogue reads the JSON snapshot of a rule page's example, and the
// one committed at HEAD when the page has one.
func pageCatalogue(t *testing.T, id, current, committed string) *Catalogue {
	t.Helper()
	if current == "" {
		t.Fatalf("%s: a catalogue rule's example needs a JSON snapshot", id)
	}
	cat := &Catalogue{}
	var err error
	cat.Files = []catalog.File{{Name: server(t, current) + ".json", Data: []byte(current)}}
	if cat.Current, err = catalog.Parse(cat.Files); err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	if committed != "" {
		if cat.Committed, err = catalog.Parse([]catalog.File{{Name: server(t, committed) + ".json", Data: []byte(committed)}}); err != nil {
			t.Fatalf("%s: committed: %v", id, err)
		}
	}
	return cat
}

func server(t *testing.T, snapshot string) string {
	var s struct{ Server string }
	if err := json.Unmarshal([]byte(snapshot), &s); err != nil {
		t.Fatal(err)
	}
	return s.Server
}

// snapshot encodes a one-server catalogue canonically, as catalog pull
// writes it.
func snapshot(t *testing.T, s *catalog.Snapshot) *Catalogue {
	t.Helper()
	b, err := catalog.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	files := []catalog.File{{Name: s.Server + ".json", Data: b}}
	c, err := catalog.Parse(files)
	if err != nil {
		t.Fatal(err)
	}
	return &Catalogue{Current: c, Files: files}
}

func hint(b bool) *bool { return &b }

func TestCatalogueRules(t *testing.T) {
	cat := snapshot(t, &catalog.Snapshot{Server: "github", Tools: []catalog.Tool{
		{Name: "delete_repository"},
		{Name: "get_issue", Annotations: &catalog.Annotations{ReadOnlyHint: hint(true)}},
		{Name: "list_issues", Annotations: &catalog.Annotations{ReadOnlyHint: hint(true)}},
		{Name: "update_issue", Annotations: &catalog.Annotations{ReadOnlyHint: hint(false), DestructiveHint: hint(false)}},
	}, Prompts: []catalog.Prompt{{Name: "triage"}}})
	src := `approval_channels: page: approvals_page: {}
mcp_servers: github: access: {
	tool: {
		allow_list: ["update_issue", "delete_*", "list_issue"]
		approval_list: ["get_issue"]
		approval_channel: "page"
	approval_timeout_seconds: 60
	}
}
groups: ops: {
	members: ["alice"]
	mcp_servers: github: access: tool: deny_list: ["delete_repository"]
}
`
	rep := LintCatalogue(policy(src), nil, cat)
	got := codesAt(rep)
	// list_issues and the prompt triage fall to the built-in deny: the
	// policy working, no finding.
	want := []string{
		"p.cue:6:32 warning destructive-allowed",
		"p.cue:6:44 warning pattern-not-in-catalog",
		"p.cue:7:19 info approval-on-read-only",
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, f := range rep.Findings {
		switch f.Code {
		case compiler.CodePatternNotCatalogued:
			if !strings.Contains(f.Suggestion, `"list_issues"`) {
				t.Errorf("no nearest name: %s", f.Suggestion)
			}
		case compiler.CodeDestructiveAllowed:
			// alice's group denies it: only the others are named.
			if !strings.Contains(f.Message, "for anyone without a scope of their own") || strings.Contains(f.Message, "alice") {
				t.Errorf("principals: %s", f.Message)
			}
		}
	}

	// Without a catalogue, none of these rules runs.
	for _, f := range Lint(policy(src), nil).Findings {
		if info, _ := compiler.LookupCode(f.Code); info.Category == compiler.CategoryCatalog {
			t.Errorf("catalogue finding without a catalogue: %v", f)
		}
	}
}

// TestItemFallsToDefault: items no rule names are reported only where a
// default allows them, once per server, kind and default, at the default.
func TestItemFallsToDefault(t *testing.T) {
	cat := snapshot(t, &catalog.Snapshot{Server: "github",
		Tools: []catalog.Tool{
			{Name: "get_issue", Annotations: &catalog.Annotations{ReadOnlyHint: hint(true)}},
			{Name: "list_issues", Annotations: &catalog.Annotations{ReadOnlyHint: hint(true)}},
		},
		Prompts: []catalog.Prompt{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}, {Name: "e"}},
	})
	src := `defaults: prompt: "allow"
mcp_servers: github: access: {
	tool: allow_list: ["get_issue"]
	prompt: deny_list: ["e"]
}
`
	rep := LintCatalogue(policy(src), nil, cat)
	got := codesAt(rep)
	want := []string{"p.cue:3:11 info item-falls-to-default"}
	if !slices.Equal(got, want) {
		t.Fatalf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	msg := rep.Findings[0].Message
	for _, w := range []string{`github: 4 catalogued prompts are named by no rule ("a", "b", "c" and 1 more)`, "default allow set here", "any prompt the server adds"} {
		if !strings.Contains(msg, w) {
			t.Errorf("message %q lacks %q", msg, w)
		}
	}

	// One item: named, not counted.
	src = `mcp_servers: github: access: tool: {
	default: "allow"
	allow_list: ["get_issue"]
}
`
	rep = LintCatalogue(policy(src), nil, cat)
	if got := codesAt(rep); !slices.Equal(got, []string{"p.cue:4:2 info item-falls-to-default"}) ||
		!strings.Contains(rep.Findings[0].Message, `github tool "list_issues" is catalogued but no rule names it: it falls to the default allow set here`) {
		t.Errorf("findings %v: %v", got, rep.Findings)
	}
}

// TestPatternNotInCatalogGuard: a deny that matches nothing catalogued is
// a guard, an info whatever level the rule is set to (off still silences
// it); allow and approval patterns keep the rule's level.
func TestPatternNotInCatalogGuard(t *testing.T) {
	cat := snapshot(t, &catalog.Snapshot{Server: "github", Tools: []catalog.Tool{
		{Name: "get_issue", Annotations: &catalog.Annotations{ReadOnlyHint: hint(true)}},
	}})
	src := `mcp_servers: github: access: tool: {
	allow_list: ["get_issue", "get_isue"]
	deny_list: ["delete_*"]
}
`
	for _, tc := range []struct {
		config string
		want   []string
	}{
		{"", []string{"p.cue:4:28 warning pattern-not-in-catalog", "p.cue:5:14 info pattern-not-in-catalog"}},
		{`rules: "pattern-not-in-catalog": level: "error"`, []string{"p.cue:4:28 error pattern-not-in-catalog", "p.cue:5:14 info pattern-not-in-catalog"}},
		{`rules: "pattern-not-in-catalog": level: "info"`, []string{"p.cue:4:28 info pattern-not-in-catalog", "p.cue:5:14 info pattern-not-in-catalog"}},
		{`rules: "pattern-not-in-catalog": level: "off"`, nil},
	} {
		rep := LintCatalogue(policy(src), mustConfig(t, tc.config), cat)
		if got := codesAt(rep); !slices.Equal(got, tc.want) {
			t.Errorf("config %q: findings %v, want %v", tc.config, got, tc.want)
		}
		for _, f := range rep.Findings {
			if f.Pos.Line == 5 && (!strings.Contains(f.Message, "a guard") || !strings.HasPrefix(f.Suggestion, "nothing to do if it is a guard")) {
				t.Errorf("deny finding does not say it is a guard: %s (%s)", f.Message, f.Suggestion)
			}
		}
	}
}

// TestDestructiveAllowedNoHints: a tool whose server states no hints is
// destructive only by the defaults; allowed by an entry that names it, that
// is an info. Through a glob, or with the server saying destructive, it
// stays a warning.
func TestDestructiveAllowedNoHints(t *testing.T) {
	cat := snapshot(t, &catalog.Snapshot{Server: "memory", Tools: []catalog.Tool{
		{Name: "delete_entities", Annotations: &catalog.Annotations{DestructiveHint: hint(true)}},
		{Name: "read_graph"},
		{Name: "search_nodes", Annotations: &catalog.Annotations{Title: "Search"}},
		{Name: "open_nodes"},
	}})
	src := `mcp_servers: memory: access: tool: allow_list: ["read_graph", "search_nodes", "open_*", "delete_entities"]
`
	rep := LintCatalogue(policy(src), nil, cat)
	want := []string{
		"p.cue:3:49 info destructive-allowed",
		"p.cue:3:63 info destructive-allowed",
		"p.cue:3:79 warning destructive-allowed",
		"p.cue:3:89 warning destructive-allowed",
	}
	if got := codesAt(rep); !slices.Equal(got, want) {
		t.Fatalf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if m := rep.Findings[0].Message; !strings.Contains(m, "the server states no hints") {
		t.Errorf("message %q does not say why it is an info", m)
	}
}

func TestInputSchemaChanged(t *testing.T) {
	tool := func(schema string) *catalog.Snapshot {
		return &catalog.Snapshot{Server: "github", Tools: []catalog.Tool{
			{Name: "create_issue", InputSchema: json.RawMessage(schema), Annotations: &catalog.Annotations{ReadOnlyHint: hint(false), DestructiveHint: hint(false)}},
		}}
	}
	src := `mcp_servers: github: access: tool: allow_list: ["create_issue"]` + "\n"
	cat := snapshot(t, tool(`{"type":"object","properties":{"title":{"type":"string"},"repo":{"type":"string"}}}`))
	// The same schema written in another key order is the same schema.
	cat.Committed = snapshot(t, tool(`{"properties":{"repo":{"type":"string"},"title":{"type":"string"}},"type":"object"}`)).Current
	if got := codesAt(LintCatalogue(policy(src), nil, cat)); len(got) != 0 {
		t.Fatalf("same schema: %v", got)
	}
	cat.Committed = snapshot(t, tool(`{"type":"object","properties":{"title":{"type":"string"}}}`)).Current
	rep := LintCatalogue(policy(src), nil, cat)
	if got := codesAt(rep); !slices.Equal(got, []string{"catalog/github.json:24:7 warning input-schema-changed"}) {
		t.Fatalf("changed schema: %v", got)
	}
	if m := rep.Findings[0].Message; !strings.Contains(m, "its decision is allow") {
		t.Errorf("message: %s", m)
	}
}

// BenchmarkLintCatalogue lints a generated policy of 20 servers and 1,000
// tool rules against a catalogue that lists the generator's 228 names on
// every server (4,560 tools, every other one without annotations): the
// whole pipeline with the catalogue rules.
func BenchmarkLintCatalogue(b *testing.B) {
	g := policygen.Generate(policygen.Spec{Servers: 20, RulesPerServer: 50, Seed: 1})
	cat := &Catalogue{}
	for _, srv := range g.Servers {
		s := &catalog.Snapshot{Server: srv}
		for i, n := range g.Names {
			t := catalog.Tool{Name: n}
			if i%2 == 0 {
				t.Annotations = &catalog.Annotations{ReadOnlyHint: hint(true)}
			}
			s.Tools = append(s.Tools, t)
		}
		data, err := catalog.Encode(s)
		if err != nil {
			b.Fatal(err)
		}
		cat.Files = append(cat.Files, catalog.File{Name: srv + ".json", Data: data})
	}
	var err error
	if cat.Current, err = catalog.Parse(cat.Files); err != nil {
		b.Fatal(err)
	}
	cat.Committed = cat.Current
	b.ReportAllocs()
	for b.Loop() {
		rep := LintCatalogue(g.Files, nil, cat)
		if err := WriteText(io.Discard, rep, Output{Root: "p"}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestItemPositions: an item's finding is at its own name, not at a prompt
// argument of the same name, in the canonical layout and in a snapshot
// written on one line.
func TestItemPositions(t *testing.T) {
	cat := snapshot(t, &catalog.Snapshot{Server: "github",
		Prompts:   []catalog.Prompt{{Name: "a", Arguments: []catalog.PromptArgument{{Name: "triage"}}}, {Name: "triage"}},
		Resources: []catalog.Resource{{URI: "file:///triage"}}})
	idx := indexSnapshot("catalog/github.json", cat.Files[0].Data)
	lines := strings.Split(string(cat.Files[0].Data), "\n")
	for _, k := range []string{"prompt\x00triage", "prompt\x00a", "resource\x00file:///triage"} {
		pos, ok := idx[k]
		if !ok {
			t.Fatalf("%q not indexed:\n%s", k, cat.Files[0].Data)
		}
		name := k[strings.IndexByte(k, 0)+1:]
		if l := lines[pos.Line-1]; !strings.HasPrefix(l, "      \"") || !strings.Contains(l, `"`+name+`"`) {
			t.Errorf("%q at line %d: %q", k, pos.Line, l)
		}
	}
	// A snapshot written on one line, by hand, is indexed all the same.
	compact := []byte(`{"format": "policyc.catalog/v1", "server": "github", "prompts": [{"arguments": [{"name": "triage"}], "name": "a"}, {"name": "triage"}]}`)
	idx = indexSnapshot("catalog/github.json", compact)
	want := map[string]int{"prompt\x00a": strings.Index(string(compact), `"name": "a"`) + 1, "prompt\x00triage": strings.LastIndex(string(compact), `"name": "triage"`) + 1}
	for k, col := range want {
		if pos := idx[k]; pos.Line != 1 || pos.Column != col {
			t.Errorf("compact snapshot: %q at %d:%d, want 1:%d", k, pos.Line, pos.Column, col)
		}
	}
	if len(idx) != len(want) {
		t.Errorf("compact snapshot: %d items indexed, want %d: %v", len(idx), len(want), idx)
	}
}

// longNames is a catalogue of tools with names of n characters that differ
// in their last ones, and a policy allowing patterns that match none of
// them, each a few edits from every tool.
func longNames(t testing.TB, tools, patterns, n int) (*Catalogue, []compiler.File) {
	base := strings.Repeat("t", n-8)
	s := &catalog.Snapshot{Server: "github"}
	for i := range tools {
		s.Tools = append(s.Tools, catalog.Tool{Name: fmt.Sprintf("%s%08d", base, i)})
	}
	b, err := catalog.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	files := []catalog.File{{Name: "github.json", Data: b}}
	cat := &Catalogue{Files: files}
	if cat.Current, err = catalog.Parse(files); err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	src.WriteString("mcp_servers: github: access: tool: allow_list: [\n")
	for i := range patterns {
		fmt.Fprintf(&src, "\t%q,\n", fmt.Sprintf("%sx%07d", base, i))
	}
	src.WriteString("]\n")
	return cat, policy(src.String())
}

// TestCatalogueLongNames: a pattern that matches no catalogued tool gets
// the nearest names as suggestions when it is of a usual length, and none
// when it is longer than a name anyone misspells (it is reported all the
// same).
func TestCatalogueLongNames(t *testing.T) {
	for _, tc := range []struct {
		n       int
		suggest bool
	}{{40, true}, {256, true}, {257, false}, {1000, false}} {
		cat, files := longNames(t, 5, 2, tc.n)
		var got int
		for _, f := range LintCatalogue(files, nil, cat).Findings {
			if f.Code != compiler.CodePatternNotCatalogued {
				continue
			}
			got++
			if did := strings.HasPrefix(f.Suggestion, "did you mean"); did != tc.suggest {
				t.Errorf("names of %d characters: suggestion %.80q", tc.n, f.Suggestion)
			}
		}
		if got != 2 {
			t.Errorf("names of %d characters: %d pattern-not-in-catalog findings, want 2", tc.n, got)
		}
	}
}

// BenchmarkLintCatalogueLongNames lints 20 patterns against a catalogue of
// 200 tools with names of 256 and of 1,000 characters, each pattern a few
// edits from every tool.
func BenchmarkLintCatalogueLongNames(b *testing.B) {
	for _, n := range []int{256, 1000} {
		cat, files := longNames(b, 200, 20, n)
		b.Run(fmt.Sprintf("len=%d", n), func(b *testing.B) {
			for b.Loop() {
				LintCatalogue(files, nil, cat)
			}
		})
	}
}
