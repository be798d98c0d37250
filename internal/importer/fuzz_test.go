package importer

import (
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/table"
)

// checkImport is the invariant of both importers on any input: a result
// with an error holds no policy, and a policy without errors compiles.
func checkImport(t *testing.T, r *Result) {
	if r.HasErrors() {
		if r.CUE != nil {
			t.Fatalf("a policy was produced despite errors")
		}
		return
	}
	if r.CUE == nil {
		t.Fatalf("no policy and no error")
	}
	res := compiler.Compile(compiler.Input{Files: []compiler.File{{Name: "imported.cue", Data: r.CUE}}, Source: table.Source{PolicyPath: "."}})
	for _, d := range res.Diagnostics {
		if d.Severity == compiler.Error {
			t.Fatalf("the imported policy does not compile: %s\n%s", d.Format("."), r.CUE)
		}
	}
}

func FuzzHangar(f *testing.F) {
	for _, c := range hangarCases {
		f.Add([]byte(c))
	}
	f.Add([]byte("mcp_servers: {a: {tools: {allow_list: ['[!]]x', 'a\\\\b']}}}"))
	// Merges: of the mapping they are in, and of merges.
	f.Add([]byte("mcp_servers:\n  e:\n    tools: &d\n      <<: *d\n      deny_list: [x]\n"))
	f.Add([]byte("mcp_servers:\n  a: {tools: &a {deny_list: [x]}}\n  b: {tools: &b {<<: [*a, *a]}}\n  c: {tools: {<<: [*b, *b], allow_list: [y]}}\n"))
	f.Fuzz(func(t *testing.T, in []byte) { checkImport(t, Hangar("config.yaml", in)) })
}

func FuzzClaudeCode(f *testing.F) {
	f.Add([]byte(`{"permissions":{"allow":["mcp__a__b","mcp__c"],"ask":["mcp__a"],"deny":["mcp__a__x.y/z"]}}`))
	f.Add([]byte(`{"permissions":{"allow":["mcp__a__[*]"]}}`))
	f.Fuzz(func(t *testing.T, in []byte) { checkImport(t, ClaudeCode("settings.json", in)) })
}
