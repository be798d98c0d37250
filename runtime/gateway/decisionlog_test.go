package gateway

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/policyc/policyc/runtime"
	"github.com/policyc/policyc/runtime/table"
)

func TestAppendRecord(t *testing.T) {
	r := &Record{
		Time: time.Date(2026, 5, 1, 12, 0, 0, 1, time.FixedZone("X", 3600)), Principal: "alice", Server: "github",
		Kind: runtime.Tool, Name: "create_issue", Op: OpCall,
		Decision:    runtime.Decision{Effect: runtime.Allow, Reason: runtime.ByRule, Scope: "server", Rule: &table.Rule{}, Origin: "github.cue:5"},
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
		if err := l.Log(&Record{Name: name, Kind: runtime.Resource}); err != nil {
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
		b := AppendRecord(nil, &Record{Principal: principal, Name: name, Decision: runtime.Decision{Origin: name}})
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
		_, done := s.g.forwardMeta(meta, nil)
		done()
	})
	if allocs != 0 {
		t.Errorf("policy work allocates %.1f times per call; want 0", allocs)
	}
}
