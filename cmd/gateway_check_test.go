package cmd

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkSetup writes a signed table, its key and a state directory in a
// temporary directory, and returns it with the test upstream.
func checkSetup(t *testing.T) (dir, upstream string) {
	t.Helper()
	dir = t.TempDir()
	upstream = testUpstream(t)
	os.MkdirAll(filepath.Join(dir, "policy"), 0o755)
	os.MkdirAll(filepath.Join(dir, "state"), 0o755)
	policy := "package policy\n\napproval_channels: page: approvals_page: {}\n\nmcp_servers: github: access: tool: {\n\tallow_list: [\"echo\"]\n\tapproval_list: [\"merge_pull_request\"]\n\tapproval_channel: \"page\"\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "policy", "policy.cue"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"keygen", "--out", filepath.Join(dir, "ci")},
		{"compile", filepath.Join(dir, "policy"), "-o", filepath.Join(dir, "table.json")},
		{"sign", filepath.Join(dir, "table.json"), "--key", filepath.Join(dir, "ci.key"), "-o", filepath.Join(dir, "table.signed.json")},
	} {
		if code, out, errOut := runPolicyc(args...); code != 0 {
			t.Fatalf("policyc %v: %d\n%s%s", args, code, out, errOut)
		}
	}
	return dir, upstream
}

// checkConfig writes a configuration with an HTTP front, an admin
// listener and a metrics listener on the addresses given.
func checkConfig(t *testing.T, dir, upstream, stateDir, front, admin, metrics string) string {
	t.Helper()
	cfg := filepath.Join(dir, "gateway.cue")
	src := fmt.Sprintf(`package gateway

table:     "table.signed.json"
trust:     ["ci.pub"]
state_dir: %q
decision_log: "-"
upstreams: github: command: [%q, "-name", "github"]
front: http: {
	address: %q
	principals: alice: token_sha256: [%q]
}
approvals: admin: {
	address: %q
	approvers: carol: token_sha256: [%q]
}
observe: metrics_address: %q
`, stateDir, upstream, front, sha256Hex("alice-token"), admin, sha256Hex("carol-token"), metrics)
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// --check warns of a listener's address that another process holds (the
// gateway it is for, before a reload, may be that process): each is
// listened on and closed at once (a port of 0 is not checked). The start
// listens on its front first, so that a taken front port stops it before
// the upstreams start or a table is accepted.
func TestGatewayCheckAddressInUse(t *testing.T) {
	dir, up := checkSetup(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().String()
	free := "127.0.0.1:0"
	cfg := checkConfig(t, dir, up, "state", free, free, free)
	if code, out, errOut := runPolicyc("gateway", "--config", cfg, "--check"); code != ExitOK {
		t.Fatalf("free addresses: exit %d\n%s%s", code, out, errOut)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "state")); len(entries) != 0 {
		t.Errorf("the check left %v in the state directory", entries)
	}
	for _, c := range []struct{ key, front, admin, metrics string }{
		{"front.http.address", busy, free, free},
		{"approvals.admin.address", free, busy, free},
		{"observe.metrics_address", free, free, busy},
	} {
		cfg := checkConfig(t, dir, up, "state", c.front, c.admin, c.metrics)
		code, out, errOut := runPolicyc("gateway", "--config", cfg, "--check")
		if code != ExitOK || !strings.Contains(out, "  warning:   "+c.key+": listen tcp "+busy) || !strings.Contains(out, "a start here fails until the address is free") {
			t.Errorf("%s in use: exit %d, stdout %q, stderr:\n%s\nwant exit 0 and a warning naming %s", c.key, code, out, errOut, c.key)
		}
	}
	cfg = checkConfig(t, dir, up, "state", busy, free, free)
	code, _, errOut := runPolicyc("gateway", "--config", cfg)
	if code != ExitFailure || !strings.Contains(errOut, "front.http.address: listen tcp "+busy) {
		t.Fatalf("start on a taken front: exit %d, stderr:\n%s", code, errOut)
	}
	for _, s := range []string{"gateway ready", "serving the approvals page"} {
		if strings.Contains(errOut, s) {
			t.Errorf("the start logged %q before failing on its front:\n%s", s, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "accepted-table.json")); err == nil {
		t.Errorf("the start accepted the table before failing on its front")
	}
}

// --check fails on a state directory the gateway could not write to, as
// the start does (the approval gate locks its store there).
func TestGatewayCheckStateNotWritable(t *testing.T) {
	dir, up := checkSetup(t)
	state := filepath.Join(dir, "ro_state")
	os.Mkdir(state, 0o500)
	if f, err := os.CreateTemp(state, "probe-"); err == nil {
		// Root writes anywhere it may; /sys refuses it too.
		f.Close()
		os.Remove(f.Name())
		state = "/sys"
		if f, err := os.CreateTemp(state, "probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			t.Skip("no directory here refuses files")
		}
	}
	cfg := checkConfig(t, dir, up, state, "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0")
	code, _, errOut := runPolicyc("gateway", "--config", cfg, "--check")
	want := "error[gateway-config]: state_dir: the gateway cannot create files in " + state + ": permission denied"
	if code != ExitProblems || !strings.Contains(errOut, want) || !strings.Contains(errOut, "chown or chmod") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and %s", code, errOut, want)
	}
	code, _, errOut = runPolicyc("gateway", "--config", cfg, "--check", "--state", state)
	if code != ExitUsage || !strings.Contains(errOut, "--state: the gateway cannot create files in") {
		t.Errorf("--state: exit %d, stderr:\n%s", code, errOut)
	}
}
