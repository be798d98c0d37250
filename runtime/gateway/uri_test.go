package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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

// controlURIs are resource URIs with every control character and DEL,
// and with runes beyond U+FFFF that Go's %q would not print, each in a
// denied spelling and an absent one.
func controlURIs() []string {
	var uris []string
	add := func(r rune) {
		uris = append(uris, "file:///srv/projects/a"+string(r)+"/.env", "repo://nowhere/"+string(r))
	}
	for r := rune(0); r < 0x20; r++ {
		add(r)
	}
	add(0x7f)
	for _, r := range []rune{0x1d173, 0xe0001, 0xe007f, 0xf0000, 0x10fffd, 0x10ffff} {
		add(r)
	}
	return uris
}

// checkNotFound checks that answer, the JSON of a response to id, is the
// resource-not-found error for uri, its data readable JSON naming uri.
func checkNotFound(t *testing.T, answer []byte, id int, uri string) {
	t.Helper()
	var resp struct {
		ID    int
		Error *struct {
			Code    int64
			Message string
			Data    struct{ URI string }
		}
	}
	if err := json.Unmarshal(answer, &resp); err != nil {
		t.Errorf("%q: the answer is not JSON (%v): %q", uri, err, answer)
		return
	}
	if resp.ID != id || resp.Error == nil || resp.Error.Code != jsonrpc.CodeInvalidParams || resp.Error.Data.URI != uri {
		t.Errorf("%q: answered %s; want the not-found error naming it", uri, answer)
	}
}

// TestControlCharactersInResourceURIs: a resource URI with a control
// character, DEL or a non-printable rune is answered as absent, in JSON,
// over both fronts, and the session goes on (the SDK's
// ResourceNotFoundError would have written an answer that is not JSON).
func TestControlCharactersInResourceURIs(t *testing.T) {
	tg := startGateway(t, nil)
	uris := controlURIs()
	params := func(uri string) string {
		b, _ := json.Marshal(map[string]string{"uri": uri})
		return string(b)
	}
	t.Run("stdio", func(t *testing.T) {
		for _, version := range []string{legacyVersion, newVersion} {
			c := rawSession(t, tg.Gateway, "alice", version)
			for i, uri := range uris {
				checkNotFound(t, c.call(i+1, "resources/read", params(uri)), i+1, uri)
			}
			if out := c.call(1000, "tools/list", "{}"); !bytes.Contains(out, []byte("github__echo")) {
				t.Errorf("%s: after the reads, tools/list answered %.300s", version, out)
			}
		}
	})
	t.Run("http", func(t *testing.T) {
		srv := aliceFront(t, tg)
		do := rawHTTP(t, srv.URL)
		session := rawHTTPSession(t, do, legacyVersion)
		for i, uri := range uris {
			resp, out := do(http.MethodPost, "alice-token", session, legacyVersion, `{"jsonrpc":"2.0","id":`+strconvItoa(i+1)+`,"method":"resources/read","params":`+params(uri)+`}`)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%q: %s %s", uri, resp.Status, out)
			}
			checkNotFound(t, []byte(sseData(out)), i+1, uri)
		}
		if resp, out := do(http.MethodPost, "alice-token", session, legacyVersion, `{"jsonrpc":"2.0","id":1000,"method":"tools/list"}`); resp.StatusCode != http.StatusOK || !strings.Contains(out, "github__echo") {
			t.Errorf("after the reads, tools/list answered %s %.300s", resp.Status, out)
		}
		// At 2026-07-28 the URI travels in the Mcp-Name header too, which
		// cannot hold a control character or DEL (HTTP refuses them): only
		// the runes beyond U+FFFF are sent.
		for i, uri := range uris {
			if strings.ContainsFunc(uri, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				continue
			}
			_, out := sessionlessPost(t, srv.URL, "alice-token", i+1, "resources/read", uri, params(uri))
			checkNotFound(t, []byte(sseData(out)), i+1, uri)
		}
	})
}
