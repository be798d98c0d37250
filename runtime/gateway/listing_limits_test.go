package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
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
	// The byte limit is lowered to 8 MiB for this test, so that it does
	// not send 64 MiB through the race detector on every attempt.
	defer func(n int) { mcplist.MaxBytes = n }(mcplist.MaxBytes)
	mcplist.MaxBytes = 8 << 20
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
	want := "list: tools/list: more than 8 MiB of JSON in 8 pages, the most one listing may have: the server's pagination does not end"
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

// rawUpstream is an upstream that speaks JSON-RPC by hand over an
// in-memory pipe, so that it can send notifications as fast as it likes
// (the SDK's server coalesces its own). Its tools/list lists tools; it
// counts the tools/list requests it answers.
type rawUpstream struct {
	mu     sync.Mutex
	tools  []string
	lists  int
	conn   net.Conn
	writeM sync.Mutex
}

func (r *rawUpstream) dial(ctx context.Context) (mcp.Transport, error) {
	a, b := net.Pipe()
	r.mu.Lock()
	r.conn = a
	r.mu.Unlock()
	go r.serve(a)
	return &mcp.IOTransport{Reader: b, Writer: b}, nil
}

func (r *rawUpstream) write(c net.Conn, line string) error {
	r.writeM.Lock()
	defer r.writeM.Unlock()
	_, err := io.WriteString(c, line+"\n")
	return err
}

func (r *rawUpstream) serve(c net.Conn) {
	in := bufio.NewScanner(c)
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || len(req.ID) == 0 {
			continue
		}
		result := `{}`
		switch req.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"raw","version":"1"}}`
		case "tools/list":
			r.mu.Lock()
			r.lists++
			var tools []map[string]any
			for _, n := range r.tools {
				tools = append(tools, map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
			}
			r.mu.Unlock()
			b, _ := json.Marshal(map[string]any{"tools": tools})
			result = string(b)
		}
		go r.write(c, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result))
	}
}

// notify sends a notification on the current connection.
func (r *rawUpstream) notify(method string) error {
	r.mu.Lock()
	c := r.conn
	r.mu.Unlock()
	return r.write(c, fmt.Sprintf(`{"jsonrpc":"2.0","method":%q}`, method))
}

func (r *rawUpstream) listed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lists
}

// A storm of tools/list_changed notifications is coalesced: the upstream is
// re-listed about once a relistInterval, not once per notification, and the
// last change is still seen. (Before, 5000 notifications sent at about
// 16,000 a second were answered with 199 re-listings, and at about 700 a
// second with 4985.)
func TestListChangedStormIsCoalesced(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		raw := &rawUpstream{tools: []string{"echo"}}
		tg := startGateway(t, func(c *Config) { c.Upstreams[0] = Upstream{Name: "github", Dial: raw.dial} })
		cs := tg.client(t, "alice", legacyVersion, nil)
		before := raw.listed()
		const storm = 2000
		start := time.Now()
		for i := 0; i < storm; i++ {
			if err := raw.notify("notifications/tools/list_changed"); err != nil {
				t.Fatal(err)
			}
		}
		// The last change, announced last.
		raw.mu.Lock()
		raw.tools = append(raw.tools, "list_final")
		raw.mu.Unlock()
		if err := raw.notify("notifications/tools/list_changed"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the last change to be listed", func() bool {
			return slices.Contains(toolNames(t, cs), "github__list_final")
		})
		elapsed := time.Since(start)
		// One re-listing at once, then at most one at the end of each interval
		// (and one for a notification that arrived as one ended).
		bound := 2 + int(elapsed/relistInterval) + 1
		if n := raw.listed() - before; n > bound {
			t.Errorf("%d notifications in %s were answered with %d re-listings, want at most %d", storm+1, elapsed, n, bound)
		} else {
			t.Logf("%d notifications in %s: %d re-listings", storm+1, elapsed, n)
		}
		// The gateway went on serving throughout.
		if msg, isErr := callText(t, cs, "linear__echo"); isErr {
			t.Errorf("linear__echo after the storm: %q", msg)
		}
	})
}
