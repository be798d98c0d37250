package gateway

import (
	"context"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/runtime"
)

func TestNormalURI(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"file:///srv/projects/app/main.go", "file:///srv/projects/app/main.go"},
		{"file:///srv/projects/app/%2Eenv", "file:///srv/projects/app/.env"},
		{"file:///srv/projects/app/%2eenv", "file:///srv/projects/app/.env"},
		{"file:///srv/projects/app/.%65nv", "file:///srv/projects/app/.env"},
		{"file:///srv/projects/app/%252Eenv", "file:///srv/projects/app/.env"}, // decoded twice
		{"file:///srv/projects/app/.env/.", "file:///srv/projects/app/.env"},
		{"file:///srv/projects/app/.env/", "file:///srv/projects/app/.env/"},
		{"file:///srv/projects/app/.env%2F", "file:///srv/projects/app/.env/"},
		{"file:///srv/projects/app/sub/../.env", "file:///srv/projects/app/.env"},
		{"file:///srv/projects/../../etc/shadow", "file:///etc/shadow"},
		{"file:///srv/projects/%2E%2E/secrets/key", "file:///srv/secrets/key"},
		{"file:///srv//projects///app", "file:///srv/projects/app"},
		{`file:///srv/projects/app\..\..\secrets`, "file:///srv/secrets"},
		{"file:///srv/projects/app%5C.env", "file:///srv/projects/app/.env"},
		{"FILE://LocalHost/Srv/App", "file://localhost/Srv/App"}, // the path keeps its case
		{"UI://github/app.html", "ui://github/app.html"},
		{"repo://acme/widgets?ref=../main#x/../y", "repo://acme/widgets?ref=../main#x/../y"}, // query and fragment as they are
		{"repo:acme/./widgets", "repo:acme/widgets"},
		{"file:///srv/projects/app%20dir/x", "file:///srv/projects/app dir/x"},
		{"file:///srv/100%", "file:///srv/100%"}, // not an escape
		{"file:///", "file:///"},
		{"", ""},
	} {
		got, ok := normalURI(c.in)
		if !ok || got != c.want {
			t.Errorf("normalURI(%q) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
	for _, in := range []string{"file:///srv/projects/app/.env%00.txt", "file:///srv/a\x00b", "file:///srv/%2500", "file:///srv/a%7Fb", "file:///srv/%252525252E"} {
		if got, ok := normalURI(in); ok {
			t.Errorf("normalURI(%q) = %q, accepted a control character or endless escapes", in, got)
		}
	}
}

// FuzzNormalURI: whatever the bytes, the normal form is a fixed point (an
// upstream reading it again reads the same) and holds no control
// character.
func FuzzNormalURI(f *testing.F) {
	for _, s := range []string{"file:///srv/projects/app/%2Eenv", "file:///a/../b/./c//", `x:\..\y`, "ui://x/%252e%252e/y", "repo:a?b#c", "%", "%%41"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		n, ok := normalURI(uri)
		if !ok {
			return
		}
		if hasControl(n) {
			t.Fatalf("normalURI(%q) = %q holds a control character", uri, n)
		}
		if again, ok := normalURI(n); !ok || again != n {
			t.Fatalf("normalURI(%q) = %q, but normalURI of that is %q, %v", uri, n, again, ok)
		}
	})
}

// TestURIDecide decides URIs against testPolicy, which allows
// file:///srv/projects/* and denies file:///srv/projects/*/.env.
func TestURIDecide(t *testing.T) {
	tb := loadTable(t, testPolicy, 1)
	now := time.Now()
	for _, c := range []struct {
		uri    string
		want   runtime.Effect
		reason runtime.Reason
	}{
		{"file:///srv/projects/app/main.go", runtime.Allow, runtime.ByRule},
		{"file:///srv/projects/app dir/x", runtime.Allow, runtime.ByRule},
		{"file:///srv/projects/app%20dir/x", runtime.Allow, runtime.ByRule},
		{"file:///srv/projects/", runtime.Allow, runtime.ByRule}, // the directory: no rule denies "file:///srv/projects"
		{"file:///srv/projects/app/.env", runtime.Deny, runtime.ByRule},
		{"file:///srv/projects/app/%2Eenv", runtime.Deny, runtime.URINotNormal},
		{"file:///srv/projects/app/.env/.", runtime.Deny, runtime.URINotNormal},
		{"file:///srv/projects/app/.env/", runtime.Deny, runtime.URINotNormal}, // a rule denies it without the slash
		{"file:///srv/projects/app/.env%2F", runtime.Deny, runtime.URINotNormal},
		{"file:///srv/projects/app%2F.env", runtime.Deny, runtime.URINotNormal},
		{"file:///srv/projects/app/sub/../.env", runtime.Deny, runtime.ByRule},          // "*" spans "sub/.."
		{"file:///srv/projects/%2E%2E/secrets/key", runtime.Deny, runtime.URINotNormal}, // out of the allowed tree
		{"file:///srv/projects/../../etc/shadow", runtime.Deny, runtime.URINotNormal},
		{`file:///srv/projects/app\.env`, runtime.Deny, runtime.URINotNormal},
		{"file:///srv/projects/app/.env%00.txt", runtime.Deny, runtime.URINotNormal},
		{"FILE:///srv/projects/app/main.go", runtime.Deny, runtime.ByDefault}, // as written, no rule allows it
	} {
		d := uriDecide(tb, now, "alice", "github", c.uri)
		if d.Effect != c.want || d.Reason != c.reason {
			t.Errorf("uriDecide(%q) = %v (%v), want %v (%v)", c.uri, d.Effect, d.Reason, c.want, c.reason)
		}
	}
}

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
			u, err := url.Parse(strings.ReplaceAll(req.Params.URI, `\`, "/"))
			if err != nil {
				return nil, err
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "contents of " + path.Clean(u.Path)}}}, nil
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
			logged = r.Decision.Effect == runtime.Deny && r.Decision.Reason == runtime.URINotNormal && r.Decision.Origin != ""
		}
	}
	if !logged {
		t.Error("the read of file:///srv/projects/app/%2Eenv is not logged as a deny for uri not in normal form, with the deny rule's origin")
	}
}
