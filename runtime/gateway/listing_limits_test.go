package gateway

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/internal/mcplist"
	"github.com/policyc/policyc/runtime/gateway/internal/testupstream"
)

// pageCounter counts the tools/list pages each connection to an upstream
// asked for.
type pageCounter struct {
	mu    sync.Mutex
	pages map[*mcp.ServerSession]int
}

func (c *pageCounter) add(ss *mcp.ServerSession) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pages[ss]++
	return c.pages[ss]
}

func (c *pageCounter) most() (most, sessions int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.pages {
		most = max(most, n)
	}
	return most, len(c.pages)
}

// An upstream whose tools/list never ends (every page a new cursor of
// 1 MiB) is stopped at the listing's size limit on every connection
// attempt, reported as unavailable with why, and the other upstream goes
// on serving. Before the limit a connection asked for up to 1000 such
// pages and kept every cursor (1 GiB), until the connect timeout.
func TestEndlessUpstreamListingStops(t *testing.T) {
	pad := strings.Repeat("c", 1<<20)
	counter := &pageCounter{pages: map[*mcp.ServerSession]int{}}
	bad := testupstream.New(testupstream.Options{Name: "github"})
	bad.Server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, m string, req mcp.Request) (mcp.Result, error) {
			if m != "tools/list" {
				return next(ctx, m, req)
			}
			n := counter.add(req.GetSession().(*mcp.ServerSession))
			return &mcp.ListToolsResult{NextCursor: fmt.Sprint(n) + pad}, nil
		}
	})
	linear := newMemUpstream("linear")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := New(ctx, Config{
		Upstreams: []Upstream{
			{Name: "github", Dial: func(ctx context.Context) (mcp.Transport, error) {
				st, ct := mcp.NewInMemoryTransports()
				if _, err := bad.Server.Connect(ctx, st, nil); err != nil {
					return nil, err
				}
				return ct, nil
			}},
			{Name: "linear", Dial: linear.dial},
		},
		Tables:         fixed(loadTable(t, testPolicy, 1)),
		Log:            &memLog{},
		ConnectTimeout: time.Minute,
		MinBackoff:     20 * time.Millisecond,
		MaxBackoff:     200 * time.Millisecond,
		Logger:         debugLogger,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var why error
	eventually(t, time.Minute, "github's listing to fail", func() bool {
		var up bool
		up, why = g.Upstream("github")
		return !up && why != nil && strings.Contains(why.Error(), "tools/list")
	})
	want := "list: tools/list: more than 64 MiB of JSON in 64 pages, the most one listing may have: the server's pagination does not end"
	if !strings.Contains(why.Error(), want) {
		t.Errorf("github is down because %q, want %q", why, want)
	}
	if most, sessions := counter.most(); most > mcplist.MaxBytes>>20+1 {
		t.Errorf("a connection asked for %d pages (of %d connections), want at most %d", most, sessions, mcplist.MaxBytes>>20+1)
	}
	eventually(t, 30*time.Second, "linear to be connected", func() bool { up, _ := g.Upstream("linear"); return up })
	st, ct := mcp.NewInMemoryTransports()
	if _, err := g.Connect(ctx, "alice", st); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if msg, isErr := callText(t, cs, "linear__echo"); isErr {
		t.Errorf("linear__echo while github's listing fails: %q", msg)
	}
}
