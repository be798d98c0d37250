package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyc/policyc/compiler"
)

// evaluate checks src as the one file of a configuration, against the
// schema only, and returns CUE's messages as the compiler hands them on.
func evaluate(t *testing.T, src string) map[string]string {
	t.Helper()
	ev := compiler.Evaluate([]compiler.File{{Name: "gateway.cue", Data: []byte("package gateway\n" + src)}}, Package, "#Gateway")
	msgs := map[string]string{}
	for _, d := range ev.Diagnostics {
		msgs[d.Path] = strings.TrimPrefix(d.Message, d.Path+": ")
	}
	return msgs
}

// TestCUEMessages pins the wording of CUE (cuelang.org/go v0.17.1) that
// valueWording, wholeUnits and Check read back from message text. When it
// fails after a CUE upgrade, the patterns in wording.go must follow the
// new wording (or go, if CUE's structured errors reach the diagnostics).
func TestCUEMessages(t *testing.T) {
	msgs := evaluate(t, "call_timeout_seconds: 1.5\nupstreams: web: url: \"x\"\n")
	if m := msgs["call_timeout_seconds"]; !mismatchRE.MatchString(m) || !strings.Contains(m, cueMismatch) {
		t.Errorf("a float for an int: CUE says %q, which mismatchRE does not read", m)
	}
	m := boundRE.FindStringSubmatch(msgs["upstreams.web.url"])
	if m == nil || m[1] != `"x"` || m[2] != boundURL {
		t.Errorf("a URL without a scheme: CUE says %q, which boundRE does not read as value \"x\" and bound %s", msgs["upstreams.web.url"], boundURL)
	}
	if m := evaluate(t, "front: stdio: {}\n")["front.stdio.principal"]; !strings.HasSuffix(m, cueRequired) {
		t.Errorf("a required key left out: CUE says %q, not ending in %q", m, cueRequired)
	}
	if m := evaluate(t, "upstreams: a: env: \"X-Y\": \"1\"\n")["upstreams.a.env.X-Y"]; !badNameRE.MatchString(m) {
		t.Errorf("an env key that is not a name: the compiler says %q, which badNameRE does not read", m)
	}
}

// Every pattern valueWording rewords is one the schema has: a bound that
// changes in schema/gateway.cue and not here would leave CUE's wording.
func TestBoundsInSchema(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "schema", "gateway.cue"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bound := range []string{boundSHA256, boundURL, boundEnvName} {
		if !strings.Contains(string(b), bound) {
			t.Errorf("schema/gateway.cue has no %s", bound)
		}
	}
}

// sameListener agrees with what Go's net.Listen does on Linux: "", "::"
// and 0.0.0.0 all listen on every address of both families, so each
// clashes with any address on the same port, IPv6 ones included.
func TestSameListener(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"127.0.0.1:8080", "127.0.0.1:8080", true},
		{"127.0.0.1:8080", "127.0.0.1:8443", false},
		{"127.0.0.1:0", "127.0.0.1:0", false}, // each picks a free port
		{":8080", "127.0.0.1:8080", true},
		{"[::]:8080", "127.0.0.1:8080", true},
		{"0.0.0.0:8080", "10.1.2.3:8080", true},
		{"0.0.0.0:8080", "[::1]:8080", true},
		{"[::1]:8080", "0.0.0.0:8080", true},
		{"127.0.0.1:8080", "127.0.0.2:8080", false},
		{"[::1]:8080", "[0:0:0:0:0:0:0:1]:8080", true},
		{"127.0.0.1:8080", "[::ffff:127.0.0.1]:8080", true},
		{"127.0.0.1:http", "127.0.0.1:80", true},
		{"gateway.internal:8080", "gateway.internal:8080", true},
		{"gateway.internal:8080", "admin.internal:8080", false},
		{"127.0.0.1", "127.0.0.1:8080", false}, // not host:port
	} {
		if got := sameListener(tc.a, tc.b); got != tc.same {
			t.Errorf("sameListener(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
