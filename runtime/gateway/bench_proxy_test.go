package gateway

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bareProxy is the anchor the gateway's hop is measured against: what a
// user could run instead with no policy at all, on the same SDK. One server
// whose receiving middleware forwards every request about an upstream's
// items to one client session per upstream; the SDK answers the rest
// (initialize, ping, server/discover, subscriptions/listen). Tools and
// prompts are named upstream__name, as through the gateway, so that a call
// reaches the same tool with the same arguments; resources keep their URIs
// and are read from each upstream in turn. It decides nothing, logs
// nothing, keeps no catalogue and forwards no notifications.
type bareProxy struct {
	server *mcp.Server
	names  []string // of the upstreams, sorted
	up     map[string]*mcp.ClientSession
}

// newBareProxy connects to each upstream as the gateway does (protocol
// upstreamProtocol) and returns the proxy serving them.
func newBareProxy(ctx context.Context, upstreams map[string]mcp.Transport) (*bareProxy, error) {
	p := &bareProxy{up: map[string]*mcp.ClientSession{}}
	client := mcp.NewClient(&mcp.Implementation{Name: "bare-proxy", Version: "1"}, nil)
	for name, t := range upstreams {
		cs, err := client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: upstreamProtocol})
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("upstream %s: %w", name, err)
		}
		p.up[name] = cs
		p.names = append(p.names, name)
	}
	slices.Sort(p.names)
	p.server = mcp.NewServer(&mcp.Implementation{Name: "bare-proxy", Version: "1"}, &mcp.ServerOptions{
		// Changes are announced as by the gateway, so that a 2026-07-28
		// client opens the same subscriptions/listen stream; none is ever
		// sent.
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Prompts:   &mcp.PromptCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true},
		},
	})
	p.server.AddReceivingMiddleware(p.forward)
	return p, nil
}

// Close ends the proxy's upstream sessions.
func (p *bareProxy) Close() {
	for _, cs := range p.up {
		cs.Close()
	}
}

func (p *bareProxy) forward(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch r := req.(type) {
		case *mcp.CallToolRequest:
			cs, name, err := p.route(r.Params.Name)
			if err != nil {
				return nil, err
			}
			return cs.CallTool(ctx, &mcp.CallToolParams{Meta: hopMeta(r.Params.Meta), Name: name, Arguments: r.Params.Arguments})
		case *mcp.GetPromptRequest:
			cs, name, err := p.route(r.Params.Name)
			if err != nil {
				return nil, err
			}
			return cs.GetPrompt(ctx, &mcp.GetPromptParams{Meta: hopMeta(r.Params.Meta), Name: name, Arguments: r.Params.Arguments})
		case *mcp.ReadResourceRequest:
			var err error
			for _, n := range p.names {
				var res *mcp.ReadResourceResult
				if res, err = p.up[n].ReadResource(ctx, &mcp.ReadResourceParams{Meta: hopMeta(r.Params.Meta), URI: r.Params.URI}); err == nil {
					return res, nil
				}
			}
			return nil, err
		case *mcp.ListToolsRequest:
			tools, err := gather(p, func(cs *mcp.ClientSession) iter.Seq2[*mcp.Tool, error] { return cs.Tools(ctx, nil) },
				func(n string, t mcp.Tool) *mcp.Tool { t.Name = n + "__" + t.Name; return &t })
			return &mcp.ListToolsResult{Tools: tools}, err
		case *mcp.ListPromptsRequest:
			prompts, err := gather(p, func(cs *mcp.ClientSession) iter.Seq2[*mcp.Prompt, error] { return cs.Prompts(ctx, nil) },
				func(n string, x mcp.Prompt) *mcp.Prompt { x.Name = n + "__" + x.Name; return &x })
			return &mcp.ListPromptsResult{Prompts: prompts}, err
		case *mcp.ListResourcesRequest:
			res, err := gather(p, func(cs *mcp.ClientSession) iter.Seq2[*mcp.Resource, error] { return cs.Resources(ctx, nil) },
				func(_ string, x mcp.Resource) *mcp.Resource { return &x })
			return &mcp.ListResourcesResult{Resources: res}, err
		}
		return next(ctx, method, req)
	}
}

// route is the upstream session and the upstream's own name of an item
// named upstream__name.
func (p *bareProxy) route(name string) (*mcp.ClientSession, string, error) {
	server, item, _ := strings.Cut(name, "__")
	if cs := p.up[server]; cs != nil {
		return cs, item, nil
	}
	return nil, "", fmt.Errorf("no upstream %q", server)
}

// gather lists every upstream's items, each renamed by rename.
func gather[T any](p *bareProxy, list func(*mcp.ClientSession) iter.Seq2[*T, error], rename func(string, T) *T) ([]*T, error) {
	out := []*T{}
	for _, n := range p.names {
		for x, err := range list(p.up[n]) {
			if err != nil {
				return nil, err
			}
			out = append(out, rename(n, *x))
		}
	}
	return out, nil
}

// hopMeta is a request's _meta without the keys that belong to one hop
// (the 2026-07-28 protocol version, client identity and capabilities),
// which would misstate the proxy's own session to the upstream.
func hopMeta(m mcp.Meta) mcp.Meta {
	var out mcp.Meta
	for k, v := range m {
		if !strings.HasPrefix(k, reservedMeta) {
			if out == nil {
				out = mcp.Meta{}
			}
			out[k] = v
		}
	}
	return out
}

// httpHandler serves the proxy over streamable HTTP as the SDK does for
// every version: sessions before 2026-07-28, the stateless handler for a
// request that says 2026-07-28 or later in its MCP-Protocol-Version header.
func (p *bareProxy) httpHandler() http.Handler {
	server := func(*http.Request) *mcp.Server { return p.server }
	sessions := mcp.NewStreamableHTTPHandler(server, nil)
	sessionless := mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{Stateless: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Protocol-Version") >= firstSessionless {
			sessionless.ServeHTTP(w, r)
			return
		}
		sessions.ServeHTTP(w, r)
	})
}
