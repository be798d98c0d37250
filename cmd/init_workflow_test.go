package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyc/policyc/compiler"
)

// The workflow examples/ci holds is the one policyc init writes, for a
// policy in policy/: one source, so the two cannot drift apart. -update
// rewrites the example.
func TestCIWorkflowIsTheExample(t *testing.T) {
	path := filepath.Join("..", "examples", "ci", ".github", "workflows", "policy.yml")
	want := ciWorkflow(compiler.Version, "policy")
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is not the workflow policyc init writes (ciWorkflow(%q, \"policy\")); run go test ./cmd -run TestCIWorkflowIsTheExample -update", path, compiler.Version)
	}
	// What the README and docs/ci.md promise of it.
	for _, s := range []string{
		`policyc compile --rev HEAD "$POLICY_DIR"`,
		"--key-env POLICYC_SIGNING_KEY",
		`policyc verify policy.table.signed.json --trust "$TRUSTED_KEY"`,
		`policyc test "$POLICY_DIR" --coverage --format github`,
		`policyc test --rev HEAD "$POLICY_DIR"`,
		"fetch-depth: 0",
		"POLICYC_VERSION: v" + compiler.Version,
	} {
		if !strings.Contains(want, s) {
			t.Errorf("the workflow lacks %q", s)
		}
	}
	if strings.Contains(want, "--sign-env") {
		t.Error("the workflow uses the deprecated --sign-env")
	}
}
