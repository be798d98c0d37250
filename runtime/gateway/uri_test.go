package gateway

import (
	"context"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// TestResourceSpellings reads, through the gateway, spellings of a denied
// resource that an upstream serving a URI template would resolve to it:
// each is answered as absent, and the upstream never sees it.
func TestResourceSpellings(t *testing.T) {
	var mu sync.Mutex
	var reached []string
	fs := mcp.NewServer(&mcp.Implementation{Name: "fs", Version: "1"}, nil)
	fs.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "file:///srv/{+path}", Name: "files"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			mu.Lock()
			reached = append(reached, req.Params.URI)
			mu.Unlock()
			// As lenient as a file server gets: it decodes before it
			// splits, and reads no query or fragment.
			p, err := url.PathUnescape(strings.TrimPrefix(req.Params.URI, "file://"))
			if err != nil {
				return nil, err
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "contents of " + path.Clean(strings.ReplaceAll(p, `\`, "/"))}}}, nil
		})
	dial := func(ctx context.Context) (mcp.Transport, error) {
		st, ct := mcp.NewInMemoryTransports()
		if _, err := fs.Connect(ctx, st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}
	tg := startGateway(t, func(c *Config) { c.Upstreams = []Upstream{{Name: "github", Dial: dial}} })
	cs := tg.client(t, "alice", legacyVersion, nil)
	read := func(uri string) (string, error) {
		res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			return "", err
		}
		return res.Contents[0].Text, nil
	}
	if got, err := read("file:///srv/projects/app/main.go"); err != nil || got != "contents of /srv/projects/app/main.go" {
		t.Fatalf("an allowed file: %q, %v", got, err)
	}
	_, absentErr := read("file:///srv/nowhere/.env")
	for _, uri := range []string{
		"file:///srv/projects/app/%2Eenv",
		"file:///srv/projects/app/.env/.",
		"file:///srv/projects/app/.env/",
		"file:///srv/projects/app%2F.env",
		"file:///srv/projects/app/sub/../.env",
		"file:///srv/projects/%2E%2E/secrets/key",
		"file:///srv/projects/app/.env?x",
		"file:///srv/projects/app/.env#x",
		"file:///srv/projects/app/.env/x%23/..",
		"file:///srv/projects/x%3F/../../secrets/key",
		"file://localhost/srv/projects/app/.env",
		"file:///srv/projects/x?/../../secrets/key",
		"file:///srv/projects/x#/../../secrets/key",
		"file:///srv/projects/app/x?/../.en%76",
		"file:///srv/projects/app/x?/../.env/",
		"file:///srv/projects/app/q/..?/../.env/.",
		"file:///srv/projects/app/..%252Fy/../.en%76",
	} {
		got, err := read(uri)
		if err == nil {
			t.Errorf("%s: read %q", uri, got)
			continue
		}
		if want := strings.Replace(absentErr.Error(), "file:///srv/nowhere/.env", uri, 1); err.Error() != want {
			t.Errorf("%s: %v; an absent resource: %v", uri, err, absentErr)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reached) != 1 {
		t.Errorf("the upstream was asked for %q; want only the allowed file", reached)
	}
	var logged bool
	for _, r := range tg.log.all() {
		if r.Name == "file:///srv/projects/app/%2Eenv" && r.Op == OpRead {
			logged = r.Decision.Effect == table.Deny && r.Decision.Reason == decide.URINotNormal && r.Decision.Origin != ""
		}
	}
	if !logged {
		t.Error("the read of file:///srv/projects/app/%2Eenv is not logged as a deny for uri not in normal form, with the deny rule's origin")
	}
}
