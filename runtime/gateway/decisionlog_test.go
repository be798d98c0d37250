package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

func TestAppendRecord(t *testing.T) {
	r := &Record{
		Time: time.Date(2026, 5, 1, 12, 0, 0, 1, time.FixedZone("X", 3600)), Principal: "alice", Server: "github",
		Kind: table.Tool, Name: "create_issue", Op: OpCall,
		Decision:    decide.Decision{Effect: table.Allow, Reason: decide.ByRule, Scope: "server", Rule: &table.Rule{}, Origin: "github.cue:5"},
		TableDigest: "sha256:ab", TableSerial: 42,
	}
	want := `{"time":"2026-05-01T11:00:00.000000001Z","principal":"alice","server":"github","kind":"tool","name":"create_issue","op":"call","decision":"allow","reason":"rule","scope":"server","origin":"github.cue:5","table_digest":"sha256:ab","table_serial":42}` + "\n"
	if got := string(AppendRecord(nil, r)); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	r.Op, r.Verdict, r.Request = OpApproval, "timeout", "apr-k3jq7v2mhxw4tq5a"
	if got := string(AppendRecord(nil, r)); !strings.Contains(got, `"op":"approval","decision":"allow"`) || !strings.Contains(got, `"verdict":"timeout","request":"apr-k3jq7v2mhxw4tq5a"`) {
		t.Errorf("approval record: %s", got)
	}
}

func TestJSONLogWritesWholeLines(t *testing.T) {
	var buf bytes.Buffer
	l := NewJSONLog(&buf)
	for _, name := range []string{"a", "b\nc", "d"} {
		if err := l.Log(&Record{Name: name, Kind: table.Resource}); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines: %q", len(lines), buf.String())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &m); err != nil || m["name"] != "b\nc" {
		t.Errorf("line %s: %v %v", lines[1], m, err)
	}
}

// Whatever names a client sends, every record is one line of valid JSON
// that decodes to the same strings (invalid UTF-8 becoming U+FFFD).
func FuzzAppendRecord(f *testing.F) {
	for _, s := range []string{"plain", "quo\"te\\", "\x00\x1f\x7f", "line\u2028sep", "\xff\xfe", "é\U0001F600"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, principal, name string) {
		b := AppendRecord(nil, &Record{Principal: principal, Name: name, Decision: decide.Decision{Origin: name}})
		if bytes.Count(b, []byte("\n")) != 1 || b[len(b)-1] != '\n' {
			t.Fatalf("not exactly one line: %q", b)
		}
		var m struct {
			Principal, Name, Origin string
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("invalid JSON %q: %v", b, err)
		}
		if m.Principal != validUTF8(principal) {
			t.Fatalf("principal %q decoded as %q", principal, m.Principal)
		}
		if want := validUTF8(name); m.Name != want || m.Origin != want {
			t.Fatalf("name %q decoded as %q / %q, want %q", name, m.Name, m.Origin, want)
		}
	})
}

// validUTF8 replaces each invalid byte by U+FFFD, as encoding/json does.
func validUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += size
	}
	return b.String()
}

// TestPolicyWorkAllocatesNothing pins that the gateway's own work on a
// tools/call (split the name, decide, write the decision line, build the
// forwarded _meta) allocates nothing with the command's JSON-lines log.
func TestPolicyWorkAllocatesNothing(t *testing.T) {
	s := newBench(t, "inmemory")
	defer s.close()
	var meta mcp.Meta
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := s.g.authorizeCall("alice", "github__echo"); err != nil {
			t.Fatal(err)
		}
		_, done := s.g.forwardMeta(meta, nil, nil)
		done()
	})
	if allocs != 0 {
		t.Errorf("policy work allocates %.1f times per call; want 0", allocs)
	}
}

// namesOf is the names of a listing's items, or its error.
func namesOf[R, T any](res R, err error, items func(R) []T, name func(T) string) ([]string, error) {
	if err != nil {
		return nil, err
	}
	var names []string
	for _, x := range items(res) {
		names = append(names, name(x))
	}
	return names, nil
}

// writeCounter keeps every Write it is given, and fails them while fail is
// set.
type writeCounter struct {
	mu     sync.Mutex
	writes []string
	fail   error
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail != nil {
		return 0, w.fail
	}
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

func (w *writeCounter) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes)
}

// A listing's decisions, one per listed item and one per UI link, reach the
// JSON log in one Write, and each listed item has its record; when that
// Write fails, nothing is listed.
func TestListingLogsInOneWrite(t *testing.T) {
	w := &writeCounter{}
	tg := startGateway(t, func(c *Config) { c.Log = NewJSONLog(w) })
	cs := tg.client(t, "alice", legacyVersion, nil)
	type lister struct {
		method string
		list   func() ([]string, error)
	}
	ctx := context.Background()
	listers := []lister{
		{"tools/list", func() ([]string, error) {
			res, err := cs.ListTools(ctx, nil)
			return namesOf(res, err, func(r *mcp.ListToolsResult) []*mcp.Tool { return r.Tools }, func(x *mcp.Tool) string { return x.Name })
		}},
		{"prompts/list", func() ([]string, error) {
			res, err := cs.ListPrompts(ctx, nil)
			return namesOf(res, err, func(r *mcp.ListPromptsResult) []*mcp.Prompt { return r.Prompts }, func(x *mcp.Prompt) string { return x.Name })
		}},
		{"resources/list", func() ([]string, error) {
			res, err := cs.ListResources(ctx, nil)
			return namesOf(res, err, func(r *mcp.ListResourcesResult) []*mcp.Resource { return r.Resources }, func(x *mcp.Resource) string { return x.URI })
		}},
		{"resources/templates/list", func() ([]string, error) {
			res, err := cs.ListResourceTemplates(ctx, nil)
			return namesOf(res, err, func(r *mcp.ListResourceTemplatesResult) []*mcp.ResourceTemplate { return r.ResourceTemplates },
				func(x *mcp.ResourceTemplate) string { return x.URITemplate })
		}},
	}
	// What each listing must record besides its listed items: hidden items
	// (op "list", deny) and the UI links of listed tools (op "link").
	wantRecords := map[string][]string{
		"tools/list":               {"list github__delete_repo deny", "link ui://github/app.html allow", "link ui://github/secret.html deny"},
		"prompts/list":             {"list github__secret_prompt deny"},
		"resources/list":           {"list file:///srv/projects/app/.env deny"},
		"resources/templates/list": {"list internal://{id} deny"},
	}
	for _, l := range listers {
		before := len(w.all())
		names, err := l.list()
		if err != nil {
			t.Fatalf("%s: %v", l.method, err)
		}
		writes := w.all()[before:]
		if len(writes) != 1 {
			t.Fatalf("%s: %d Writes to the decision log, want 1", l.method, len(writes))
		}
		var records []string // "op name decision", with tools and prompts namespaced
		decided := map[string]string{}
		var serial float64 = -1
		for _, line := range strings.Split(strings.TrimSuffix(writes[0], "\n"), "\n") {
			var r struct {
				Principal, Server, Kind, Name, Op, Decision string
				TableSerial                                 float64 `json:"table_serial"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s: line %q: %v", l.method, line, err)
			}
			if r.Principal != "alice" {
				t.Errorf("%s: a record for principal %q", l.method, r.Principal)
			}
			if serial >= 0 && r.TableSerial != serial {
				t.Errorf("%s: records from tables %v and %v in one listing", l.method, serial, r.TableSerial)
			}
			serial = r.TableSerial
			name := r.Name
			if r.Kind != "resource" {
				name = Join(r.Server, r.Name)
			}
			records = append(records, r.Op+" "+name+" "+r.Decision)
			if r.Op == "list" {
				decided[name] = r.Decision
			}
		}
		if len(names) == 0 {
			t.Errorf("%s: nothing listed; the test policy shows something of every kind", l.method)
		}
		for _, name := range names {
			if d := decided[name]; d != "allow" && d != "approve" {
				t.Errorf("%s: %s listed, but its record says %q", l.method, name, d)
			}
		}
		for _, want := range wantRecords[l.method] {
			if !slices.Contains(records, want) {
				t.Errorf("%s: no record %q among %q", l.method, want, records)
			}
		}
	}
	w.mu.Lock()
	w.fail = errors.New("disk full")
	w.mu.Unlock()
	for _, l := range listers {
		if names, err := l.list(); err == nil || !strings.Contains(err.Error(), "decision log cannot be written") {
			t.Errorf("%s with a failing decision log: %v, %d items", l.method, err, len(names))
		}
	}
}
