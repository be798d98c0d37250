package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A signed table that does not exist yet (before the first deployment) is
// still a failure to start (exit 3), and the error names the key that
// names it, with its position, and how to make it.
func TestGatewayMissingTable(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := runLint(t, "keygen", "-o", filepath.Join(dir, "ci")); code != ExitOK {
		t.Fatalf("keygen: exit %d: %s", code, errOut)
	}
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "gateway.cue")
	src := "package gateway\n\ntable: \"table.signed.json\"\ntrust: [\"ci.pub\"]\nstate_dir: \"state\"\nupstreams: a: command: [\"true\"]\nfront: stdio: principal: \"dev\"\n"
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	table := filepath.Join(dir, "table.signed.json")
	code, _, errOut := runLint(t, "gateway", "--config", cfg, "--decision-log", "-", "--check")
	want := "read the signed table: " + table + ", named by the configuration's table (" + filepath.ToSlash(cfg) + ":3:1), does not exist; compile and sign the policy there (policyc compile POLICY -o table.json; policyc sign table.json --key KEY -o " + table + "), or give --table FILE"
	if code != ExitFailure || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 3 and:\n%s", code, errOut, want)
	}
	code, _, errOut = runLint(t, "gateway", "--config", cfg, "--decision-log", "-", "--check", "--table", filepath.Join(dir, "other.json"))
	if code != ExitFailure || !strings.Contains(errOut, "other.json, named by --table, does not exist") || strings.Contains(errOut, "or give --table") {
		t.Errorf("--table: exit %d, stderr:\n%s", code, errOut)
	}
}
