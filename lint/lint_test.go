package lint

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/schema"
)

func policy(src string) []compiler.File {
	return []compiler.File{{Name: "p.cue", Data: []byte("package policy\n\n" + src)}}
}

func codesAt(rep *Report) []string {
	var out []string
	for _, f := range rep.Findings {
		out = append(out, f.Pos.String()+" "+f.Severity.String()+" "+f.Code)
	}
	return out
}

func mustConfig(t *testing.T, src string) *Config {
	t.Helper()
	cfg, err := ParseConfig(compiler.File{Name: "policyc.cue", Data: []byte("package policyc\n\n" + src)})
	if err != nil {
		t.Fatalf("config: %v %v", err, err.(*ConfigError).Diagnostics)
	}
	return cfg
}

// TestSchemaListsEveryRule: the config schema's rules are exactly the
// catalogue, so a misspelt id gets a suggestion and a new rule cannot be
// forgotten.
func TestSchemaListsEveryRule(t *testing.T) {
	ctx := cuecontext.New()
	var src bytes.Buffer
	for _, f := range schema.Files() {
		src.Write(f.Data)
		src.WriteString("\n")
	}
	// The files are one package: concatenating them without the repeated
	// package clauses gives the same definitions.
	text := strings.ReplaceAll(src.String(), "package schema\n", "")
	v := ctx.CompileString("package schema\n" + text)
	if v.Err() != nil {
		t.Fatal(v.Err())
	}
	it, err := v.LookupPath(cue.MakePath(cue.Def("#LintConfig"), cue.Str("rules").Optional())).Fields(cue.Optional(true))
	if err != nil {
		t.Fatal(err)
	}
	var inSchema []string
	for it.Next() {
		inSchema = append(inSchema, it.Selector().Unquoted())
	}
	var catalogue []string
	for _, c := range compiler.Codes {
		if c.Category == compiler.CategoryGateway {
			continue // about the gateway's configuration: lint never reports it
		}
		catalogue = append(catalogue, c.ID)
	}
	slices.Sort(inSchema)
	slices.Sort(catalogue)
	if !slices.Equal(inSchema, catalogue) {
		t.Fatalf("schema/lint.cue rules:\n%v\ncatalogue:\n%v", inSchema, catalogue)
	}
}

// TestRulePages: every rule has a page with the sections the catalogue
// promises, and every page is a rule's.
func TestRulePages(t *testing.T) {
	dir := filepath.Join("..", "docs", "rules")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]bool{}
	for _, e := range entries {
		pages[strings.TrimSuffix(e.Name(), ".md")] = true
	}
	for _, c := range compiler.Codes {
		if !pages[c.ID] {
			t.Errorf("no page %s", filepath.Join(dir, c.ID+".md"))
			continue
		}
		delete(pages, c.ID)
		b, err := os.ReadFile(filepath.Join(dir, c.ID+".md"))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, want := range []string{"# " + c.ID, "## Avoid", "## Prefer", "## Why",
			"Level: " + c.Level.String(), "Category: " + string(c.Category)} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: missing %q", filepath.Join(dir, c.ID+".md"), want)
			}
		}
	}
	for p := range pages {
		if p != "README" {
			t.Errorf("docs/rules/%s.md is no rule's page", p)
		}
	}
}

func TestIgnoreComments(t *testing.T) {
	src := `mcp_servers: github: access: tool: {
	deny_list: [
		"get_secret",
		"get_secret", // policyc:ignore duplicate-pattern same line, after the code
		// policyc:ignore duplicate-pattern the line above
		// another comment between does not count as code
		"get_secret",
		"get_secret",
		"x", // policyc:ignore duplicate-pattern nothing to silence here
	]
	allow_list: ["// policyc:ignore duplicate-pattern in a string is not a comment", "y"]
}
`
	rep := Lint(policy(src), nil)
	got := codesAt(rep)
	want := []string{
		"p.cue:10:3 warning duplicate-pattern",
		"p.cue:11:8 warning unused-ignore",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if rep.Suppressed != 2 {
		t.Errorf("suppressed %d, want 2", rep.Suppressed)
	}
}

func TestIgnoreNeverSilencesCompileErrors(t *testing.T) {
	src := `mcp_servers: github: access: tool: allow_list: [
	"get_[", // policyc:ignore invalid-glob we know
]
`
	rep := Lint(policy(src), nil)
	got := codesAt(rep)
	want := []string{"p.cue:4:2 error invalid-glob", "p.cue:4:11 warning invalid-ignore"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	// Ignoring every file silences the comment's own finding, never the
	// compile error.
	rep = Lint(policy(src), mustConfig(t, `ignore_files: ["*.cue"]`))
	if got := codesAt(rep); !slices.Equal(got, want[:1]) || !rep.Fails(compiler.Error) {
		t.Fatalf("got %q, want only the compile error, failing the run", got)
	}
}

func TestLevelsAndFiles(t *testing.T) {
	files := []compiler.File{
		{Name: "a.cue", Data: []byte("package policy\n\nmcp_servers: s: access: tool: allow_list: [\"get_*\"]\nglobal: access: tool: deny_list: [\"delete_*\"]\n")},
		{Name: "b.cue", Data: []byte("package policy\n\nmcp_servers: t: access: tool: allow_list: [\"x\", \"x\"]\n")},
	}
	rep := Lint(files, nil)
	if got := codesAt(rep); !slices.Equal(got, []string{"a.cue:4:35 info redundant-deny", "b.cue:3:49 warning duplicate-pattern"}) {
		t.Fatalf("defaults: %q", got)
	}
	if rep.Fails(compiler.Warning) != true || rep.Fails(compiler.Error) {
		t.Fatal("a warning fails at warning, not at error")
	}
	rep = Lint(files, mustConfig(t, `rules: {
	"redundant-deny": level: "error"
	"duplicate-pattern": level: "off"
}`))
	if got := codesAt(rep); !slices.Equal(got, []string{"a.cue:4:35 error redundant-deny"}) || rep.Suppressed != 1 {
		t.Fatalf("levels: %q, %d suppressed", got, rep.Suppressed)
	}
	rep = Lint(files, mustConfig(t, `rules: "duplicate-pattern": ignore_files: ["b.*"]`))
	if got := codesAt(rep); !slices.Equal(got, []string{"a.cue:4:35 info redundant-deny"}) {
		t.Fatalf("rule ignore_files: %q", got)
	}
	rep = Lint(files, mustConfig(t, `ignore_files: ["a.cue"]`))
	if got := codesAt(rep); !slices.Equal(got, []string{"b.cue:3:49 warning duplicate-pattern"}) {
		t.Fatalf("ignore_files: %q", got)
	}
}

func TestMaxApprovalTimeout(t *testing.T) {
	src := `approval_channels: page: approvals_page: {}
mcp_servers: s: access: tool: {
	approval_list: ["merge_*"]
	approval_channel: "page"
	approval_timeout_seconds: 120
}
`
	if got := codesAt(Lint(policy(src), nil)); len(got) != 0 {
		t.Fatalf("a request of 120 s is within the default limit: %q", got)
	}
	if got := codesAt(Lint(policy(strings.Replace(src, "120", "86400", 1)), nil)); !slices.Equal(got, []string{"p.cue:7:2 warning approval-timeout-too-long"}) {
		t.Fatalf("default limit: %q", got)
	}
	if got := codesAt(Lint(policy(src), mustConfig(t, `rules: "approval-timeout-too-long": max_seconds: 120`))); len(got) != 0 {
		t.Fatalf("120 s is within a 120 s limit: %q", got)
	}
	if got := codesAt(Lint(policy(src), mustConfig(t, `rules: "approval-timeout-too-long": max_seconds: 30`))); len(got) != 1 {
		t.Fatalf("120 s exceeds 30 s: %q", got)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`rules: "shadowed-rul": level: "off"`, `did you mean "shadowed-rule"?`},
		{`rules: "type-error": level: "warning"`, "type-error stops compilation"},
		{`rules: "syntax-error": ignore_files: ["x.cue"]`, "it cannot be ignored in any file"},
		{`rules: "redundant-deny": level: "loud"`, `"loud" is not allowed here`},
		{`fail_level: "info"`, `"info" is not allowed here`},
		{`ignore_files: ["[z-a]"]`, "invalid glob"},
		{`rules: "shadowed-rule": max_seconds: 5`, `unknown key "max_seconds"`},
	} {
		_, err := ParseConfig(compiler.File{Name: "policyc.cue", Data: []byte("package policyc\n\n" + tc.src)})
		var ce *ConfigError
		if err == nil || !errorsAs(err, &ce) {
			t.Errorf("%s: want a ConfigError, got %v", tc.src, err)
			continue
		}
		var all strings.Builder
		for _, d := range ce.Diagnostics {
			all.WriteString(d.Format("") + "\n")
		}
		if !strings.Contains(all.String(), tc.want) {
			t.Errorf("%s: diagnostics do not say %q:\n%s", tc.src, tc.want, all.String())
		}
		if strings.Count(all.String(), "\n") > 2*len(ce.Diagnostics) || len(ce.Diagnostics) > 2 {
			t.Errorf("%s: one problem, one diagnostic:\n%s", tc.src, all.String())
		}
	}
}

func errorsAs(err error, ce **ConfigError) bool {
	c, ok := err.(*ConfigError)
	*ce = c
	return ok
}

func TestGitHubEscaping(t *testing.T) {
	rep := &Report{Findings: []Finding{{Diagnostic: compiler.Diagnostic{
		Pos: compiler.Position{File: "a,b:c.cue", Line: 2, Column: 3}, Code: "shadowed-rule", Severity: compiler.Warning,
		Message: "100% shadowed\nsecond line"}, Help: Help("shadowed-rule")}}}
	var b bytes.Buffer
	if err := WriteGitHub(&b, rep, Output{Root: "."}); err != nil {
		t.Fatal(err)
	}
	want := "::warning file=a%2Cb%3Ac.cue,line=2,col=3,title=policyc shadowed-rule::100%25 shadowed%0Asecond line%0Ahttps://github.com/policyc/policyc/blob/main/docs/rules/shadowed-rule.md\n"
	if b.String() != want {
		t.Fatalf("got  %q\nwant %q", b.String(), want)
	}
}

func TestRuleNames(t *testing.T) {
	if got := ruleName("approval-timeout-too-long"); got != "ApprovalTimeoutTooLong" {
		t.Fatal(got)
	}
}

// TestRulePageExamples lints the first CUE example under "## Avoid" and
// "## Prefer" of every rule page: the one must give the rule's finding, the
// other must not. Pages whose examples cannot be a policy file (a shell
// session, a file in another encoding, a gateway configuration, tens of
// thousands of entries) are left out; testdata/script/gateway_config_rulepage.txtar
// checks the gateway-config page's, and compiler's TestEvaluationBudget
// the policy-too-large finding.
func TestRulePageExamples(t *testing.T) {
	skip := map[string]bool{compiler.CodeNoPolicy: true, compiler.CodeNotUTF8: true, compiler.CodeGatewayConfig: true, compiler.CodeTooLarge: true}
	block := func(page, section, lang string) string {
		i := strings.Index(page, "## "+section+"\n")
		if i < 0 {
			return ""
		}
		rest := page[i+1:]
		if end := strings.Index(rest, "\n## "); end >= 0 {
			rest = rest[:end]
		}
		j := strings.Index(rest, "```"+lang+"\n")
		if j < 0 {
			return ""
		}
		rest = rest[j+len("```"+lang+"\n"):]
		return rest[:strings.Index(rest, "```")]
	}
	for _, c := range compiler.Codes {
		if skip[c.ID] {
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", "docs", "rules", c.ID+".md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, section := range []string{"Avoid", "Prefer"} {
			src := block(string(b), section, "cue")
			if src == "" {
				t.Errorf("%s: no CUE example under ## %s", c.ID, section)
				continue
			}
			if !strings.HasPrefix(src, "package ") {
				src = "package policy\n\n" + src
			}
			// A catalogue rule's page gives the snapshot of each example
			// (and the one committed at HEAD) as JSON blocks.
			var cat *Catalogue
			if c.Category == compiler.CategoryCatalog {
				cat = pageCatalogue(t, c.ID, block(string(b), section, "json"), block(string(b), "Committed at HEAD", "json"))
			}
			rep := LintCatalogue([]compiler.File{{Name: "example.cue", Data: []byte(src)}}, nil, cat)
			found := slices.ContainsFunc(rep.Findings, func(f Finding) bool { return f.Code == c.ID })
			if section == "Avoid" && !found {
				t.Errorf("%s: the Avoid example does not give the finding: %q", c.ID, codesAt(rep))
			}
			if section == "Prefer" && found {
				t.Errorf("%s: the Prefer example gives the finding: %q", c.ID, codesAt(rep))
			}
		}
	}
}

// TestEmptyGroupPosition: empty-group is reported at the group's members,
// or at the group's key when it lists none, where an ignore comment for it
// goes; not at one of its server blocks.
func TestEmptyGroupPosition(t *testing.T) {
	src := `mcp_servers: github: access: tool: allow_list: ["get_*"]
groups: contractors: {
	mcp_servers: github: access: tool: deny_list: ["get_x"]
	members: []
}
groups: ops: {
	global: access: tool: deny_list: ["get_y"]
}
groups: tokens: {
	members: [] // policyc:ignore empty-group access tokens name this group
	mcp_servers: github: access: tool: deny_list: ["get_z"]
}
`
	rep := Lint(policy(src), nil)
	got := codesAt(rep)
	want := []string{
		"p.cue:6:2 warning empty-group",
		"p.cue:8:9 warning empty-group",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if rep.Suppressed != 1 {
		t.Errorf("suppressed %d, want 1", rep.Suppressed)
	}
}
