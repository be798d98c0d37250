package gateway

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// pinnedListing is a listing of n tools as the SDK decodes it, and a table
// that pins every one of them (enforce).
func pinnedListing(b *testing.B, n int) ([]*mcp.Tool, *decide.Table) {
	tools := make([]*mcp.Tool, n)
	src := &table.Table{Format: table.Format, Servers: map[string]table.Server{"github": {Pins: table.PinsEnforce,
		Tool:     &table.Access{Default: "allow", Rules: []table.Rule{}},
		Prompt:   &table.Access{Default: "deny", Rules: []table.Rule{}},
		Resource: &table.Access{Default: "deny", Rules: []table.Rule{}}}},
		Scopes: []table.Scope{}, Channels: map[string]table.Channel{}, Serial: 1}
	for i := range tools {
		raw := fmt.Sprintf(`{"name":"tool_%04d","description":"Does thing %d with the repository and returns what it found.",
			"inputSchema":{"type":"object","properties":{"owner":{"type":"string","description":"the owner"},"repo":{"type":"string"},"n":{"type":"integer","minimum":1}},"required":["owner","repo"]},
			"annotations":{"readOnlyHint":true,"openWorldHint":false}}`, i, i)
		tools[i] = new(mcp.Tool)
		if err := json.Unmarshal([]byte(raw), tools[i]); err != nil {
			b.Fatal(err)
		}
		ct, err := catalog.ToolFromMCP(tools[i])
		if err != nil {
			b.Fatal(err)
		}
		src.Items = append(src.Items, table.Item{Server: "github", Kind: "tool", Name: tools[i].Name, Decision: "allow", DefinitionDigest: ct.DefinitionDigest()})
	}
	rt, err := decide.Load(src)
	if err != nil {
		b.Fatal(err)
	}
	return tools, rt
}

// BenchmarkPinsCheckListing is what a new listing of 1,000 tools costs the
// pins: each tool's definition digest, then each compared with its pin.
func BenchmarkPinsCheckListing(b *testing.B) {
	tools, rt := pinnedListing(b, 1000)
	p := buildPins(rt)
	b.ReportAllocs()
	for b.Loop() {
		c := &catalogue{tools: tools}
		c.digests[table.Tool] = toolDigests(tools)
		for _, tl := range tools {
			if p.hides("github", table.Tool, tl.Name, c) {
				b.Fatal(tl.Name, " is hidden")
			}
		}
	}
}

// BenchmarkPinsCallLookup is the pins' share of a tools/call: the lookup
// of the called tool's pin.
func BenchmarkPinsCallLookup(b *testing.B) {
	tools, rt := pinnedListing(b, 1000)
	p := buildPins(rt)
	c := &catalogue{tools: tools}
	c.digests[table.Tool] = toolDigests(tools)
	b.ReportAllocs()
	for b.Loop() {
		if p.hides("github", table.Tool, "tool_0500", c) {
			b.Fatal("hidden")
		}
	}
}
