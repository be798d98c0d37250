// Package testupstream is a small MCP server the gateway's tests and
// benchmarks put behind the gateway: in process over in-memory transports,
// or built into a binary (cmd/testupstream) and run as a real subprocess
// over stdio. It has tools, prompts, resources, resource templates and
// ui:// resources, and tools that misbehave on purpose (crash, hang, write
// malformed output) so the gateway's fault handling can be exercised.
package testupstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure a test upstream.
type Options struct {
	// Name is the server's name; it appears in tool output and in the
	// ui:// URIs of its apps.
	Name string
	// Exit, when set, is called by the "crash" tool (a subprocess exits).
	Exit func(code int)
	// Stdout, when set, is where the "garbage" tool writes bytes that are
	// not JSON-RPC: the stream the server's own messages go to.
	Stdout io.Writer
}

// Upstream is a running test server and what it observed.
type Upstream struct {
	Server *mcp.Server
	// Cancelled counts calls of the "wait" tool that ended because their
	// context was cancelled (the gateway forwarded the cancellation).
	Cancelled atomic.Int64
	// Calls counts every tool call that reached this server.
	Calls atomic.Int64

	mu   sync.Mutex
	seen []json.RawMessage
	// waiting is closed and replaced whenever a "wait" call starts.
	waiting chan struct{}
}

// Arguments returns the raw arguments of every "echo" call, in order.
func (u *Upstream) Arguments() []json.RawMessage {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]json.RawMessage(nil), u.seen...)
}

// Waiting returns a channel closed when the next "wait" call has started.
func (u *Upstream) Waiting() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.waiting
}

// Tool names every test upstream has.
var ToolNames = []string{
	"echo", "create_issue", "delete_repo", "merge_pull_request", "slow", "wait",
	"crash", "hang", "garbage", "pid", "show_app", "show_secret_app",
}

// New builds a test upstream.
func New(opts Options) *Upstream {
	u := &Upstream{waiting: make(chan struct{})}
	s := mcp.NewServer(&mcp.Implementation{Name: "testupstream-" + opts.Name, Version: "1.0.0"}, nil)
	u.Server = s
	object := map[string]any{"type": "object"}
	text := func(format string, args ...any) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
	}
	add := func(t *mcp.Tool, h mcp.ToolHandler) {
		if t.InputSchema == nil {
			t.InputSchema = object
		}
		s.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.Calls.Add(1)
			return h(ctx, req)
		})
	}
	add(&mcp.Tool{Name: "echo", Description: "Echo the arguments"}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		raw := append(json.RawMessage(nil), req.Params.Arguments...)
		u.mu.Lock()
		u.seen = append(u.seen, raw)
		u.mu.Unlock()
		res := text("%s echo %s", opts.Name, raw)
		// An upstream that puts its own identity in results, as the SDK
		// does for the 2026 protocol; the gateway must strip it.
		res.Meta = mcp.Meta{mcp.MetaKeyServerInfo: map[string]any{"name": "testupstream-" + opts.Name, "version": "1.0.0"}, "test/keep": "kept"}
		return res, nil
	})
	for _, name := range []string{"create_issue", "delete_repo", "merge_pull_request"} {
		add(&mcp.Tool{Name: name}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("%s %s done", opts.Name, name), nil
		})
	}
	add(&mcp.Tool{Name: "slow", Description: "Report progress three times"}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tok := req.Params.GetProgressToken()
		for i := 1; i <= 3; i++ {
			if tok != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)}); err != nil {
					return nil, err
				}
			}
		}
		return text("%s slow done", opts.Name), nil
	})
	add(&mcp.Tool{Name: "wait", Description: "Wait until cancelled (at most a minute)"}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		u.mu.Lock()
		close(u.waiting)
		u.waiting = make(chan struct{})
		u.mu.Unlock()
		select {
		case <-ctx.Done():
			u.Cancelled.Add(1)
			return nil, ctx.Err()
		case <-time.After(time.Minute):
			return text("waited"), nil
		}
	})
	add(&mcp.Tool{Name: "crash", Description: "Exit the process"}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if opts.Exit == nil {
			return text("crash is only available in a subprocess"), nil
		}
		opts.Exit(3)
		return nil, nil
	})
	add(&mcp.Tool{Name: "hang", Description: "Never answer, ignoring cancellation"}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {} // a hung server does not honour cancellation either
	})
	add(&mcp.Tool{Name: "garbage", Description: "Write bytes that are not JSON-RPC to the output stream"}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if opts.Stdout == nil {
			return text("garbage is only available in a subprocess"), nil
		}
		fmt.Fprintf(opts.Stdout, "this is not JSON-RPC {{{\n")
		return text("garbage written"), nil
	})
	add(&mcp.Tool{Name: "pid", Description: "The process id"}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("%d", os.Getpid()), nil
	})
	add(&mcp.Tool{Name: "show_app", Meta: mcp.Meta{"ui": map[string]any{"resourceUri": "ui://" + opts.Name + "/app.html", "visibility": []any{"model"}}}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("app"), nil
		})
	add(&mcp.Tool{Name: "show_secret_app", Meta: mcp.Meta{"ui/resourceUri": "ui://" + opts.Name + "/secret.html"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("secret app"), nil
		})

	for _, name := range []string{"summarize", "secret_prompt"} {
		s.AddPrompt(&mcp.Prompt{Name: name, Arguments: []*mcp.PromptArgument{{Name: "topic"}}}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{
				Meta:     mcp.Meta{mcp.MetaKeyServerInfo: map[string]any{"name": "testupstream-" + opts.Name}},
				Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: fmt.Sprintf("%s %s about %s", opts.Name, name, req.Params.Arguments["topic"])}}},
			}, nil
		})
	}
	read := func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{
			Meta:      mcp.Meta{mcp.MetaKeyServerInfo: map[string]any{"name": "testupstream-" + opts.Name}},
			Cacheable: mcp.Cacheable{TTLMs: 60000, CacheScope: "public"},
			Contents:  []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: opts.Name + " content of " + req.Params.URI}},
		}, nil
	}
	for _, uri := range []string{
		"file:///srv/projects/app/README.md",
		"file:///srv/projects/app/.env",
		"ui://" + opts.Name + "/app.html",
		"ui://" + opts.Name + "/secret.html",
	} {
		s.AddResource(&mcp.Resource{URI: uri, Name: uri}, read)
	}
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "repo://acme/{name}", Name: "acme repositories"}, read)
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "internal://{id}", Name: "internal records"}, read)
	return u
}

// AddTool adds a tool that answers with its own name, so tests can change
// the upstream's list at run time.
func (u *Upstream) AddTool(name string) {
	u.Server.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil
	})
}
