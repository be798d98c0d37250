package gateway

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		name, server, item string
		ok                 bool
	}{
		{"github__create_issue", "github", "create_issue", true},
		{"github__a__b", "github", "a__b", true},
		{"github___x", "github", "_x", true},
		{"my-server.v2__tool", "my-server.v2", "tool", true},
		{"github__", "", "", false},
		{"__tool", "", "", false},
		{"tool", "", "", false},
		{"", "", "", false},
	} {
		s, i, ok := Split(tc.name)
		if s != tc.server || i != tc.item || ok != tc.ok {
			t.Errorf("Split(%q) = %q, %q, %v; want %q, %q, %v", tc.name, s, i, ok, tc.server, tc.item, tc.ok)
		}
	}
}

func TestCheckUpstreamName(t *testing.T) {
	for _, name := range []string{"github", "my-server.v2", "a_b", "A1"} {
		if err := CheckUpstreamName(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	for name, want := range map[string]string{
		"":        "empty",
		"a__b":    `contains "__"`,
		"gh_":     "ends in '_'",
		"-x":      "letters, digits",
		"a b":     "letters, digits",
		"_x":      "letters, digits",
		"ü":       "letters, digits",
		"a/b":     "letters, digits",
		"a___b":   `contains "__"`,
		"policyc": "reserved for the gateway's own tools (policyc__wait_for_approval)",
	} {
		if err := CheckUpstreamName(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error containing %q", name, err, want)
		}
	}
}

// Every item name of every valid upstream round-trips exactly.
func FuzzNamesRoundTrip(f *testing.F) {
	for _, s := range [][2]string{{"github", "create_issue"}, {"a", "__"}, {"a.b-c", "_x_"}, {"x", "a__b__"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, upstream, item string) {
		if CheckUpstreamName(upstream) != nil || item == "" {
			return
		}
		s, i, ok := Split(Join(upstream, item))
		if !ok || s != upstream || i != item {
			t.Fatalf("Split(Join(%q, %q)) = %q, %q, %v", upstream, item, s, i, ok)
		}
	})
}

// A name that routes nowhere is denied, answered as absent, and logged
// whole, so the decision log shows what the client asked for.
func TestNameThatRoutesNowhereIsLoggedAsAsked(t *testing.T) {
	tg := startGateway(t, nil)
	c := rawSession(t, tg.Gateway, "alice", legacyVersion)
	asked := []struct{ method, name string }{
		{"tools/call", "echo"}, {"tools/call", "github__"}, {"tools/call", "__echo"},
		{"prompts/get", "summarize"}, {"prompts/get", "linear__"},
	}
	for _, a := range asked {
		resp := c.call(3, a.method, fmt.Sprintf(`{"name":%q,"arguments":{}}`, a.name))
		if !bytes.Contains(resp, []byte(`"error"`)) {
			t.Errorf("%s %q: want an error, got %s", a.method, a.name, resp)
		}
	}
	var got []string
	for _, r := range tg.log.all() {
		if r.Server == "" {
			got = append(got, fmt.Sprintf("%s %s %s %s", r.Kind, r.Name, r.Op, r.Decision.Effect))
		}
	}
	want := []string{"tool echo call deny", "tool github__ call deny", "tool __echo call deny", "prompt summarize get deny", "prompt linear__ get deny"}
	if !slices.Equal(got, want) {
		t.Errorf("records without a server:\n got %q\nwant %q", got, want)
	}
}
