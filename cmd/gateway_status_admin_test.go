package cmd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/pgtest"
	"github.com/policyc/policyc/runtime/approval"
	"github.com/policyc/policyc/runtime/table"
)

// policyc gateway status --admin asks a running gateway: its table (serial
// 3), its server in audit mode (github), and the drift of docs' echo, whose
// description the reviewed catalogue has otherwise; with --config too, the
// replicas in the state database beside it. (The gateway never listed the
// reviewed echo, so the difference points to the snapshot; TestAdminStatus
// in runtime/approval has one it saw change.)
func TestGatewayStatusAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a subprocess upstream")
	}
	dsn := pgtest.DB(t)
	dir := t.TempDir()
	bin := testUpstream(t)
	write := func(name, content string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	policy := `package policy

defaults: {tool: "deny", prompt: "deny", resource: "deny"}

mcp_servers: github: {
	access: tool: allow_list: ["echo"]
	audit: true
}
mcp_servers: docs: access: tool: allow_list: ["echo"]
`
	write("policy/policy.cue", policy)
	os.MkdirAll(filepath.Join(dir, "state"), 0o755)
	t.Setenv("POLICYC_TEST_STATE_DSN", dsn)
	write("gateway.cue", fmt.Sprintf(`package gateway

table:     "table.signed.json"
trust:     ["ci.pub"]
state_dir: "state"
state: postgres: {dsn_env: "POLICYC_TEST_STATE_DSN", replica: "replica-a"}
decision_log: "decisions.jsonl"
upstreams: {
	github: command: [%q, "-name", "github"]
	docs: command: [%q, "-name", "docs"]
}
front: stdio: principal: "alice"
approvals: admin: {
	address: "127.0.0.1:0"
	approvers: carol: token_sha256: [%q]
}
`, bin, bin, sha256Hex("carol-token")))
	t.Chdir(dir)
	for _, args := range [][]string{
		{"keygen", "--out", "ci"},
		{"catalog", "pull", "--config", "gateway.cue", "--dir", "policy"},
	} {
		if code, out, errOut := runPolicyc(args...); code != 0 {
			t.Fatalf("policyc %v: %d\n%s%s", args, code, out, errOut)
		}
	}
	// The review saw another description of docs' echo than it now gives.
	snap, err := os.ReadFile("policy/catalog/docs.json")
	if err != nil {
		t.Fatal(err)
	}
	reviewed := strings.Replace(string(snap), `"Echo the arguments"`, `"Echo the arguments (as reviewed)"`, 1)
	if reviewed == string(snap) {
		t.Fatalf("docs' snapshot has no echo description to change:\n%s", snap)
	}
	write("policy/catalog/docs.json", reviewed)
	cat, err := catalog.ReadDir("policy/catalog")
	if err != nil {
		t.Fatal(err)
	}
	// Serial 3, as a commit's table has: audit mode needs a serial.
	res := compiler.Compile(compiler.Input{Files: []compiler.File{{Name: "policy.cue", Data: []byte(policy)}},
		Source: table.Source{PolicyPath: "policy"}, Serial: 3, Catalog: cat})
	if compiler.HasErrors(res.Diagnostics) {
		t.Fatalf("%v", res.Diagnostics)
	}
	b, err := table.Encode(res.Table)
	if err != nil {
		t.Fatal(err)
	}
	write("table.json", string(b))
	if code, out, errOut := runPolicyc("sign", "table.json", "--key", "ci.key", "-o", "table.signed.json"); code != 0 {
		t.Fatalf("sign: %d %s%s", code, out, errOut)
	}

	gw := startGateway(t, "gateway.cue")
	t.Setenv("POLICYC_ADMIN_TOKEN", "carol-token")
	var st struct {
		Replicas []json.RawMessage      `json:"replicas"`
		Gateway  approval.GatewayStatus `json:"gateway"`
	}
	for deadline := time.Now().Add(20 * time.Second); len(st.Gateway.Drift) == 0; time.Sleep(20 * time.Millisecond) {
		code, out, errOut := runPolicyc("gateway", "status", "--admin", gw.admin, "--format", "json")
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("status --format json: %d %s%s", code, out, errOut)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no drift in the status:\n%s\n%s", out, gw.stderr.String())
		}
	}
	g := st.Gateway
	if st.Replicas != nil || g.Table.Serial != 3 || g.Table.Digest != res.Table.Digest || strings.Join(g.Audit, ",") != "github" || len(g.Drift) != 1 {
		t.Fatalf("status: %+v", st)
	}
	d := g.Drift[0]
	if d.Server != "docs" || d.Kind != "tool" || d.Name != "echo" || !d.Hidden || d.Mode != table.PinsEnforce ||
		!regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(d.Pinned) || d.Live == d.Pinned || !strings.Contains(d.Difference, "catalogue snapshot") {
		t.Errorf("drift: %+v", d)
	}

	code, out, errOut := runPolicyc("gateway", "status", "--admin", gw.admin)
	if code != 0 {
		t.Fatalf("status: %d %s%s", code, out, errOut)
	}
	for _, want := range []string{
		"gateway " + gw.admin + ": serial 3 " + res.Table.Digest + ", no expiry\n",
		"audit mode: github (what the rules deny or hold is served",
		"drift: 1 item differs from the table's pins",
		"│ docs ", "│ tool ", "│ echo ", "│ hidden (enforce) ", "│ " + shortDigest(d.Pinned) + " ", "│ " + shortDigest(d.Live) + " ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}

	// With --config, the replicas first; POLICYC_ADMIN_URL alone asks the
	// gateway too.
	code, out, errOut = runPolicyc("gateway", "status", "--config", "gateway.cue", "--admin", gw.admin)
	if code != 0 || !strings.Contains(out, "replica-a (") || !strings.Contains(out, "last accepted: serial 3") || !strings.Contains(out, "│ docs ") {
		t.Errorf("status --config --admin: %d %s%s", code, out, errOut)
	}
	t.Setenv("POLICYC_ADMIN_URL", gw.admin)
	if code, out, errOut := runPolicyc("gateway", "status"); code != 0 || !strings.Contains(out, "drift: 1 item") {
		t.Errorf("status with POLICYC_ADMIN_URL: %d %s%s", code, out, errOut)
	}

	// Refusals: a token the admin side does not know, none at all, and no
	// address.
	t.Setenv("POLICYC_ADMIN_TOKEN", "mallory")
	if code, _, errOut := runPolicyc("gateway", "status", "--admin", gw.admin); code != ExitRefused || !strings.Contains(errOut, "(401)") {
		t.Errorf("unknown token: %d %s", code, errOut)
	}
	t.Setenv("POLICYC_ADMIN_TOKEN", "")
	if code, _, errOut := runPolicyc("gateway", "status", "--admin", gw.admin); code != ExitUsage || !strings.Contains(errOut, "POLICYC_ADMIN_TOKEN is not set") {
		t.Errorf("no token: %d %s", code, errOut)
	}
	t.Setenv("POLICYC_ADMIN_URL", "")
	if code, _, errOut := runPolicyc("gateway", "status"); code != ExitUsage || !strings.Contains(errOut, "give --config PATH") {
		t.Errorf("neither --config nor --admin: %d %s", code, errOut)
	}
}
