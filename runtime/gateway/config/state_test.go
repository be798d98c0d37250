package config

import (
	"os"
	"path/filepath"
	"testing"
)

// state.postgres reads the connection string from the variable dsn_env
// names; an unset variable is reported at the key, and a name that is no
// variable name is refused by the schema.
func TestStatePostgres(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "state"), 0o700)
	const head = "table: \"t.json\"\ntrust: [\"ci.pub\"]\nstate_dir: \"state\"\nupstreams: a: command: [\"true\"]\nfront: stdio: principal: \"dev\"\n"
	t.Setenv("POLICYC_TEST_STATE_DSN", "postgres://gateway@db.internal/policyc")
	c, got := check(t, dir, head+"state: postgres: {dsn_env: \"POLICYC_TEST_STATE_DSN\", replica: \"eu-1\"}\n", Options{Use: ForGateway, Trust: trusted})
	if len(got) > 0 {
		t.Fatalf("diagnostics: %v", got)
	}
	if s := c.State; s == nil || s.DSN != "postgres://gateway@db.internal/policyc" || s.DSNEnv != "POLICYC_TEST_STATE_DSN" || s.Replica != "eu-1" {
		t.Fatalf("state %+v", c.State)
	}

	_, got = check(t, dir, head+"state: postgres: dsn_env: \"POLICYC_TEST_STATE_UNSET\"\n", Options{Use: ForGateway, Trust: trusted})
	mustHave(t, got, "gateway.cue:8:18: error[gateway-config]: state.postgres.dsn_env: POLICYC_TEST_STATE_UNSET holds the state database's connection string and is not set in the gateway's environment")

	_, got = check(t, dir, head+"state: postgres: dsn_env: \"not a name\"\n", Options{Use: ForGateway, Trust: trusted})
	mustHave(t, got, "state.postgres.dsn_env")

	c, got = check(t, dir, head, Options{Use: ForGateway, Trust: trusted})
	if len(got) > 0 || c.State != nil {
		t.Fatalf("without state: %v, %+v", got, c.State)
	}
}
