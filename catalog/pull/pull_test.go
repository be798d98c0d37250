package pull

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/catalog/pull/internal/fixture"
	"github.com/policyc/policyc/internal/mcplist"
	"github.com/policyc/policyc/internal/procexit"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json")

// testserver is the fixture server built as a program (TestMain).
var testserver string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "pull-testserver-")
	if err != nil {
		panic(err)
	}
	testserver = filepath.Join(dir, "testserver")
	if out, err := exec.Command("go", "build", "-o", testserver, "./internal/testserver").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build testserver: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func inMemory(name string, o fixture.Options) Upstream {
	return Upstream{Name: name, Dial: fixture.Dial(o)}
}

func encode(t *testing.T, s *catalog.Snapshot) []byte {
	t.Helper()
	b, err := catalog.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("snapshot differs from %s:\n%s", path, got)
	}
}

func pullOne(t *testing.T, up Upstream, timeout time.Duration) Result {
	t.Helper()
	return One(context.Background(), up, Options{Timeout: timeout, Version: "test"})
}

// An in-process server over the SDK's in-memory transports: tools with and
// without annotations, prompts, resources, a template; page size 1 makes
// the client follow a cursor for every item.
func TestPullInMemory(t *testing.T) {
	r := pullOne(t, inMemory("github", fixture.Options{Variant: fixture.Base, PageSize: 1}), 10*time.Second)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := r.Snapshot.Counts(); got != "4 tools, 2 prompts, 2 resources, 1 template" {
		t.Errorf("counts: %s", got)
	}
	golden(t, "github.golden.json", encode(t, r.Snapshot))
	c := &catalog.Catalog{Servers: map[string]*catalog.Snapshot{"github": r.Snapshot}}
	if get := c.Tool("github", "get_issue"); get == nil || !get.ReadOnly() || get.MayDestroy() {
		t.Errorf("get_issue: %+v", get)
	}
	if del := c.Tool("github", "delete_repo"); del == nil || del.Annotations != nil || !del.MayDestroy() {
		t.Errorf("delete_repo: %+v", del)
	}
	if ci := c.Tool("github", "create_issue"); ci == nil || ci.MayDestroy() || ci.ReadOnly() {
		t.Errorf("create_issue: %+v", ci)
	}
}

// Determinism: two pulls, with different page sizes (so the server lists
// in different chunks), give byte-identical snapshots.
func TestPullTwiceIsByteIdentical(t *testing.T) {
	a := pullOne(t, inMemory("github", fixture.Options{PageSize: 1}), 10*time.Second)
	b := pullOne(t, inMemory("github", fixture.Options{PageSize: 3}), 10*time.Second)
	if a.Err != nil || b.Err != nil {
		t.Fatal(a.Err, b.Err)
	}
	if !bytes.Equal(encode(t, a.Snapshot), encode(t, b.Snapshot)) {
		t.Errorf("two pulls of the same server differ")
	}
}

// A real subprocess over stdio gives the same snapshot as the in-process
// server.
func TestPullSubprocess(t *testing.T) {
	r := pullOne(t, Command("github", testserver, []string{"-page", "2"}, nil, ""), 20*time.Second)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	golden(t, "github.golden.json", encode(t, r.Snapshot))
}

func TestPullDrift(t *testing.T) {
	base := pullOne(t, inMemory("github", fixture.Options{}), 10*time.Second)
	changed := pullOne(t, Command("github", testserver, []string{"-variant", "changed"}, nil, ""), 20*time.Second)
	if base.Err != nil || changed.Err != nil {
		t.Fatal(base.Err, changed.Err)
	}
	var got []string
	for _, c := range catalog.Diff(base.Snapshot, changed.Snapshot) {
		got = append(got, c.String())
	}
	want := []string{
		"tool close_issue: added",
		"tool get_issue: input schema changed; readOnlyHint true -> false",
		"tool search: removed",
		"prompt summarize: arguments changed",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("drift:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPullFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		up      Upstream
		timeout time.Duration
		want    []string
	}{
		{"no such program", Command("s", filepath.Join(t.TempDir(), "missing"), nil, nil, ""), 5 * time.Second,
			[]string{"starting it", "no such file"}},
		{"exits at once", Command("s", testserver, []string{"-mode", "exit"}, nil, ""), 5 * time.Second,
			[]string{"initializing: the server exited (exit status 3) before it answered", `its stderr: "testserver: missing API token"`}},
		// Killed by a signal: not an exit of its own, so the SDK's words
		// stand.
		{"killed", Command("s", testserver, []string{"-mode", "killed"}, nil, ""), 5 * time.Second,
			[]string{"initializing: ", `its stderr: "testserver: killing itself"`}},
		{"hangs", Command("s", testserver, []string{"-mode", "hang"}, nil, ""), time.Second,
			[]string{"timed out after 1s while initializing"}},
		{"writes garbage", Command("s", testserver, []string{"-mode", "garbage"}, nil, ""), 10 * time.Second,
			[]string{`its stderr: "testserver: wrote garbage"`}},
		// It exits too, but what it wrote is what went wrong.
		{"writes garbage and exits", Command("s", testserver, []string{"-mode", "garbage-exit"}, nil, ""), 10 * time.Second,
			[]string{"initializing: ", "not MCP's JSON-RPC"}},
		// It answered, then exited cleanly when the client hung up: its
		// answer is what went wrong.
		{"initialize fails", Command("s", testserver, []string{"-mode", "init-error"}, nil, ""), 10 * time.Second,
			[]string{`initializing: calling "initialize": no API token configured`}},
		{"bad name", inMemory("-x", fixture.Options{}), time.Second, []string{`"-x" is not a server name`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := pullOne(t, tc.up, tc.timeout)
			if r.Err == nil || r.Snapshot != nil {
				t.Fatalf("want a failure, got snapshot %v err %v", r.Snapshot, r.Err)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Err.Error(), w) {
					t.Errorf("error %q does not say %q", r.Err, w)
				}
			}
			if tc.name != "exits at once" && strings.Contains(r.Err.Error(), "exited") {
				t.Errorf("error %q says the server exited on its own", r.Err)
			}
			if r.Duration > tc.timeout+5*time.Second {
				t.Errorf("a failure took %s", r.Duration)
			}
		})
	}
}

// A pull cancelled from outside (policyc itself stopped) is not blamed on
// the server, though the server then exits cleanly at the end of its input.
func TestPullCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	r := One(ctx, Command("s", testserver, []string{"-mode", "mute"}, nil, ""), Options{Timeout: 10 * time.Second})
	if r.Err == nil {
		t.Fatal("a cancelled pull succeeded")
	}
	if msg := r.Err.Error(); !strings.HasPrefix(msg, "interrupted while initializing") || strings.Contains(msg, "exited") || strings.Contains(msg, "context canceled") {
		t.Errorf("cancelled pull: %q", msg)
	}
}

// malformed is a server whose listings are replaced by result.
func malformed(method string, result mcp.Result) Upstream {
	return Upstream{Name: "bad", Dial: func(ctx context.Context) (mcp.Transport, error) {
		st, ct := mcp.NewInMemoryTransports()
		srv := fixture.Server(fixture.Options{})
		srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, m string, req mcp.Request) (mcp.Result, error) {
				if m == method {
					return result, nil
				}
				return next(ctx, m, req)
			}
		})
		if _, err := srv.Connect(context.Background(), st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}}
}

func TestPullMalformedListings(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object"}`)
	for _, tc := range []struct {
		name, method string
		result       mcp.Result
		want         string
	}{
		{"duplicate tool", "tools/list", &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: "a", InputSchema: schema}, {Name: "a", InputSchema: schema}}},
			`tools: "a" is listed twice`},
		{"nameless tool", "tools/list", &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: "", InputSchema: schema}}},
			"a tool without a name"},
		{"schema not an object", "tools/list", &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: "a", InputSchema: json.RawMessage(`"string"`)}}},
			`tool "a": inputSchema is not a JSON object`},
		{"endless cursor", "prompts/list", &mcp.ListPromptsResult{NextCursor: "again"},
			`prompts/list: the server returned cursor "again" twice`},
		{"resource without uri", "resources/list", &mcp.ListResourcesResult{Resources: []*mcp.Resource{{Name: "r"}}},
			"a resource without a URI"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := pullOne(t, malformed(tc.method, tc.result), 5*time.Second)
			if r.Err == nil || !strings.Contains(r.Err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", r.Err, tc.want)
			}
		})
	}
}

// Pull runs servers concurrently and reports each as it finishes; a failed
// server does not stop the others.
func TestPullManyReportsEach(t *testing.T) {
	ups := []Upstream{
		inMemory("a", fixture.Options{ListDelay: 50 * time.Millisecond}),
		Command("b", testserver, []string{"-mode", "exit"}, nil, ""),
		inMemory("c", fixture.Options{}),
	}
	var mu sync.Mutex
	var seen []string
	results := Pull(context.Background(), ups, Options{Timeout: 10 * time.Second, Progress: func(r Result) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Server)
	}})
	if len(seen) != 3 {
		t.Fatalf("progress called for %v", seen)
	}
	for i, want := range []string{"a", "b", "c"} {
		if results[i].Server != want {
			t.Errorf("results[%d] is %s", i, results[i].Server)
		}
	}
	if results[0].Err != nil || results[1].Err == nil || results[2].Err != nil {
		t.Errorf("errors: %v / %v / %v", results[0].Err, results[1].Err, results[2].Err)
	}
}

// A server that ignores the end of its input is stopped (SIGTERM, then
// SIGKILL) before One and Pull return, whether its pull timed out or was
// cancelled: no upstream outlives the pull, and so the command. The result
// is still reported at the timeout.
func TestPullStopsServerBeforeReturning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		run  func(up Upstream) Result
	}{
		{"One, timed out", func(up Upstream) Result {
			return One(context.Background(), up, Options{Timeout: time.Second})
		}},
		{"Pull, timed out", func(up Upstream) Result {
			return Pull(context.Background(), []Upstream{up}, Options{Timeout: time.Second})[0]
		}},
		{"Pull, cancelled", func(up Upstream) Result {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Second, cancel)
			return Pull(ctx, []Upstream{up}, Options{Timeout: 10 * time.Second})[0]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pidFile := filepath.Join(t.TempDir(), "pid")
			// sleep neither reads its input nor answers.
			up := Command("s", "sh", []string{"-c", "echo $$ > " + pidFile + "; exec sleep 60"}, nil, "")
			r := tc.run(up)
			if r.Err == nil {
				t.Fatal("the pull of a silent server succeeded")
			}
			// The server is stopped at once (SIGTERM), not after the
			// 5 s grace or its own 60 s.
			if r.Duration > 4*time.Second {
				t.Errorf("the failure was reported after %s, not at the timeout", r.Duration)
			}
			b, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatal(err)
			}
			var pid int
			if _, err := fmt.Sscan(string(b), &pid); err != nil {
				t.Fatal(err)
			}
			if proc, err := os.FindProcess(pid); err == nil && proc.Signal(syscall.Signal(0)) == nil {
				proc.Kill()
				t.Errorf("the server (pid %d) was still running when the pull returned", pid)
			}
		})
	}
}

// A URL that answers JSON which is not JSON-RPC (not an MCP endpoint) is
// told so, not in the SDK's words alone.
func TestPullHTTPNotJSONRPC(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"ok"}`)
	}))
	defer srv.Close()
	r := One(context.Background(), HTTP("web", srv.URL, nil), Options{Timeout: 5 * time.Second})
	if r.Err == nil {
		t.Fatal("a pull from a URL that is not an MCP endpoint succeeded")
	}
	if msg := r.Err.Error(); !strings.Contains(msg, "the server wrote something that is not MCP's JSON-RPC") {
		t.Errorf("pull from a JSON endpoint: %q", msg)
	}
}

// endless is a server whose listing of method never ends: every page has a
// new cursor of cursorLen bytes. asked counts the pages asked for.
func endless(method string, cursorLen int, asked *atomic.Int64) Upstream {
	pad := strings.Repeat("c", cursorLen)
	return Upstream{Name: "endless", Dial: func(ctx context.Context) (mcp.Transport, error) {
		st, ct := mcp.NewInMemoryTransports()
		srv := fixture.Server(fixture.Options{})
		srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, m string, req mcp.Request) (mcp.Result, error) {
				if m != method {
					return next(ctx, m, req)
				}
				next := fmt.Sprint(asked.Add(1)) + pad
				switch method {
				case "tools/list":
					return &mcp.ListToolsResult{NextCursor: next}, nil
				case "prompts/list":
					return &mcp.ListPromptsResult{NextCursor: next}, nil
				}
				panic(method)
			}
		})
		if _, err := srv.Connect(context.Background(), st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}}
}

// A listing that never ends stops at a limit: cursors that are all new stop
// at the page limit, long ones at the size limit, long before either runs
// the server's memory up (before the size limit, 1000 pages of 1 MiB
// cursors were kept).
func TestPullEndlessListingStops(t *testing.T) {
	// Not parallel: the byte limit is lowered to 8 MiB for this test, so
	// that it does not send 64 MiB through the race detector.
	defer func(n int) { mcplist.MaxBytes = n }(mcplist.MaxBytes)
	mcplist.MaxBytes = 8 << 20
	for _, tc := range []struct {
		method    string
		cursorLen int
		want      string
		atMost    int64
	}{
		{"prompts/list", 0, "prompts/list: more than 1000 pages, the most one listing may have", mcplist.MaxPages},
		{"tools/list", 1 << 20, "tools/list: more than 8 MiB of JSON in 8 pages, the most one listing may have: the server's pagination does not end", 9},
	} {
		var asked atomic.Int64
		r := pullOne(t, endless(tc.method, tc.cursorLen, &asked), time.Minute)
		if r.Err == nil || !strings.Contains(r.Err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.method, r.Err, tc.want)
		}
		if n := asked.Load(); n > tc.atMost {
			t.Errorf("%s: the server was asked for %d pages, want at most %d", tc.method, n, tc.atMost)
		}
	}
}

// A stdio server that writes output that is not JSON-RPC is said to,
// whichever error the SDK reports: the read error that ends the session,
// or, when its closing wins the race, the session closing (catalog_failures
// then lost its "not MCP's JSON-RPC" now and then). The transport saw the
// read error itself.
func TestExplainNotJSONRPCWhicheverErrorTheSDKReports(t *testing.T) {
	tr := procexit.New(exec.Command("sh", "-c", "echo 'this is not JSON-RPC'; exec sleep 30"), 100*time.Millisecond)
	c, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Read(context.Background()); err == nil {
		t.Fatal("the garbage was read as a message")
	}
	p := &puller{up: Upstream{Name: "garbage", stderr: &tail{}}, logs: &sdkLog{}}
	p.proc.Store(tr)
	p.stage.Store("initializing")
	for _, sdkErr := range []string{
		`calling "initialize": invalid character 'h' in literal true (expecting 'r')`,
		`connection closed: calling "initialize": client is closing`,
	} {
		msg := p.explain(context.Background(), errors.New(sdkErr), time.Second).Error()
		if !strings.HasPrefix(msg, "initializing: ") || !strings.HasSuffix(msg, "invalid character 'h' in literal true (expecting 'r')) (the server wrote something that is not MCP's JSON-RPC)") &&
			!strings.HasSuffix(msg, "invalid character 'h' in literal true (expecting 'r') (the server wrote something that is not MCP's JSON-RPC)") {
			t.Errorf("the SDK's %q is explained as %q", sdkErr, msg)
		}
	}
}

// What an upstream says in an error, or names a tool the SDK drops, reaches
// the terminal escaped: a server cannot clear the screen or write a line
// of its own ("FAKE LINE: all good") into the pull's report.
func TestPullEscapesUpstreamText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ mode, want string }{
		{"list-error", `tools/list: calling "tools/list": \x1b[2J\x0aFAKE LINE: all good`},
		{"bad-tool", `tools/list: malformed listing: excluding tool from tools/list tool="\x1b[2J\nFAKE LINE: all good" error=`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			r := pullOne(t, Command("s", testserver, []string{"-mode", tc.mode}, nil, ""), 10*time.Second)
			if r.Err == nil {
				t.Fatal("the pull succeeded")
			}
			msg := r.Err.Error()
			if strings.ContainsAny(msg, "\x1b\n\r") {
				t.Errorf("the error carries the upstream's controls raw: %q", msg)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not say %q", msg, tc.want)
			}
		})
	}
}

// The SDK reads a listed schema's numbers as float64, so a snapshot holds
// them in their shortest form (10.0 and 1e0 are written 10 and 1), not as
// the server spelt them; a snapshot edited by hand to the server's spelling
// has the same digests and is Equal to it.
func TestPullNumberSpelling(t *testing.T) {
	spelt := `{"type":"object","properties":{"n":{"type":"integer","maximum":10.0,"minimum":1e0}}}`
	r := pullOne(t, malformed("tools/list", &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: "t", InputSchema: json.RawMessage(spelt)}}}), 5*time.Second)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	encode(t, r.Snapshot) // canonicalizes the schemas
	if got, want := string(r.Snapshot.Tools[0].InputSchema), `{"properties":{"n":{"maximum":10,"minimum":1,"type":"integer"}},"type":"object"}`; got != want {
		t.Errorf("pulled schema %s, want %s", got, want)
	}
	byHand := *r.Snapshot
	byHand.Tools = []catalog.Tool{{Name: "t", InputSchema: json.RawMessage(spelt)}}
	hand := encode(t, &byHand)
	if _, canonical, err := catalog.Decode(hand); err != nil || !canonical || !bytes.Contains(hand, []byte(`"maximum": 10.0`)) {
		t.Errorf("the server's spelling: canonical=%v err=%v\n%s", canonical, err, hand)
	}
	pulled := &r.Snapshot.Tools[0]
	if pulled.InputSchemaDigest() != byHand.Tools[0].InputSchemaDigest() || pulled.DefinitionDigest() != byHand.Tools[0].DefinitionDigest() || !catalog.Equal(r.Snapshot, &byHand) {
		t.Errorf("the pulled snapshot and the server's spelling differ: %s %s", pulled.InputSchemaDigest(), byHand.Tools[0].InputSchemaDigest())
	}
}
