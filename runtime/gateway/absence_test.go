package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// normalize replaces the name a request asked for with NAME in a raw
// response, so answers about different names can be compared byte for
// byte.
func normalize(resp []byte, name string) []byte {
	quoted, _ := json.Marshal(name)
	// The name appears JSON-quoted inside the message string, whose quotes
	// are themselves escaped, or as a plain string value (the uri in data).
	inner := strings.Trim(string(quoted), `"`)
	out := bytes.ReplaceAll(resp, []byte(`\"`+inner+`\"`), []byte(`\"NAME\"`))
	return bytes.ReplaceAll(out, quoted, []byte(`"NAME"`))
}

func TestDenialIsIndistinguishableFromAbsence(t *testing.T) {
	tg := startGateway(t, nil)
	cases := []struct {
		method, param string
		// reference is a name that does not exist although the table
		// would allow it; the others must be answered exactly like it.
		reference string
		others    []string
	}{
		{"tools/call", "name", "github__list_nothing", []string{
			"github__delete_repo",        // exists upstream, denied by deny_list
			"github__merge_pull_request", // exists upstream, not on the allow_list
			"nosuch__echo",               // no such upstream
			"echo",                       // no namespace at all
			"linear__create_issue",       // exists upstream, default deny
			"github__",
		}},
		{"prompts/get", "name", "github__list_nothing", []string{
			"github__secret_prompt", // exists upstream, not allowed
			"linear__summarize",     // exists upstream, default deny
			"nosuch__summarize",
		}},
		{"resources/read", "uri", "file:///srv/projects/app/nothing.md", []string{
			"file:///srv/projects/app/.env", // listed upstream, denied
			"ui://github/secret.html",       // listed, off the ui allowlist
			"ui://github/app.html",          // admitted by the table, but no consent gate
			"internal://42",                 // a template match, not allowed
			"https://example.com/",          // routed nowhere
		}},
	}
	for _, version := range allVersions {
		t.Run(version, func(t *testing.T) {
			c := rawSession(t, tg.Gateway, "alice", version)
			for _, tc := range cases {
				params := func(name string) string {
					if tc.method == "tools/call" {
						return fmt.Sprintf(`{%q:%q,"arguments":{"a":1}}`, tc.param, name)
					}
					return fmt.Sprintf(`{%q:%q}`, tc.param, name)
				}
				ref := normalize(c.call(7, tc.method, params(tc.reference)), tc.reference)
				if !bytes.Contains(ref, []byte(`"error"`)) {
					t.Fatalf("%s %s: the reference answer is not an error: %s", tc.method, tc.reference, ref)
				}
				for _, name := range tc.others {
					got := normalize(c.call(7, tc.method, params(name)), name)
					if !bytes.Equal(got, ref) {
						t.Errorf("%s %s is answered differently from a name that does not exist:\n got %s\nwant %s", tc.method, name, got, ref)
					}
				}
			}
		})
	}
}

// The gateway's answer for an absent item is the answer of a plain SDK
// server that does not have it: nothing marks the gateway as one.
func TestAbsenceMatchesAPlainServer(t *testing.T) {
	tg := startGateway(t, nil)
	plain := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	plain.AddTool(&mcp.Tool{Name: "other", InputSchema: map[string]any{"type": "object"}}, placeholderToolHandler)
	plain.AddPrompt(&mcp.Prompt{Name: "other"}, placeholderPromptHandler)
	plain.AddResource(&mcp.Resource{URI: "file:///other", Name: "other"}, placeholderResourceHandler)
	for _, version := range allVersions {
		t.Run(version, func(t *testing.T) {
			gw := rawSession(t, tg.Gateway, "alice", version)
			sdk := rawPlain(t, plain, version)
			for _, req := range [][2]string{
				{"tools/call", `{"name":"github__delete_repo","arguments":{}}`},
				{"prompts/get", `{"name":"github__secret_prompt"}`},
				{"resources/read", `{"uri":"file:///srv/projects/app/.env"}`},
			} {
				got, want := gw.call(3, req[0], req[1]), sdk.call(3, req[0], req[1])
				if !bytes.Equal(got, want) {
					t.Errorf("%s %s:\n gateway   %s\n plain SDK %s", req[0], req[1], got, want)
				}
			}
		})
	}
}

func TestArgumentsMustBeAnObject(t *testing.T) {
	tg := startGateway(t, nil)
	c := rawSession(t, tg.Gateway, "alice", legacyVersion)
	for _, args := range []string{`[1,2]`, `"text"`, `42`, `true`} {
		allowed := c.call(5, "tools/call", `{"name":"github__echo","arguments":`+args+`}`)
		denied := c.call(5, "tools/call", `{"name":"github__delete_repo","arguments":`+args+`}`)
		if !bytes.Contains(allowed, []byte(`"code":-32602`)) || !bytes.Contains(allowed, []byte(`must be a JSON object`)) {
			t.Errorf("arguments %s: got %s, want an invalid-params error saying arguments must be an object", args, allowed)
		}
		if !bytes.Equal(allowed, denied) {
			t.Errorf("arguments %s: an allowed and a denied tool are answered differently:\n%s\n%s", args, allowed, denied)
		}
	}
	if n := tg.github.Calls.Load(); n != 0 {
		t.Errorf("%d calls with bad arguments reached the upstream", n)
	}
	// Absent and null arguments are no arguments.
	for _, params := range []string{`{"name":"github__echo"}`, `{"name":"github__echo","arguments":null}`} {
		resp := c.call(6, "tools/call", params)
		if !bytes.Contains(resp, []byte(`github echo {}`)) {
			t.Errorf("%s: got %s, want the call to run with {}", params, resp)
		}
	}
	// Through an SDK client too.
	cs := tg.client(t, "alice", legacyVersion, nil)
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__echo", Arguments: []int{1}}); err == nil || !strings.Contains(err.Error(), "must be a JSON object") {
		t.Errorf("an array of arguments: got %v", err)
	}
}

// oversized is a tools/call line over MaxMessageBytes: before is written
// just after its opening brace, after just before its closing one.
func oversized(before, after string) string {
	return `{` + before + `"jsonrpc":"2.0","method":"tools/call","params":{"name":"github__echo","arguments":{"x":"` + strings.Repeat("y", MaxMessageBytes) + `"}}` + after + `}`
}

func TestMalformedJSONRPCFromAClient(t *testing.T) {
	tg := startGateway(t, nil)
	c := rawSession(t, tg.Gateway, "alice", legacyVersion)
	for _, tc := range []struct{ line, want string }{
		{`this is not json`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`},
		{`{"jsonrpc":"2.0","id":9`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,`},
		{`{"jsonrpc":"2.0","id":9}`, `{"jsonrpc":"2.0","id":9,"error":{"code":-32600,`},
		{`{"jsonrpc":"1.0","id":"x","method":"tools/list"}`, `{"jsonrpc":"2.0","id":"x","error":{"code":-32600,`},
		{`[]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`},
		{`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":"x"}`, `{"jsonrpc":"2.0","id":10,"error":{"code":-32602,`},
		{`{"jsonrpc":"2.0","id":11,"method":"no/such/method"}`, `{"jsonrpc":"2.0","id":11,"error":{"code":-32601,`},
		{`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":7}}`, `{"jsonrpc":"2.0","id":12,"error":{"code":-32602,`},
		{strings.Repeat("x", MaxMessageBytes+10), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`},
		// A message over the limit is answered with its id when the id can
		// be read from the line's start, so that the caller is not left
		// waiting; by the same rules as any other id.
		{oversized(`"id":"big-1",`, ""), `{"jsonrpc":"2.0","id":"big-1","error":{"code":-32600,"message":"message longer than 4194304 bytes`},
		{oversized(`"id":42,`, ""), `{"jsonrpc":"2.0","id":42,"error":{"code":-32600,`},
		{` {"jsonrpc" : "2.0", "meta":{"a":[1,{"b":"}"}]}, "id" : 43,` + oversized("", "")[1:], `{"jsonrpc":"2.0","id":43,"error":{"code":-32600,`},
		{oversized(`"id":1.5,`, ""), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`},
		{oversized(`"ID":44,`, ""), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`},
		{oversized("", `,"id":45`), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`}, // its id is past the limit
		{`{"jsonrpc":"2.0","params":{"x":"` + strings.Repeat("y", idPrefixBytes) + `"},"id":46}` + strings.Repeat(" ", MaxMessageBytes), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`},
	} {
		c.send(tc.line)
		got := c.next()
		if !strings.HasPrefix(string(got), tc.want) {
			short := tc.line
			if len(short) > 60 {
				short = short[:60] + "…"
			}
			t.Errorf("%s:\n got %s\nwant prefix %s", short, got, tc.want)
		}
	}
	// The session goes on, and nothing was allowed on the way.
	resp := c.call(20, "tools/call", `{"name":"github__echo","arguments":{"x":1}}`)
	if !bytes.Contains(resp, []byte(`github echo {\"x\":1}`)) {
		t.Errorf("the session did not survive malformed input: %s", resp)
	}
	if n := tg.github.Calls.Load(); n != 1 {
		t.Errorf("%d calls reached the upstream, want 1", n)
	}
}

// From protocol 2025-06-18 on there are no batches: one is refused as the
// HTTP front refuses it, nothing in it runs, and the session goes on.
func TestBatchRefusedOverStdio(t *testing.T) {
	tg := startGateway(t, nil)
	c := rawSession(t, tg.Gateway, "alice", legacyVersion)
	c.send(`[{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"github__echo","arguments":{"b":1}}}]`)
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: JSON-RPC batching is not supported in 2025-06-18 and later (this session: ` + legacyVersion + `); send each message on a line of its own"}}`
	if got := string(c.next()); got != want {
		t.Errorf("batch answer:\n got %s\nwant %s", got, want)
	}
	if n := tg.github.Calls.Load(); n != 0 {
		t.Errorf("%d calls of the refused batch reached the upstream", n)
	}
	resp := c.call(32, "tools/call", `{"name":"github__echo","arguments":{"x":1}}`)
	if !bytes.Contains(resp, []byte(`github echo {\"x\":1}`)) {
		t.Errorf("the session did not go on after the refused batch: %s", resp)
	}
}

// Before protocol 2025-06-18 a client may send a batch; it is answered with
// one array holding every response.
func TestBatchOverStdio(t *testing.T) {
	tg := startGateway(t, nil)
	c := rawSession(t, tg.Gateway, "alice", oldVersion)
	c.send(`[{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"github__echo","arguments":{"b":1}}},` +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":1}},` +
		`{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"name":"github__delete_repo"}}]`)
	var got []map[string]any
	line := c.next()
	if err := json.Unmarshal(line, &got); err != nil || len(got) != 2 {
		t.Fatalf("batch answer %s: %v", line, err)
	}
	if got[0]["id"] != 31.0 || !strings.Contains(fmt.Sprint(got[0]["result"]), `github echo {"b":1}`) {
		t.Errorf("first response: %v", got[0])
	}
	if got[1]["id"] != 32.0 || !strings.Contains(fmt.Sprint(got[1]["error"]), `unknown tool "github__delete_repo"`) {
		t.Errorf("second response: %v", got[1])
	}
}
