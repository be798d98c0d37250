package compiler

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/runtime/table"
)

func itemsCatalogue(t *testing.T) *catalog.Catalog {
	t.Helper()
	ro := true
	var files []catalog.File
	for _, s := range []*catalog.Snapshot{
		{Server: "github", Tools: []catalog.Tool{
			{Name: "get_issue", Annotations: &catalog.Annotations{ReadOnlyHint: &ro}, InputSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: "delete_repository"},
			{Name: "merge_pull_request"},
		}, Prompts: []catalog.Prompt{{Name: "triage"}}},
		{Server: "memory", Resources: []catalog.Resource{{URI: "memory://notes"}}},
		// A server the policy does not define: denied, as the gateway denies it.
		{Server: "unlisted", Tools: []catalog.Tool{{Name: "anything"}}},
	} {
		b, err := catalog.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, catalog.File{Name: s.Server + ".json", Data: b})
	}
	c, err := catalog.Parse(files)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const itemsPolicy = `package policy

approval_channels: page: approvals_page: {}
defaults: prompt: "allow"
mcp_servers: github: access: tool: {
	allow_list: ["get_*"]
	approval_list: ["merge_*"]
	approval_channel: "page"
	approval_timeout_seconds: 60
}
mcp_servers: memory: access: resource: allow_list: ["memory://*"]
groups: contractors: {
	members: ["carol", "dan"]
	mcp_servers: github: access: tool: approval_list: ["get_*"]
}
principals: dan: mcp_servers: github: access: tool: deny_list: ["merge_*"]
principals: erin: mcp_servers: memory: access: resource: allow_list: ["memory://*"]
`

func compileItems(t *testing.T) []byte {
	t.Helper()
	res := Compile(Input{Files: []File{{Name: "p.cue", Data: []byte(itemsPolicy)}}, Catalog: itemsCatalogue(t)})
	if res.Table == nil {
		t.Fatalf("no table: %v", res.Diagnostics)
	}
	b, err := table.Encode(res.Table)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFreezeItems(t *testing.T) {
	b := compileItems(t)
	if again := compileItems(t); !bytes.Equal(b, again) {
		t.Fatal("two compilations with the same catalogue differ")
	}
	tab, err := table.Decode(b)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	var got []string
	for _, it := range tab.Items {
		got = append(got, strings.Join([]string{it.Server, it.Kind, it.Name, it.Principal, it.Decision, it.Origin, it.InputSchemaDigest}, " "))
	}
	ro := catalog.Tool{InputSchema: json.RawMessage(`{"type":"object"}`)}
	// A named principal's item appears only where their scopes change the
	// decision or the rule that decides it: the contractors hold get_issue
	// for approval, dan is also denied merges; erin's allow_list admits
	// what the server already allows, so erin has no item.
	want := []string{
		"github prompt triage  allow p.cue:4 ",
		"github tool delete_repository  deny  ",
		"github tool get_issue  allow p.cue:6 " + ro.InputSchemaDigest(),
		"github tool get_issue carol approve p.cue:14 " + ro.InputSchemaDigest(),
		"github tool get_issue dan approve p.cue:14 " + ro.InputSchemaDigest(),
		"github tool merge_pull_request  approve p.cue:7 ",
		"github tool merge_pull_request dan deny p.cue:16 ",
		"memory resource memory://notes  allow p.cue:11 ",
		"unlisted tool anything  deny  ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("items:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Without a catalogue the table has no items key at all.
	res := Compile(Input{Files: []File{{Name: "p.cue", Data: []byte(itemsPolicy)}}})
	plain, err := table.Encode(res.Table)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain, []byte(`"items"`)) {
		t.Fatal("a table compiled without a catalogue has items")
	}
}

// TestFreezeItemsDigest: the digest covers the items, so changing one
// frozen decision is caught.
func TestFreezeItemsDigest(t *testing.T) {
	b := compileItems(t)
	old := []byte(`"decision": "deny",` + "\n      \"definition_digest\": \"sha256:")
	if !bytes.Contains(b, old) {
		t.Fatalf("the table does not hold the expected item:\n%s", b)
	}
	forged := bytes.Replace(b, old, bytes.Replace(old, []byte(`"deny"`), []byte(`"allow"`), 1), 1)
	_, err := table.Decode(forged)
	var de *table.DigestError
	if !errors.As(err, &de) {
		t.Fatalf("a changed item decision decodes: %v", err)
	}
}

func TestTableCheckItems(t *testing.T) {
	for _, tc := range []struct {
		items []table.Item
		want  string
	}{
		{[]table.Item{{Server: "a", Kind: "tool", Name: "x", Decision: "maybe"}}, "unknown decision"},
		{[]table.Item{{Server: "a", Kind: "widget", Name: "x", Decision: "deny"}}, "unknown kind"},
		{[]table.Item{{Server: "a", Kind: "prompt", Name: "x", Decision: "deny", InputSchemaDigest: "sha256:00"}}, "input-schema digest on a prompt"},
		{[]table.Item{{Server: "b", Kind: "tool", Name: "x", Decision: "deny"}, {Server: "a", Kind: "tool", Name: "x", Decision: "deny"}}, "not sorted"},
		{[]table.Item{{Server: "a", Kind: "tool", Name: "x", Decision: "deny"}, {Server: "a", Kind: "tool", Name: "x", Decision: "deny"}}, "listed twice"},
		{[]table.Item{{Server: "a", Kind: "tool", Decision: "deny"}}, "needs a server and a name"},
		{[]table.Item{{Server: "a", Kind: "tool", Name: "x", Decision: "deny", Principal: "bob"}, {Server: "a", Kind: "tool", Name: "x", Decision: "deny"}}, "not sorted"},
		{[]table.Item{{Server: "a", Kind: "tool", Name: "x", Decision: "deny", Principal: "bob"}}, "without the item's decision for everyone else"},
		{[]table.Item{{Server: "a", Kind: "tool", Name: "x", Decision: "deny"}, {Server: "a", Kind: "tool", Name: "y", Decision: "deny", Principal: "bob"}}, "without the item's decision for everyone else"},
		{[]table.Item{{Server: "a", Kind: "tool", Name: "x", Decision: "deny", Principal: "bob"}, {Server: "a", Kind: "tool", Name: "x", Decision: "deny", Principal: "bob"}}, "listed twice"},
	} {
		tab := &table.Table{Servers: map[string]table.Server{}, Items: tc.items}
		err := tab.Check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.items, err, tc.want)
		}
	}
}
