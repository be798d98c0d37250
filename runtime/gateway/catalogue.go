package gateway

import (
	"context"
	"fmt"
	"regexp"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/internal/mcplist"
	"github.com/policyc/policyc/runtime/table"
)

// catalogue is what one upstream offers, as it last listed it. It is
// immutable: a refresh builds a new one.
type catalogue struct {
	tools     []*mcp.Tool
	toolIdx   map[string]*mcp.Tool
	prompts   []*mcp.Prompt
	promptIdx map[string]*mcp.Prompt
	resources []*mcp.Resource
	// resourceIdx holds the listed URIs.
	resourceIdx map[string]*mcp.Resource
	templates   []*mcp.ResourceTemplate
	// templateRE[i] matches the URIs templates[i] expands to; nil for a
	// template that does not parse (it routes nothing).
	templateRE []*regexp.Regexp
	// digests holds the definition digest of each listed item by name (a
	// URI for resources), per table.Kind: what the table's pins are
	// compared with. An item whose definition does not encode has "".
	digests [3]map[string]string
}

// digest is the definition digest of a listed item; "" when it is not
// listed.
func (c *catalogue) digest(kind table.Kind, name string) string {
	if int(kind) >= len(c.digests) {
		return ""
	}
	return c.digests[kind][name]
}

// kinds of list an upstream can announce a change of.
const (
	listTools = 1 << iota
	listPrompts
	listResources // resources and templates
	listAll       = listTools | listPrompts | listResources
)

// fetch lists the kinds in which of an upstream the session advertises,
// keeping the rest from prev (nil: empty).
func fetch(ctx context.Context, cs *mcp.ClientSession, which int, prev *catalogue) (*catalogue, error) {
	c := &catalogue{}
	if prev != nil {
		*c = *prev
	}
	caps := &mcp.ServerCapabilities{}
	if ir := cs.InitializeResult(); ir != nil && ir.Capabilities != nil {
		caps = ir.Capabilities
	}
	if which&listTools != 0 {
		c.tools, c.toolIdx = nil, map[string]*mcp.Tool{}
		if caps.Tools != nil {
			tools, err := mcplist.Tools(ctx, cs)
			if err != nil {
				return nil, fmt.Errorf("tools/list: %w", err)
			}
			c.tools, c.toolIdx = firstByKey(tools, func(t *mcp.Tool) string { return t.Name })
		}
		c.digests[table.Tool] = toolDigests(c.tools)
	}
	if which&listPrompts != 0 {
		c.prompts, c.promptIdx = nil, map[string]*mcp.Prompt{}
		if caps.Prompts != nil {
			prompts, err := mcplist.Prompts(ctx, cs)
			if err != nil {
				return nil, fmt.Errorf("prompts/list: %w", err)
			}
			c.prompts, c.promptIdx = firstByKey(prompts, func(p *mcp.Prompt) string { return p.Name })
		}
		c.digests[table.Prompt] = make(map[string]string, len(c.prompts))
		for _, p := range c.prompts {
			if cp, err := catalog.PromptFromMCP(p); err == nil {
				c.digests[table.Prompt][p.Name] = cp.DefinitionDigest()
			}
		}
	}
	if which&listResources != 0 {
		c.resources, c.resourceIdx = nil, map[string]*mcp.Resource{}
		c.templates, c.templateRE = nil, nil
		if caps.Resources != nil {
			resources, err := mcplist.Resources(ctx, cs)
			if err != nil {
				return nil, fmt.Errorf("resources/list: %w", err)
			}
			c.resources, c.resourceIdx = firstByKey(resources, func(r *mcp.Resource) string { return r.URI })
			c.digests[table.Resource] = make(map[string]string, len(c.resources))
			for _, r := range c.resources {
				cr := catalog.ResourceFromMCP(r)
				c.digests[table.Resource][r.URI] = cr.DefinitionDigest()
			}
			templates, err := mcplist.Templates(ctx, cs)
			if err != nil {
				return nil, fmt.Errorf("resources/templates/list: %w", err)
			}
			for _, t := range templates {
				if t == nil || t.URITemplate == "" {
					continue
				}
				var re *regexp.Regexp
				if tmpl, err := uritemplate.New(t.URITemplate); err == nil {
					re = tmpl.Regexp()
				}
				c.templates = append(c.templates, t)
				c.templateRE = append(c.templateRE, re)
			}
		}
	}
	return c, nil
}

// toolDigests returns the definition digest of each tool by name; a tool
// whose definition does not encode has "", which matches no pin.
func toolDigests(tools []*mcp.Tool) map[string]string {
	out := make(map[string]string, len(tools))
	for _, t := range tools {
		out[t.Name], _ = catalog.ToolDigest(t)
	}
	return out
}

// firstByKey keeps the items of a listing that have a key (a name or a
// URI), the first of each key only, in order, and indexes them by key.
func firstByKey[T any](items []*T, key func(*T) string) ([]*T, map[string]*T) {
	var kept []*T
	idx := map[string]*T{}
	for _, it := range items {
		if it == nil {
			continue
		}
		if k := key(it); k != "" && idx[k] == nil {
			kept = append(kept, it)
			idx[k] = it
		}
	}
	return kept, idx
}

// routes reports whether a resources/read of uri belongs to this upstream:
// it listed the URI, or one of its templates expands to it.
func (c *catalogue) routes(uri string) bool {
	if c == nil {
		return false
	}
	if c.resourceIdx[uri] != nil {
		return true
	}
	for _, re := range c.templateRE {
		if re != nil && re.MatchString(uri) {
			return true
		}
	}
	return false
}
