package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/policyc/policyc/compiler"
)

// evaluate checks src as the one file of a configuration, against the
// schema only, and returns the diagnostics as the compiler hands them on,
// by key.
func evaluate(t *testing.T, src string) map[string]compiler.Diagnostic {
	t.Helper()
	ev := compiler.Evaluate([]compiler.File{{Name: "gateway.cue", Data: []byte("package gateway\n" + src)}}, Package, "#Gateway")
	diags := map[string]compiler.Diagnostic{}
	for _, d := range ev.Diagnostics {
		diags[d.Path] = d
	}
	return diags
}

// TestCUEMessages checks that the refusals valueWording, wholeUnits,
// oauthWording and Check reword reach them as CUE's own messages
// (Diagnostic.CUE), read as CUE composed them: a mismatched kind, a value
// out of a bound, a required key not set. The compiler pins CUE's formats
// (TestCUEFormats); this pins that the diagnostics carry them. The
// compiler's own message for a key that is not a name is read by
// badNameRE.
func TestCUEMessages(t *testing.T) {
	diags := evaluate(t, "call_timeout_seconds: 1.5\nupstreams: web: url: \"x\"\n")
	d := diags["call_timeout_seconds"]
	values, kinds, ok := d.CUE.Mismatch()
	// In either order: valueWording tells the schema's side.
	if i := slices.Index(values[:], "1.5"); !ok || i < 0 || kinds[i] != "float" || kinds[1-i] != "int" {
		t.Errorf("a float for an int: %q reads as a mismatch %v of kinds %v (%v)", d.Message, values, kinds, ok)
	}
	d = diags["upstreams.web.url"]
	if value, bound, ok := d.CUE.OutOfBound(); !ok || value != `"x"` || bound != boundURL {
		t.Errorf("a URL without a scheme: %q reads as value %s out of bound %s (%v), want \"x\" and %s", d.Message, value, bound, ok, boundURL)
	}
	if d := evaluate(t, "front: stdio: {}\n")["front.stdio.principal"]; !d.CUE.Required() {
		t.Errorf("a required key left out: %q is not read as one", d.Message)
	}
	d = evaluate(t, "upstreams: a: env: \"X-Y\": \"1\"\n")["upstreams.a.env.X-Y"]
	if !badNameRE.MatchString(strings.TrimPrefix(d.Message, d.Path+": ")) {
		t.Errorf("an env key that is not a name: the compiler says %q, which badNameRE does not read", d.Message)
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
