// Package mcplist reads an MCP server's whole listings, page by page, with
// limits: a server that keeps returning cursors or items cannot keep a
// reader busy or fill its memory. The gateway and catalog pull both list
// upstreams through it.
package mcplist

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/internal/clip"
)

// Limits on one listing (all the pages of one list method).
const (
	MaxPages = 1000
	MaxItems = 100000
)

// MaxBytes bounds the JSON of a listing's pages, items and cursors
// together, as the pages' results encode. A transport bounds one message
// (the SDK's stdio and SSE readers at 16 MiB); without this, MaxPages such
// messages could be kept. A variable so that tests can reach it without
// sending 64 MiB through the race detector.
var MaxBytes = 64 << 20

// Tools returns every tool the server lists.
func Tools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	return all(ctx, func(cursor string) ([]*mcp.Tool, string, int, error) {
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, "", 0, err
		}
		return res.Tools, res.NextCursor, size(res), nil
	})
}

// Prompts returns every prompt the server lists.
func Prompts(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Prompt, error) {
	return all(ctx, func(cursor string) ([]*mcp.Prompt, string, int, error) {
		res, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
		if err != nil {
			return nil, "", 0, err
		}
		return res.Prompts, res.NextCursor, size(res), nil
	})
}

// Resources returns every resource the server lists.
func Resources(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Resource, error) {
	return all(ctx, func(cursor string) ([]*mcp.Resource, string, int, error) {
		res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			return nil, "", 0, err
		}
		return res.Resources, res.NextCursor, size(res), nil
	})
}

// Templates returns every resource template the server lists.
func Templates(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.ResourceTemplate, error) {
	return all(ctx, func(cursor string) ([]*mcp.ResourceTemplate, string, int, error) {
		res, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
		if err != nil {
			return nil, "", 0, err
		}
		return res.ResourceTemplates, res.NextCursor, size(res), nil
	})
}

// size is the length of a page's result as JSON: about what it took on
// the wire, and what keeping it costs.
func size(res any) int {
	b, err := json.Marshal(res)
	if err != nil {
		return 0 // decoded from JSON, so it encodes; the item limit still holds
	}
	return len(b)
}

// all follows a listing's cursors from the first page to the last. page
// returns a page's items, its next cursor and its size in bytes. Items
// are returned as the pages give them, nil ones included: what counts as
// malformed is the caller's to say.
func all[T any](ctx context.Context, page func(cursor string) ([]*T, string, int, error)) ([]*T, error) {
	var out []*T
	seen := map[string]bool{}
	cursor := ""
	total := 0
	for n := 0; ; n++ {
		if n == MaxPages {
			return nil, fmt.Errorf("more than %d pages, the most one listing may have: the server's pagination does not end, or it offers too much to list", MaxPages)
		}
		items, next, bytes, err := page(cursor)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if len(out) > MaxItems {
			return nil, fmt.Errorf("more than %d items in %s, the most one listing may have: the server offers too much to list", MaxItems, pages(n+1))
		}
		total += bytes
		if total > MaxBytes {
			return nil, fmt.Errorf("more than %d MiB of JSON in %s, the most one listing may have: the server's pagination does not end, or it offers too much to list", MaxBytes>>20, pages(n+1))
		}
		if next == "" {
			return out, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("the server returned cursor %s twice (after %s): its pagination does not end", clip.Quote(next), pages(n+1))
		}
		seen[next] = true
		cursor = next
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

func pages(n int) string {
	if n == 1 {
		return "1 page"
	}
	return fmt.Sprintf("%d pages", n)
}
