package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/policyc/policyc/compiler"
)

// FuzzCheck: whatever a gateway configuration holds, checking it never
// panics, and a refusal is the configuration's problem (its diagnostics
// name the file), never an internal failure. The rewording of CUE's errors
// slices paths and messages, which is what this exercises.
func FuzzCheck(f *testing.F) {
	seed, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "team", "gateway", "gateway.cue"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	for _, s := range []string{
		"package gateway\n",
		"package gateway\ncall_timeout_seconds: 1.5\n",
		"package gateway\nupstreams: web: {url: \"x\", bearer_token_env: \"$A-B\"}\n",
		"package gateway\napprovals: admin: approvers: c: token_sha256: [\"s\"]\napprovals: admin: approvers: c: token_sha256: [\"t\"]\n",
		"package gateway\nupstreams: \"a.b\": env: \"X-Y\": \"1\"\n",
		"package gateway\nfront: http: principals: \"\": token_sha256: []\n",
		// Refused keys inside blocks whose other keys are still read.
		"package gateway\nupstreams: g: command: [\"true\"]\nfront: http: {address: 8, principals: a: token_sha256: [\"A\"]}\napprovals: {progress_interval_seconds: 1.5, servers: x: preview: 1, admin: approvers: c: 2}\n",
		"package gateway\napprovals: servers: 3\nfront: stdio: principal: 4\n",
		// Identity providers: URLs, claims, groups and scopes.
		"package gateway\nfront: http: {address: \"127.0.0.1:0\", oauth: {resource: \"http://m.example.com/?q#f\", scopes: [\"a b\", \"a b\"], clock_skew_seconds: 1.5, issuers: {x: {issuer: \"https://i\", groups: g: \"h\"}, y: {issuer: \"https://i\", groups_claim: \"a..b\", principal_claim: \" \"}}}}\n",
		"package gateway\nfront: http: oauth: {resource: 3, issuers: x: {issuer: \"https://u:p@i\", jwks_url: \"ftp://k\", audience: \"m\", groups_optional: \"yes\"}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "gateway.cue")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		files, root, err := ReadFiles(path)
		if err != nil {
			t.Fatal(err)
		}
		// A pull and a start check different things (a start also reads
		// the environment's secrets); both must hold. Not Probe: it
		// writes beside the decision log.
		for _, use := range []Use{ForPull, ForGateway} {
			c, diags, err := Check(files, root, Options{Use: use})
			switch {
			case err != nil:
				t.Fatalf("an internal failure, not a diagnostic: %v", err)
			case c == nil && len(diags) == 0:
				t.Fatal("no configuration and no diagnostic")
			case c != nil && len(diags) > 0:
				t.Fatalf("a configuration and diagnostics: %v", diags)
			}
			if len(diags) > 0 && !slices.ContainsFunc(diags, func(d compiler.Diagnostic) bool { return d.Pos.File == "gateway.cue" }) {
				t.Fatalf("diagnostics that do not name the file: %v", diags)
			}
		}
	})
}
