package config

import (
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/policyc/policyc/compiler"
)

// check runs Check on src, the one file of a configuration in dir, and
// returns the diagnostics as "line:col path: message" lines.
func check(t *testing.T, dir, src string, o Options) (*Config, []string) {
	t.Helper()
	c, diags, err := Check([]compiler.File{{Name: "gateway.cue", Data: []byte("package gateway\n\n" + src)}}, dir, o)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	var got []string
	for _, d := range diags {
		got = append(got, d.Format(""))
	}
	return c, got
}

// trusted replaces the configuration's trust, so that no key file is read.
func trusted() ([]ed25519.PublicKey, error) {
	return []ed25519.PublicKey{make(ed25519.PublicKey, ed25519.PublicKeySize)}, nil
}

// mustHave fails unless some line of got contains each of want.
func mustHave(t *testing.T, got []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, w) }) {
			t.Errorf("no diagnostic says %q; got:\n%s", w, strings.Join(got, "\n"))
		}
	}
}

// A value refused inside a block does not hide a problem with which keys
// the block sets: both fronts, both command and url, settings for a
// server that is no upstream are all reported in the run that reports the
// refused value.
func TestShapeBesideRefusedValue(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "state"), 0o700)
	const head = "table: \"t.json\"\ntrust: [\"ci.pub\"]\nstate_dir: \"state\"\n"
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"front", head + `upstreams: a: command: ["true"]
front: stdio: principal: "dev"
front: http: {address: "127.0.0.1:0", principals: p: token_sha256: ["` + strings.Repeat("0", 64) + `"], idle_timeout_minutes: 1.5}
`, []string{"front.http.idle_timeout_minutes: a whole number of minutes", "front: both stdio and http are set"}},
		{"approvals", head + `upstreams: a: command: ["true"]
front: stdio: principal: "dev"
approvals: servers: ghh: preview: "false"
`, []string{"approvals.servers.ghh.preview: true or false is required", `approvals.servers.ghh: "ghh" is not an upstream`}},
		{"upstream", head + `upstreams: a: {command: ["true"], url: "https://example.com/mcp", pass_env: ["not-a-name"]}
front: stdio: principal: "dev"
`, []string{"upstreams.a.pass_env[0]: not the name of an environment variable", "upstreams.a: both command and url are set"}},
		{"url with env", head + `upstreams: a: {url: "https://example.com/mcp", env: {"X-Y": "1"}}
front: stdio: principal: "dev"
`, []string{"upstreams.a.env.X-Y: not the name of an environment variable", "upstreams.a: env, pass_env and dir apply to a stdio command"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, got := check(t, dir, tc.src, Options{Use: ForGateway, Trust: trusted})
			if c != nil {
				t.Fatal("a configuration with problems was returned")
			}
			mustHave(t, got, tc.want...)
			if len(got) != len(tc.want) {
				t.Errorf("got %d diagnostics, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
		})
	}
}

// A misspelt key where command, url or a front belongs is reported as
// itself, not also as a block that sets neither.
func TestMisspeltKeyNotAlsoMissing(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "state"), 0o700)
	_, got := check(t, dir, "table: \"t.json\"\ntrust: [\"ci.pub\"]\nstate_dir: \"state\"\nupstreams: a: comand: [\"true\"]\nfront: stdoi: principal: \"dev\"\n", Options{Use: ForGateway, Trust: trusted})
	mustHave(t, got, `upstreams.a.comand: unknown key "comand"`, `front.stdoi: unknown key "stdoi"`)
	if len(got) != 2 {
		t.Errorf("got %d diagnostics, want 2:\n%s", len(got), strings.Join(got, "\n"))
	}
}

// A pull needs only the upstreams: the keys only the running gateway uses
// may be left out, and what is there is still checked.
func TestPullNeedsOnlyUpstreams(t *testing.T) {
	dir := t.TempDir()
	c, got := check(t, dir, `upstreams: a: command: ["true"]`+"\n", Options{Use: ForPull})
	if len(got) > 0 || c == nil {
		t.Fatalf("a pull refused a configuration with only upstreams:\n%s", strings.Join(got, "\n"))
	}
	if len(c.Gateway.Upstreams) != 1 || c.Gateway.Upstreams[0].Name != "a" {
		t.Errorf("upstreams read: %+v", c.Gateway.Upstreams)
	}
	_, got = check(t, dir, "upstreams: a: command: [\"true\"]\ncall_timeout_seconds: 1.5\n", Options{Use: ForPull})
	mustHave(t, got, "call_timeout_seconds: a whole number of seconds")
	_, got = check(t, dir, "upstreams: a: command: [\"true\"]\nfront: http: {}\n", Options{Use: ForPull})
	mustHave(t, got, "front.http.address: required, and not set")
	// The gateway itself still needs every one of them.
	_, got = check(t, dir, `upstreams: a: command: ["true"]`+"\n", Options{Use: ForGateway})
	mustHave(t, got, "table: required", "trust: required", "state_dir: required", "front: required")
}

// A state directory that does not exist is reported at state_dir, with
// how to make it; given as a replacement, it is the replacement's error.
func TestStateDirMissing(t *testing.T) {
	dir := t.TempDir()
	src := "table: \"t.json\"\ntrust: [\"ci.pub\"]\nstate_dir: \"state\"\nupstreams: a: command: [\"true\"]\nfront: stdio: principal: \"dev\"\n"
	_, got := check(t, dir, src, Options{Use: ForGateway, Trust: trusted})
	want := "gateway.cue:5:1: error[gateway-config]: state_dir: the directory " + filepath.Join(dir, "state") + " does not exist"
	if len(got) != 1 || !strings.HasPrefix(got[0], want) || !strings.Contains(got[0], "mkdir -p") {
		t.Errorf("got:\n%s\nwant one diagnostic starting %q, saying mkdir -p", strings.Join(got, "\n"), want)
	}
	// A pull never reads it.
	if _, got := check(t, dir, src, Options{Use: ForPull}); len(got) > 0 {
		t.Errorf("a pull checked the state directory:\n%s", strings.Join(got, "\n"))
	}
	_, _, err := Check([]compiler.File{{Name: "gateway.cue", Data: []byte("package gateway\n" + src)}}, dir,
		Options{Use: ForGateway, Trust: trusted, StateDir: filepath.Join(dir, "nope")})
	if oe, ok := err.(*OverrideError); !ok || oe.Key != "state_dir" {
		t.Errorf("a --state that does not exist: err = %v, want an *OverrideError for state_dir", err)
	}
	os.Mkdir(filepath.Join(dir, "state"), 0o700)
	// An empty state_dir names no directory; it is not the configuration's
	// own directory, nor a gateway without rollback protection.
	empty := strings.Replace(src, `state_dir: "state"`, `state_dir: ""`, 1)
	for _, use := range []Use{ForGateway, ForPull} {
		_, got := check(t, dir, empty, Options{Use: use, Trust: trusted})
		if len(got) != 1 || !strings.HasPrefix(got[0], "gateway.cue:5:12: error[gateway-config]: state_dir: an empty string is not a value here") || !strings.Contains(got[0], "existing directory") {
			t.Errorf("an empty state_dir (use %v):\n%s", use, strings.Join(got, "\n"))
		}
	}
	if c, got := check(t, dir, src, Options{Use: ForGateway, Trust: trusted}); c == nil || len(got) > 0 {
		t.Errorf("an existing state directory was refused:\n%s", strings.Join(got, "\n"))
	}
}

// A refused value does not hide the required keys left out beside it:
// CUE checks them only once every value is valid, so they are looked for
// on their own.
func TestRequiredBesideRefusedValue(t *testing.T) {
	dir := t.TempDir()
	_, got := check(t, dir, "upstreams: a: command: [\"true\"]\ncall_timeout_seconds: 1.5\nfront: http: principals: p: {}\n", Options{Use: ForGateway})
	mustHave(t, got, "call_timeout_seconds: a whole number of seconds", "table: required", "trust: required", "state_dir: required",
		"front.http.address: required", "front.http.principals.p.token_sha256: required")
	if len(got) != 6 {
		t.Errorf("got %d diagnostics, want 6:\n%s", len(got), strings.Join(got, "\n"))
	}
	// A pull does without the gateway's own keys, not the others.
	_, got = check(t, dir, "upstreams: a: command: [\"true\"]\ncall_timeout_seconds: 1.5\nfront: http: principals: p: {}\n", Options{Use: ForPull})
	if len(got) != 3 {
		t.Errorf("pull: got %d diagnostics, want 3:\n%s", len(got), strings.Join(got, "\n"))
	}
}

// Each listener's trusted proxies are read as addresses or CIDR ranges;
// anything else, or a range of every address, is refused at the key.
func TestTrustedProxies(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "state"), 0o700)
	const head = "table: \"t.json\"\ntrust: [\"ci.pub\"]\nstate_dir: \"state\"\nupstreams: a: command: [\"true\"]\n"
	token := `["` + strings.Repeat("0", 64) + `"]`
	src := head + `front: http: {address: "127.0.0.1:0", principals: p: token_sha256: ` + token + `, trusted_proxies: ["10.0.0.0/8", "fd00::7"]}
approvals: admin: {address: "127.0.0.1:1", approvers: carol: token_sha256: ["` + strings.Repeat("1", 64) + `"], trusted_proxies: ["192.0.2.1"]}
`
	c, got := check(t, dir, src, Options{Use: ForGateway, Trust: trusted})
	if c == nil {
		t.Fatalf("refused:\n%s", strings.Join(got, "\n"))
	}
	if fmt.Sprint(c.HTTP.TrustedProxies) != "[10.0.0.0/8 fd00::7/128]" || fmt.Sprint(c.Admin.TrustedProxies) != "[192.0.2.1/32]" {
		t.Errorf("front %v, admin %v", c.HTTP.TrustedProxies, c.Admin.TrustedProxies)
	}
	src = head + `front: http: {address: "127.0.0.1:0", principals: p: token_sha256: ` + token + `, trusted_proxies: ["proxy.internal", "0.0.0.0/0"]}
`
	c, got = check(t, dir, src, Options{Use: ForGateway, Trust: trusted})
	if c != nil {
		t.Fatal("a configuration with problems was returned")
	}
	mustHave(t, got, `gateway.cue:7:138: error[gateway-config]: front.http.trusted_proxies: "proxy.internal" is not an IP address or a CIDR range`,
		`front.http.trusted_proxies: "0.0.0.0/0" is every address`)
	if len(got) != 2 {
		t.Errorf("got %d diagnostics, want 2:\n%s", len(got), strings.Join(got, "\n"))
	}
}

// An empty string where the schema wants a value is refused with what to
// write: for an optional key, to leave it out.
func TestEmptyStringRefused(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "state"), 0o700)
	t.Setenv("POLICYC_TEST_DSN", "postgres://127.0.0.1/test")
	src := "table: \"t.json\"\ntrust: [\"ci.pub\"]\nstate_dir: \"state\"\nupstreams: a: command: [\"true\"]\nfront: stdio: principal: \"dev\"\n" +
		"state: postgres: {dsn_env: \"POLICYC_TEST_DSN\", replica: \"\"}\n" +
		"observe: tracing: {endpoint: \"http://127.0.0.1:4318\", service_name: \"\"}\n"
	_, got := check(t, dir, src, Options{Use: ForGateway, Trust: trusted})
	mustHave(t, got,
		"state.postgres.replica: an empty string is not a value here", "leave replica out for its default",
		"observe.tracing.service_name: an empty string is not a value here", "leave service_name out for its default")
	if len(got) != 2 {
		t.Errorf("got %d diagnostics, want 2:\n%s", len(got), strings.Join(got, "\n"))
	}
}
