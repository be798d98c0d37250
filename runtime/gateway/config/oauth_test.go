package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/policyc/policyc/internal/policytest"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/gateway/identity"
)

const oauthHead = "table: \"t.json\"\ntrust: [\"ci.pub\"]\nstate_dir: \"state\"\nupstreams: a: command: [\"true\"]\n"

func TestOAuthConfig(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "state"), 0o700)
	c, got := check(t, dir, oauthHead+`front: http: {
	address: "127.0.0.1:0"
	oauth: {
		resource: "https://mcp.example.com/"
		scopes: ["mcp", "tools:call"]
		clock_skew_seconds: 0
		issuers: {
			corp: {
				issuer: "https://idp.example.com"
				principal_claim: "email"
				groups_claim: "realm_access.roles"
				groups: {"idp-contractors": "contractors", "idp-ops": "ops"}
			}
			dev: {issuer: "http://127.0.0.1:5556/dex", jwks_url: "http://localhost:5556/dex/keys"}
		}
	}
}
`, Options{Use: ForGateway, Trust: trusted})
	if len(got) > 0 {
		t.Fatalf("diagnostics: %v", got)
	}
	o := c.OAuth
	if o == nil || o.Resource != "https://mcp.example.com/" || o.Skew != -1 || len(o.Issuers) != 2 {
		t.Fatalf("OAuth = %+v", o)
	}
	if strings.Join(c.OAuthScopes, " ") != "mcp tools:call" {
		t.Errorf("scopes %q", c.OAuthScopes)
	}
	corp, dev := o.Issuers[0], o.Issuers[1]
	if corp.Name != "corp" || corp.PrincipalClaim != "email" || corp.GroupsClaim != "realm_access.roles" || corp.Groups["idp-ops"] != "ops" || corp.JWKSURL != "" {
		t.Errorf("corp = %+v", corp)
	}
	if dev.Name != "dev" || dev.URL != "http://127.0.0.1:5556/dex" || dev.JWKSURL != "http://localhost:5556/dex/keys" || dev.PrincipalClaim != "" {
		t.Errorf("dev = %+v", dev)
	}
	if c.HTTP.Tokens == nil || len(c.HTTP.Tokens) != 0 {
		t.Errorf("an access-token-only front has tokens %v", c.HTTP.Tokens)
	}

	// The skew: as written, else the verifier's default.
	c, _ = check(t, dir, oauthHead+`front: http: {address: "127.0.0.1:0", oauth: {resource: "https://m/", clock_skew_seconds: 90, issuers: x: issuer: "https://i"}}`, Options{Use: ForGateway, Trust: trusted})
	if c.OAuth.Skew != 90*time.Second {
		t.Errorf("skew %v", c.OAuth.Skew)
	}
	c, _ = check(t, dir, oauthHead+`front: http: {address: "127.0.0.1:0", oauth: {resource: "https://m/", issuers: x: issuer: "https://i"}}`, Options{Use: ForGateway, Trust: trusted})
	if c.OAuth.Skew != 0 {
		t.Errorf("skew %v, want 0 (the verifier's default)", c.OAuth.Skew)
	}
}

func TestOAuthConfigProblems(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "state"), 0o700)
	for _, tc := range []struct {
		oauth string
		want  []string
	}{
		{`{resource: "https://m/?x=1", issuers: x: issuer: "https://i"}`, []string{"front.http.oauth.resource: \"https://m/?x=1\" must not have a ?query"}},
		{`{resource: "https://m/#f", issuers: x: issuer: "https://i"}`, []string{"must not have a #fragment"}},
		{`{resource: "https:///", issuers: x: issuer: "https://i"}`, []string{"front.http.oauth.resource: \"https:///\" has no host"}},
		{`{resource: "https://m/", issuers: {}}`, []string{"front.http.oauth.issuers: no issuer"}},
		{`{resource: "https://m/", scopes: ["a", "a"], issuers: x: issuer: "https://i"}`, []string{`scope "a" is listed twice`}},
		{`{resource: "https://m/", issuers: x: {issuer: "https://i", groups_optional: true}}`, []string{"issuers.x.groups_optional: applies to the groups claim"}},
		{`{resource: "https://m/", issuers: x: {issuer: "https://i", groups_claim: "g", groups: a: "not a name"}}`, []string{"issuers.x.groups.a"}},
		{`{resource: "https://m/", issuers: x: {issuer: "http://[::1]:9"}, issuers: y: {issuer: "http://10.0.0.1"}}`, []string{"issuers.y.issuer: \"http://10.0.0.1\" must be https://"}},
		{`{issuers: x: issuer: "https://i"}`, []string{"front.http.oauth.resource: required"}},
	} {
		_, got := check(t, dir, oauthHead+`front: http: {address: "127.0.0.1:0", oauth: `+tc.oauth+"}\n", Options{Use: ForGateway, Trust: trusted})
		mustHave(t, got, tc.want...)
		if strings.Contains(tc.oauth, "[::1]") && strings.Contains(strings.Join(got, "\n"), "issuers.x") {
			t.Errorf("http:// on [::1] refused: %v", got)
		}
	}
}

func TestCheckGroups(t *testing.T) {
	tb, err := decide.LoadForInspection(policytest.Compile(t, `package policy
mcp_servers: github: access: tool: allow_list: ["*"]
groups: contractors: {members: ["carol"], mcp_servers: github: access: tool: deny_list: ["delete_*"]}
groups: ops: members: []
`, 1))
	if err != nil {
		t.Fatal(err)
	}
	c := &Config{OAuth: &identity.Config{Issuers: []identity.Issuer{{Name: "corp", Groups: map[string]string{"idp-c": "contractors", "idp-o": "ops"}}}}}
	if err := c.CheckGroups(tb); err != nil {
		t.Errorf("groups the policy has: %v", err)
	}
	c.OAuth.Issuers[0].Groups["idp-g"] = "ghosts"
	err = c.CheckGroups(tb)
	if !errors.Is(err, ErrUnknownGroup) || !strings.Contains(err.Error(), `front.http.oauth.issuers.corp.groups maps "idp-g" to group "ghosts", which the table does not define (its groups: contractors, ops)`) {
		t.Errorf("err = %v", err)
	}
	if err := (&Config{}).CheckGroups(tb); err != nil {
		t.Errorf("no oauth: %v", err)
	}
}
