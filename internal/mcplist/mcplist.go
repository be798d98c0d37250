// Package mcplist reads an MCP server's whole listings, page by page, with
// limits: a server that keeps returning cursors or items cannot keep a
// reader busy or fill its memory. The gateway and catalog pull both list
// upstreams through it.
package mcplist

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits on one listing.
const (
	MaxPages = 1000
	MaxItems = 100000
)

// Tools returns every tool the server lists.
func Tools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	return all(ctx, func(cursor string) ([]*mcp.Tool, string, error) {
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return res.Tools, res.NextCursor, nil
	})
}

// Prompts returns every prompt the server lists.
func Prompts(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Prompt, error) {
	return all(ctx, func(cursor string) ([]*mcp.Prompt, string, error) {
		res, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return res.Prompts, res.NextCursor, nil
	})
}

// Resources returns every resource the server lists.
func Resources(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Resource, error) {
	return all(ctx, func(cursor string) ([]*mcp.Resource, string, error) {
		res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return res.Resources, res.NextCursor, nil
	})
}

// Templates returns every resource template the server lists.
func Templates(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.ResourceTemplate, error) {
	return all(ctx, func(cursor string) ([]*mcp.ResourceTemplate, string, error) {
		res, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return res.ResourceTemplates, res.NextCursor, nil
	})
}

// all follows a listing's cursors from the first page to the last. Items
// are returned as the pages give them, nil ones included: what counts as
// malformed is the caller's to say.
func all[T any](ctx context.Context, page func(cursor string) ([]*T, string, error)) ([]*T, error) {
	var out []*T
	seen := map[string]bool{}
	cursor := ""
	for n := 0; ; n++ {
		if n == MaxPages {
			return nil, fmt.Errorf("more than %d pages", MaxPages)
		}
		items, next, err := page(cursor)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if len(out) > MaxItems {
			return nil, fmt.Errorf("more than %d items", MaxItems)
		}
		if next == "" {
			return out, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("the server returned cursor %q twice: its pagination does not end", next)
		}
		seen[next] = true
		cursor = next
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}
