package cmd

import (
	"slices"
	"testing"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/decisiondiff"
	"github.com/policyc/policyc/runtime/table"
)

// TestDiffItems: the names compared are the union of both sides' items,
// from a table's recorded items or a revision's catalogue, and each
// catalogued item whose decision changes gets a row.
func TestDiffItems(t *testing.T) {
	snap, err := catalog.Encode(&catalog.Snapshot{Server: "github", Tools: []catalog.Tool{{Name: "merge_pull_request"}, {Name: "get_issue"}}})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Parse([]catalog.File{{Name: "github.json", Data: snap}})
	if err != nil {
		t.Fatal(err)
	}
	compile := func(src string, c *catalog.Catalog) *table.Table {
		res := compiler.Compile(compiler.Input{Files: []compiler.File{{Name: "p.cue", Data: []byte("package policy\n\n" + src)}}, Catalog: c})
		if res.Table == nil {
			t.Fatalf("%v", res.Diagnostics)
		}
		return res.Table
	}
	old := compile(`mcp_servers: github: access: tool: allow_list: ["get_*", "merge_*"]`, cat)
	// The new side is a table compiled without a catalogue, with an item
	// only it records.
	neu := compile(`mcp_servers: github: access: tool: allow_list: ["get_*"]`, nil)
	neu.Items = []table.Item{{Server: "github", Kind: "tool", Name: "merge_branch", Decision: "deny"}}

	items := catalogueItems([2]*table.Table{old, neu}, [2]*catalog.Catalog{cat, nil})
	if got := items.Names("github", table.Tool); !slices.Equal(got, []string{"get_issue", "merge_branch", "merge_pull_request"}) {
		t.Fatalf("names: %v", got)
	}
	if got := items.Names("github", table.Prompt); got != nil {
		t.Fatalf("prompt names: %v", got)
	}
	if catalogueItems([2]*table.Table{compile(`mcp_servers: github: {}`, nil), nil}, [2]*catalog.Catalog{}) != nil {
		t.Fatal("items without any catalogue")
	}

	rep, err := decisiondiff.Compare(old, neu, decisiondiff.Options{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rep.Changes {
		names = append(names, r.Name)
	}
	for _, want := range []string{"merge_branch", "merge_pull_request"} {
		if !slices.Contains(names, want) {
			t.Errorf("no row for %s: %v", want, names)
		}
	}
	if slices.Contains(names, "get_issue") {
		t.Errorf("a row for get_issue, whose decision does not change: %v", names)
	}
}
