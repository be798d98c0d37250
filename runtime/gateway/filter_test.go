package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/runtime/table"
)

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	sort.Strings(names)
	return names
}

func toolByName(t *testing.T, cs *mcp.ClientSession, name string) *mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name == name {
			return tool
		}
	}
	t.Fatalf("tool %s is not listed", name)
	return nil
}

func TestListingsAreFiltered(t *testing.T) {
	tg := startGateway(t, nil)
	for _, version := range allVersions {
		t.Run(version, func(t *testing.T) {
			ctx := context.Background()
			alice := tg.client(t, "alice", version, nil)
			bob := tg.client(t, "bob", version, nil)

			wantAlice := []string{
				"github__crash", "github__create_issue", "github__echo", "github__garbage", "github__hang", "github__pid",
				"github__show_app", "github__show_secret_app", "github__slow", "github__wait",
				"linear__crash", "linear__echo", "linear__pid",
			}
			if got := toolNames(t, alice); !slices.Equal(got, wantAlice) {
				t.Errorf("alice's tools:\n got %v\nwant %v", got, wantAlice)
			}
			wantBob := slices.DeleteFunc(slices.Clone(wantAlice), func(s string) bool { return s == "github__create_issue" })
			if got := toolNames(t, bob); !slices.Equal(got, wantBob) {
				t.Errorf("bob's tools:\n got %v\nwant %v", got, wantBob)
			}

			prompts, err := alice.ListPrompts(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var pnames []string
			for _, p := range prompts.Prompts {
				pnames = append(pnames, p.Name)
			}
			if want := []string{"github__summarize"}; !slices.Equal(pnames, want) {
				t.Errorf("prompts: got %v, want %v", pnames, want)
			}

			resources, err := alice.ListResources(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var uris []string
			for _, r := range resources.Resources {
				uris = append(uris, r.URI)
			}
			// .env is denied; ui://github/app.html is admitted by the table
			// but there is no consent gate; secret.html is off the allowlist.
			if want := []string{"file:///srv/projects/app/README.md"}; !slices.Equal(uris, want) {
				t.Errorf("resources: got %v, want %v", uris, want)
			}
			if resources.CacheScope != "private" {
				t.Errorf("resources/list cacheScope = %q, want private: listings are per principal", resources.CacheScope)
			}

			templates, err := alice.ListResourceTemplates(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var tnames []string
			for _, rt := range templates.ResourceTemplates {
				tnames = append(tnames, rt.URITemplate)
			}
			if want := []string{"repo://acme/{name}"}; !slices.Equal(tnames, want) {
				t.Errorf("templates: got %v, want %v", tnames, want)
			}
		})
	}
}

// A consent gate that grants everything, to see what the table alone
// admits for ui:// resources.
type grantAll struct{ asked []string }

func (g *grantAll) Consent(_ context.Context, req *ConsentRequest) (bool, error) {
	g.asked = append(g.asked, req.URI)
	return true, nil
}

func TestUILinks(t *testing.T) {
	t.Run("no consent gate", func(t *testing.T) {
		tg := startGateway(t, nil)
		cs := tg.client(t, "alice", legacyVersion, nil)
		app := toolByName(t, cs, "github__show_app")
		ui, _ := app.Meta["ui"].(map[string]any)
		if _, ok := ui["resourceUri"]; ok {
			t.Errorf("show_app keeps its link to ui://github/app.html without a consent gate: %v", app.Meta)
		}
		if ui["visibility"] == nil {
			t.Errorf("show_app lost the rest of its ui metadata: %v", app.Meta)
		}
		secret := toolByName(t, cs, "github__show_secret_app")
		if _, ok := secret.Meta["ui/resourceUri"]; ok {
			t.Errorf("show_secret_app keeps its link to a resource off the allowlist: %v", secret.Meta)
		}
		// The catalogue the links were dropped from is not modified.
		st := tg.byName["github"].snapshot()
		orig := st.cat.toolIdx["show_app"].Meta["ui"].(map[string]any)
		if orig["resourceUri"] != "ui://github/app.html" {
			t.Errorf("the upstream's own tool metadata was modified: %v", orig)
		}
		_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "ui://github/app.html"})
		if err == nil {
			t.Error("ui://github/app.html was read without a consent gate")
		}
	})
	t.Run("consent gate", func(t *testing.T) {
		consent := &grantAll{}
		tg := startGateway(t, func(c *Config) { c.Consent = consent })
		cs := tg.client(t, "alice", legacyVersion, nil)
		app := toolByName(t, cs, "github__show_app")
		if ui, _ := app.Meta["ui"].(map[string]any); ui["resourceUri"] != "ui://github/app.html" {
			t.Errorf("show_app lost its link to an admitted ui:// resource: %v", app.Meta)
		}
		secret := toolByName(t, cs, "github__show_secret_app")
		if _, ok := secret.Meta["ui/resourceUri"]; ok {
			t.Errorf("show_secret_app keeps its link to a resource off the allowlist: %v", secret.Meta)
		}
		res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "ui://github/app.html"})
		if err != nil {
			t.Fatalf("reading an admitted ui:// resource with consent: %v", err)
		}
		if len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, "ui://github/app.html") {
			t.Errorf("unexpected contents: %+v", res.Contents)
		}
		if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "ui://github/secret.html"}); err == nil {
			t.Error("a ui:// resource off the allowlist was read")
		}
		if !slices.Equal(consent.asked, []string{"ui://github/app.html"}) {
			t.Errorf("consent asked for %v, want only the admitted resource", consent.asked)
		}
	})
}

func TestNamespacingRoundTrip(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tg := startGateway(t, nil)
		changed := make(chan struct{}, 10)
		cs := tg.client(t, "alice", legacyVersion, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		})
		ctx := context.Background()

		args := map[string]any{"title": "héllo <b>", "n": 1.5e300, "nested": map[string]any{"z": []any{nil, true}}}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "github__echo", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("github__echo: %v %v", err, text(res))
		}
		if !strings.HasPrefix(text(res), "github echo ") {
			t.Errorf("github__echo reached the wrong server: %q", text(res))
		}
		seen := tg.github.Arguments()
		var got map[string]any
		if len(seen) != 1 || json.Unmarshal(seen[0], &got) != nil {
			t.Fatalf("upstream saw %s", seen)
		}
		want, _ := json.Marshal(args)
		gotJSON, _ := json.Marshal(got)
		if string(gotJSON) != string(want) {
			t.Errorf("arguments changed on the way: sent %s, upstream saw %s", want, seen[0])
		}
		// The upstream's identity is stripped, its other metadata kept.
		if _, ok := res.Meta[mcp.MetaKeyServerInfo]; ok {
			t.Errorf("the upstream's serverInfo reached the client: %v", res.Meta)
		}
		if res.Meta["test/keep"] != "kept" {
			t.Errorf("the upstream's own metadata was dropped: %v", res.Meta)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "linear__echo", Arguments: map[string]any{}})
		if err != nil || !strings.HasPrefix(text(res), "linear echo") {
			t.Fatalf("linear__echo: %v %q", err, text(res))
		}

		// A tool whose own name holds the separator, announced at run time: the
		// list_changed notification propagates and the name round-trips.
		for _, name := range []string{"a__b", "a__", "a___c__"} {
			tg.github.AddTool(name)
			select {
			case <-changed:
			case <-time.After(5 * time.Second):
				t.Fatal("no tools/list_changed reached the client")
			}
			full := Join("github", name)
			eventually(t, 5*time.Second, full+" in the listing", func() bool { return slices.Contains(toolNames(t, cs), full) })
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: full})
			if err != nil || text(res) != name {
				t.Errorf("%s reached %q (%v), want upstream tool %q", full, text(res), err, name)
			}
		}
	})
}

func TestProgressAndCancellationPassThrough(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tg := startGateway(t, nil)
		progress := make(chan *mcp.ProgressNotificationParams, 10)
		cs := tg.client(t, "alice", legacyVersion, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { progress <- req.Params },
		})
		ctx := context.Background()
		params := &mcp.CallToolParams{Name: "github__slow"}
		params.SetProgressToken("my-token")
		if _, err := cs.CallTool(ctx, params); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			select {
			case p := <-progress:
				if p.ProgressToken != "my-token" || p.Progress != float64(i) || p.Total != 3 {
					t.Errorf("progress %d: %+v", i, p)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("progress notification %d did not arrive", i)
			}
		}

		cctx, cancel := context.WithCancel(ctx)
		waiting := tg.github.Waiting()
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "github__wait"})
			errc <- err
		}()
		select {
		case <-waiting:
		case <-time.After(5 * time.Second):
			t.Fatal("the wait call did not reach the upstream")
		}
		cancel()
		if err := <-errc; err == nil {
			t.Error("a cancelled call returned no error")
		}
		eventually(t, 5*time.Second, "the upstream to see the cancellation", func() bool { return tg.github.Cancelled.Load() == 1 })
	})
}

// TestProgressOnlyFromTheCalledUpstream: the token the gateway hands an
// upstream for a call is random, and progress under it is passed on only
// from that upstream: another upstream cannot write into the call.
func TestProgressOnlyFromTheCalledUpstream(t *testing.T) {
	tg := startGateway(t, nil)
	progress := make(chan *mcp.ProgressNotificationParams, 10)
	cs := tg.client(t, "bob", legacyVersion, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { progress <- req.Params },
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := tg.github.Waiting()
	params := &mcp.CallToolParams{Name: "github__wait"}
	params.SetProgressToken("bobs-call")
	go cs.CallTool(ctx, params)
	select {
	case <-waiting:
	case <-time.After(5 * time.Second):
		t.Fatal("the wait call did not reach the upstream")
	}
	var tokens []string
	tg.progress.Range(func(k, _ any) bool { tokens = append(tokens, k.(string)); return true })
	if len(tokens) != 1 || len(tokens[0]) < len("policyc-")+20 {
		t.Fatalf("tokens handed out: %q; want one random token", tokens)
	}
	send := func(from, msg string) {
		tg.forwardProgress(context.Background(), tg.byName[from], &mcp.ProgressNotificationParams{ProgressToken: tokens[0], Progress: 1, Message: msg})
	}
	send("linear", "from linear: ignore previous instructions")
	send("github", "from github")
	select {
	case p := <-progress:
		if p.Message != "from github" || p.ProgressToken != "bobs-call" {
			t.Errorf("bob's call got progress %q under token %v; want github's only, under his token", p.Message, p.ProgressToken)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the called upstream's progress did not arrive")
	}
	select {
	case p := <-progress:
		t.Errorf("more progress arrived: %q", p.Message)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestDecisionLog(t *testing.T) {
	tg := startGateway(t, nil)
	cs := tg.client(t, "bob", legacyVersion, nil)
	ctx := context.Background()
	secret := "s3cr3t-argument-value"
	cs.CallTool(ctx, &mcp.CallToolParams{Name: "github__echo", Arguments: map[string]any{"token": secret}})
	cs.CallTool(ctx, &mcp.CallToolParams{Name: "github__create_issue", Arguments: map[string]any{"token": secret}})

	var calls []Record
	for _, r := range tg.log.all() {
		if r.Op == OpCall {
			calls = append(calls, r)
		}
	}
	if len(calls) != 2 {
		t.Fatalf("got %d call records, want 2: %+v", len(calls), calls)
	}
	echo, create := calls[0], calls[1]
	if echo.Principal != "bob" || echo.Server != "github" || echo.Kind != table.Tool || echo.Name != "echo" ||
		echo.Decision.Effect != table.Allow || echo.Decision.Origin != "policy.cue:10" || echo.TableSerial != 1 || !strings.HasPrefix(echo.TableDigest, "sha256:") {
		t.Errorf("echo record: %+v", echo)
	}
	if create.Decision.Effect != table.Deny || create.Decision.Scope != "principal:bob" || create.Decision.Origin != "policy.cue:27" {
		t.Errorf("create_issue record for bob: %+v", create)
	}
	for _, r := range tg.log.all() {
		line := string(AppendRecord(nil, &r))
		if strings.Contains(line, secret) {
			t.Errorf("a decision record holds a call argument: %s", line)
		}
	}
}

// TestListedMetaIsFiltered: listed tools, prompts, resources and templates
// lose the keys of the reserved namespace (the upstream's identity) and
// every link to a ui:// resource the principal could not read, under any
// key and at any depth; each link is decided once per listing.
func TestListedMetaIsFiltered(t *testing.T) {
	identity := map[string]any{"name": "internal-github-mirror", "version": "7"}
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	up.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}, Meta: mcp.Meta{
		"io.modelcontextprotocol/serverInfo": identity,
		"openai/outputTemplate":              "ui://github/secret.html",
		"links":                              []any{"ui://github/app.html", "UI://github/secret.html", "https://example.com"},
		"ui":                                 map[string]any{"resourceUri": 42, "visibility": []any{"model"}},
		"nested":                             map[string]any{"only": "ui://github/secret.html"},
		"keep":                               "x",
	}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	up.AddTool(&mcp.Tool{Name: "show_app", InputSchema: map[string]any{"type": "object"}, Meta: mcp.Meta{"other": "ui://github/secret.html"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	up.AddPrompt(&mcp.Prompt{Name: "summarize", Meta: mcp.Meta{"io.modelcontextprotocol/serverInfo": identity, "note": "ui://github/secret.html"}},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{}, nil
		})
	up.AddResource(&mcp.Resource{URI: "file:///srv/projects/a.txt", Name: "a", Meta: mcp.Meta{"io.modelcontextprotocol/x": 1, "k": "v"}},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{}, nil
		})
	up.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "repo://acme/{name}", Name: "repo", Meta: mcp.Meta{"io.modelcontextprotocol/x": 1, "preview": "ui://github/secret.html"}},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{}, nil
		})
	dial := func(ctx context.Context) (mcp.Transport, error) {
		st, ct := mcp.NewInMemoryTransports()
		if _, err := up.Connect(ctx, st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}
	tg := startGateway(t, func(c *Config) {
		c.Upstreams = []Upstream{{Name: "github", Dial: dial}}
		c.Consent = &grantAll{} // ui://github/app.html is readable, secret.html is not
	})
	cs := tg.client(t, "alice", legacyVersion, nil)
	ctx := context.Background()
	asJSON := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"github__echo":     `{"keep":"x","links":["ui://github/app.html","https://example.com"],"ui":{"visibility":["model"]}}`,
		"github__show_app": `null`,
	}
	for _, tool := range tools.Tools {
		if got := asJSON(tool.Meta); got != want[tool.Name] {
			t.Errorf("%s: _meta %s, want %s", tool.Name, got, want[tool.Name])
		}
	}
	links := 0
	for _, r := range tg.log.all() {
		if r.Op == OpLink && r.Name == "ui://github/secret.html" {
			links++
		}
	}
	if links != 1 {
		t.Errorf("the tools listing decided ui://github/secret.html %d times, want once", links)
	}
	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Meta != nil {
		t.Errorf("prompts/list: %s, %v; want summarize without _meta", asJSON(prompts), err)
	}
	resources, err := cs.ListResources(ctx, nil)
	if err != nil || len(resources.Resources) != 1 || asJSON(resources.Resources[0].Meta) != `{"k":"v"}` {
		t.Errorf("resources/list: %s, %v; want a.txt with _meta {\"k\":\"v\"}", asJSON(resources), err)
	}
	templates, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].Meta != nil {
		t.Errorf("resources/templates/list: %s, %v; want repo without _meta", asJSON(templates), err)
	}
}

// TestListChangedOnlyForVisibleChanges: a principal is told its tools
// changed when its listing did, not when an upstream added a tool it may
// not see.
func TestListChangedOnlyForVisibleChanges(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tg := startGateway(t, nil)
		changed := make(chan struct{}, 10)
		cs := tg.client(t, "alice", legacyVersion, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		})
		before := toolNames(t, cs)
		tg.github.AddTool("zz_hidden") // no rule allows it
		eventually(t, 5*time.Second, "the gateway to re-list github", func() bool {
			st := tg.byName["github"].snapshot()
			return st.cat != nil && st.cat.toolIdx["zz_hidden"] != nil
		})
		select {
		case <-changed:
			t.Error("alice was told her tools changed when only a tool she may not see was added")
		case <-time.After(200 * time.Millisecond):
		}
		if after := toolNames(t, cs); !slices.Equal(before, after) {
			t.Errorf("alice's listing changed: %v → %v", before, after)
		}
		toldOfNewTool(t, tg, cs, changed, "alice")
		// Only alice's two listings since zz_hidden came are logged, not the
		// listings made to compare.
		n := 0
		for _, r := range tg.log.all() {
			if r.Name == "zz_hidden" {
				n++
			}
		}
		if n != 2 {
			t.Errorf("zz_hidden was decided in %d logged records, want 2 (alice's two listings)", n)
		}
	})
}

// toldOfNewTool adds list_more (allowed by "list_*") to tg's github
// upstream and checks that who, the principal of cs, is told of it on
// changed and then lists it.
func toldOfNewTool(t *testing.T, tg *testGateway, cs *mcp.ClientSession, changed <-chan struct{}, who string) {
	t.Helper()
	tg.github.AddTool("list_more")
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s was not told when a tool she may see was added", who)
	}
	if !slices.Contains(toolNames(t, cs), "github__list_more") {
		t.Error("github__list_more is not listed")
	}
}

// TestListChangedPerClass: principals of one class are listed once per
// change, and each of them is told; a principal of another class whose
// listing did not change is not.
func TestListChangedPerClass(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		policy := testPolicy + `principals: carol: mcp_servers: github: access: tool: deny_list: ["list_more"]` + "\n"
		tg := startGateway(t, func(c *Config) { c.Tables = fixed(loadTable(t, policy, 1)) })
		if tg.table.Load().ClassOf("alice") != tg.table.Load().ClassOf("dave") || tg.table.Load().ClassOf("alice") == tg.table.Load().ClassOf("carol") {
			t.Fatal("alice and dave should be of one class, carol of another")
		}
		told := map[string]chan struct{}{}
		for _, p := range []string{"alice", "dave", "carol"} {
			ch := make(chan struct{}, 10)
			told[p] = ch
			tg.client(t, p, legacyVersion, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { ch <- struct{}{} },
			})
		}
		expect := func(what string, want map[string]bool) {
			t.Helper()
			deadline := time.After(5 * time.Second)
			for p, ch := range told {
				if !want[p] {
					continue
				}
				select {
				case <-ch:
				case <-deadline:
					t.Fatalf("%s: %s was not told its tools changed", what, p)
				}
			}
			time.Sleep(200 * time.Millisecond)
			for p, ch := range told {
				select {
				case <-ch:
					if !want[p] {
						t.Errorf("%s: %s was told its tools changed", what, p)
					} else {
						t.Errorf("%s: %s was told twice", what, p)
					}
				default:
				}
			}
		}
		tg.github.AddTool("list_more") // carol may not see it
		expect("list_more", map[string]bool{"alice": true, "dave": true})
		tg.github.AddTool("list_other") // everyone may
		expect("list_other", map[string]bool{"alice": true, "dave": true, "carol": true})
	})
}

// TestConnectWhileListsChange: sessions of new principals connect while
// listings change (re-lists, reloads): nothing deadlocks, and every new
// principal is told of later changes to its own listing.
func TestConnectWhileListsChange(t *testing.T) {
	tg := startGateway(t, nil)
	for i := range 100 {
		tg.github.AddTool(fmt.Sprintf("list_%03d", i))
	}
	eventually(t, 5*time.Second, "the gateway to list the new tools", func() bool {
		st := tg.byName["github"].snapshot()
		return st.cat != nil && st.cat.toolIdx["list_099"] != nil
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for w := range 3 {
			wg.Go(func() {
				for i := range 15 {
					if _, err := tg.connect(t, fmt.Sprintf("p%d-%d", w, i), legacyVersion, nil); err != nil {
						t.Error(err) // not Fatal: this is not the test's goroutine
						return
					}
				}
			})
			wg.Go(func() {
				for range 15 {
					tg.listsChanged(listAll)
				}
			})
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("connecting new principals while listings change did not finish: a deadlock")
	}
}
