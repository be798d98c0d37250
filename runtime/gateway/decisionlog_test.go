package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/policyc/policyc/runtime/principal"
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
	f.Fuzz(func(t *testing.T, p, name string) {
		b := AppendRecord(nil, &Record{Principal: p, Name: name, Decision: decide.Decision{Origin: name}})
		if bytes.Count(b, []byte("\n")) != 1 || b[len(b)-1] != '\n' {
			t.Fatalf("not exactly one line: %q", b)
		}
		var m struct {
			Principal, Name, Origin string
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("invalid JSON %q: %v", b, err)
		}
		// A principal reference's name ends at its first space (no name
		// has one: every way in checks table.ValidPrincipal); the rest is
		// fields of their own.
		if want := validUTF8(principal.Name(p)); m.Principal != want {
			t.Fatalf("principal %q decoded as %q, want %q", p, m.Principal, want)
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

// listingLine is a listing's line in the decision log, decoded.
type listingLine struct {
	Principal, Op, Method string
	Allow, Approve, Deny  int
	Hidden                int
	Servers               []struct {
		Server, Kind, Op     string
		Allow, Approve, Deny int
		Hidden               int
		HiddenDigest         string `json:"hidden_digest"`
	}
	TableDigest string  `json:"table_digest"`
	TableSerial float64 `json:"table_serial"`
}

// A listing is one line in the JSON log, written in one Write: its counts
// by decision for each server, kind and op are those of the decisions a
// log of single records receives for the same listing, and the digest of
// what it hid is that of the names those decisions left out; when that
// Write fails, nothing is listed.
func TestListingLogsOneLine(t *testing.T) {
	w := &writeCounter{}
	tg := startGateway(t, func(c *Config) { c.Log = NewJSONLog(w) })
	single := startGateway(t, nil) // the same, with a memLog: a record per item
	cs := tg.client(t, "alice", legacyVersion, nil)
	cs1 := single.client(t, "alice", legacyVersion, nil)
	type lister struct {
		method string
		list   func(cs *mcp.ClientSession) ([]string, error)
	}
	ctx := context.Background()
	listers := []lister{
		{"tools/list", func(cs *mcp.ClientSession) ([]string, error) {
			res, err := cs.ListTools(ctx, nil)
			return namesOf(res, err, func(r *mcp.ListToolsResult) []*mcp.Tool { return r.Tools }, func(x *mcp.Tool) string { return x.Name })
		}},
		{"prompts/list", func(cs *mcp.ClientSession) ([]string, error) {
			res, err := cs.ListPrompts(ctx, nil)
			return namesOf(res, err, func(r *mcp.ListPromptsResult) []*mcp.Prompt { return r.Prompts }, func(x *mcp.Prompt) string { return x.Name })
		}},
		{"resources/list", func(cs *mcp.ClientSession) ([]string, error) {
			res, err := cs.ListResources(ctx, nil)
			return namesOf(res, err, func(r *mcp.ListResourcesResult) []*mcp.Resource { return r.Resources }, func(x *mcp.Resource) string { return x.URI })
		}},
		{"resources/templates/list", func(cs *mcp.ClientSession) ([]string, error) {
			res, err := cs.ListResourceTemplates(ctx, nil)
			return namesOf(res, err, func(r *mcp.ListResourceTemplatesResult) []*mcp.ResourceTemplate { return r.ResourceTemplates },
				func(x *mcp.ResourceTemplate) string { return x.URITemplate })
		}},
	}
	// Groups that must hide something: the test policy denies them.
	mustHide := map[string][]string{
		"tools/list":               {"github tool list", "github resource link"},
		"prompts/list":             {"github prompt list"},
		"resources/list":           {"github resource list"},
		"resources/templates/list": {"github resource list"},
	}
	for _, l := range listers {
		before := len(w.all())
		names, err := l.list(cs)
		if err != nil {
			t.Fatalf("%s: %v", l.method, err)
		}
		writes := w.all()[before:]
		if len(writes) != 1 || strings.Count(writes[0], "\n") != 1 {
			t.Fatalf("%s: %d Writes to the decision log (%q), want 1 of one line", l.method, len(writes), writes)
		}
		var line listingLine
		if err := json.Unmarshal([]byte(writes[0]), &line); err != nil {
			t.Fatalf("%s: line %q: %v", l.method, writes[0], err)
		}
		if line.Principal != "alice" || line.Op != "list" || line.Method != l.method || line.TableSerial != 1 || !strings.HasPrefix(line.TableDigest, "sha256:") {
			t.Errorf("%s: line %s", l.method, writes[0])
		}
		if shown := line.Allow + line.Approve + line.Deny - line.Hidden; shown != len(names) || len(names) == 0 {
			t.Errorf("%s: %d listed, the line counts %d shown: %s", l.method, len(names), shown, writes[0])
		}

		// The same listing, recorded item by item.
		n0 := len(single.log.all())
		names1, err := l.list(cs1)
		if err != nil || !slices.Equal(names, names1) {
			t.Fatalf("%s: the two gateways list %q and %q (%v)", l.method, names, names1, err)
		}
		listed := map[string]bool{}
		for _, n := range names1 {
			listed[n] = true
		}
		type group struct {
			counts [3]int
			hidden []string
		}
		want := map[string]*group{}
		var order []string
		for _, r := range single.log.all()[n0:] {
			key := r.Server + " " + r.Kind.String() + " " + r.Op.String()
			g := want[key]
			if g == nil {
				g = &group{}
				want[key] = g
				order = append(order, key)
			}
			g.counts[r.Decision.Effect]++
			shown := false
			switch r.Op {
			case OpList:
				name := r.Name
				if r.Kind != table.Resource {
					name = Join(r.Server, r.Name)
				}
				shown = listed[name]
			case OpLink:
				shown = r.Decision.Effect == table.Allow && !r.Decision.Consent
			}
			if !shown {
				g.hidden = append(g.hidden, r.Name)
			}
		}
		var got []string
		for _, s := range line.Servers {
			key := s.Server + " " + s.Kind + " " + s.Op
			got = append(got, key)
			g := want[key]
			if g == nil {
				t.Errorf("%s: group %s has no decisions item by item", l.method, key)
				continue
			}
			if c := [3]int{s.Deny, s.Approve, s.Allow}; c != g.counts {
				t.Errorf("%s: %s counts deny/approve/allow %v, item by item %v", l.method, key, c, g.counts)
			}
			if s.Hidden != len(g.hidden) || s.HiddenDigest != HiddenDigestOf(g.hidden) {
				t.Errorf("%s: %s hides %d (%s), item by item %d %q (%s)", l.method, key, s.Hidden, s.HiddenDigest, len(g.hidden), g.hidden, HiddenDigestOf(g.hidden))
			}
		}
		if !slices.Equal(got, order) {
			t.Errorf("%s: groups %q, item by item %q", l.method, got, order)
		}
		for _, key := range mustHide[l.method] {
			if g := want[key]; g == nil || len(g.hidden) == 0 {
				t.Errorf("%s: %s hides nothing; the test policy denies some of it", l.method, key)
			}
		}
	}
	w.mu.Lock()
	w.fail = errors.New("disk full")
	w.mu.Unlock()
	for _, l := range listers {
		if names, err := l.list(cs); err == nil || !strings.Contains(err.Error(), "decision log cannot be written") {
			t.Errorf("%s with a failing decision log: %v, %d items", l.method, err, len(names))
		}
	}
}

func TestAppendListing(t *testing.T) {
	r := &ListingRecord{
		Time: time.Date(2026, 5, 1, 12, 0, 0, 1, time.UTC), Principal: "alice", Method: "tools/list",
		Groups: []ListingGroup{
			{Server: "github", Kind: table.Tool, Op: OpList, Counts: [3]int{2, 1, 3}, Hidden: 2, HiddenDigest: HiddenDigestOf([]string{"a", "b"})},
			{Server: "github", Kind: table.Resource, Op: OpLink, Counts: [3]int{1, 0, 0}, Hidden: 1, HiddenDigest: "sha256:x"},
			{Server: "linear", Kind: table.Tool, Op: OpList, Counts: [3]int{0, 0, 4}},
		},
		TableDigest: "sha256:ab", TableSerial: 42,
	}
	want := `{"time":"2026-05-01T12:00:00.000000001Z","principal":"alice","op":"list","method":"tools/list","allow":7,"approve":1,"deny":2,"hidden":2,` +
		`"servers":[{"server":"github","kind":"tool","op":"list","allow":3,"approve":1,"deny":2,"hidden":2,"hidden_digest":"` + HiddenDigestOf([]string{"a", "b"}) + `"},` +
		`{"server":"github","kind":"resource","op":"link","allow":0,"approve":0,"deny":1,"hidden":1,"hidden_digest":"sha256:x"},` +
		`{"server":"linear","kind":"tool","op":"list","allow":4,"approve":0,"deny":0,"hidden":0}],"table_digest":"sha256:ab","table_serial":42}` + "\n"
	if got := string(AppendListing(nil, r)); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// The digest is of the names as JSON strings, a line each.
	sum := sha256.Sum256([]byte("\"a\"\n\"b\\n\"\n"))
	if got, want := HiddenDigestOf([]string{"a", "b\n"}), "sha256:"+hex.EncodeToString(sum[:]); got != want {
		t.Errorf("HiddenDigestOf = %s, want %s", got, want)
	}
	if HiddenDigestOf(nil) != "" {
		t.Error("the digest of nothing hidden is not empty")
	}
}

// A record larger than maxKeptBuffer (a denied call naming a tool of
// megabytes) is written whole, and the log does not keep its buffer: each
// of the log's writers lets it go, not only LogAll.
func TestJSONLogLetsLargeBuffersGo(t *testing.T) {
	var out bytes.Buffer
	l := NewJSONLog(&out)
	huge := strings.Repeat("x", 2*maxKeptBuffer)
	writes := map[string]func() error{
		"Log":        func() error { return l.Log(&Record{Server: "github", Name: huge}) },
		"LogAll":     func() error { return l.LogAll([]Record{{Server: "github", Name: huge}}) },
		"LogListing": func() error { return l.LogListing(&ListingRecord{Method: "tools/list", TableDigest: huge}) },
	}
	for name, write := range writes {
		out.Reset()
		if err := write(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.Contains(out.String(), huge) {
			t.Errorf("%s wrote %d bytes, not the record", name, out.Len())
		}
		if c := cap(l.buf); c > maxKeptBuffer {
			t.Errorf("after %s the log keeps a buffer of %d bytes, over %d", name, c, maxKeptBuffer)
		}
	}
	// A small record keeps its buffer for the next.
	if err := l.Log(&Record{Server: "github", Name: "echo"}); err != nil {
		t.Fatal(err)
	}
	if cap(l.buf) == 0 {
		t.Error("a small record's buffer was let go")
	}
}
