package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/policyc/policyc/runtime/approval"
)

// adminHead is a configuration with an HTTP front of static tokens, for
// the admin listener's tests.
const adminHead = oauthHead + `front: http: {address: "127.0.0.1:0", principals: alice: token_sha256: ["` + aliceHash + `"]}
`

const aliceHash = "2bd806c97f0e00af1a1fc3328fa763a9269723c8db8fac4f93af71db186d6e90"

// approvals.admin.oauth: the provider, the audience (default public_url),
// the approver groups mapped to the gate's approver group, the page's
// sign-in client and its secret from the environment; static approvers
// are optional beside it.
func TestAdminOAuthConfig(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "state"), 0o700)
	t.Setenv("PAGE_CLIENT_SECRET", "s3cret")
	c, got := check(t, dir, adminHead+`approvals: admin: {
	address: "127.0.0.1:0"
	public_url: "https://approvals.example.com"
	oauth: {
		issuer: "https://idp.example.com"
		principal_claim: "email"
		groups_claim: "realm_access.roles"
		approver_groups: ["release-managers", "sre"]
		clock_skew_seconds: 10
		sign_in: {client_id: "policyc-approvals", client_secret_env: "PAGE_CLIENT_SECRET", scopes: ["email"]}
	}
}
`, Options{Use: ForGateway, Trust: trusted})
	if len(got) > 0 {
		t.Fatalf("diagnostics: %v", got)
	}
	o := c.AdminOAuth
	if o == nil || o.Identity.Resource != "https://approvals.example.com" || len(o.Identity.Issuers) != 1 || o.GroupsClaim != "realm_access.roles" {
		t.Fatalf("AdminOAuth = %+v", o)
	}
	is := o.Identity.Issuers[0]
	if is.URL != "https://idp.example.com" || is.PrincipalClaim != "email" || is.GroupsClaim != "realm_access.roles" || !is.GroupsOptional ||
		is.Groups["release-managers"] != approval.ApproverGroup || is.Groups["sre"] != approval.ApproverGroup || len(is.Groups) != 2 {
		t.Errorf("issuer = %+v", is)
	}
	if s := o.SignIn; s == nil || s.ClientID != "policyc-approvals" || s.ClientSecret != "s3cret" || len(s.Scopes) != 1 {
		t.Errorf("sign-in = %+v", s)
	}
	if len(c.Admin.Approvers) != 0 {
		t.Errorf("approvers %v", c.Admin.Approvers)
	}

	// A configured audience; the default groups claim; no sign-in.
	c, got = check(t, dir, adminHead+`approvals: admin: {address: "127.0.0.1:0", oauth: {issuer: "https://i", audience: "https://admin.example.com/", approver_groups: ["a"]}}`, Options{Use: ForGateway, Trust: trusted})
	if len(got) > 0 {
		t.Fatalf("diagnostics: %v", got)
	}
	if o := c.AdminOAuth; o.Identity.Resource != "https://admin.example.com/" || o.Identity.Issuers[0].GroupsClaim != "groups" || o.SignIn != nil {
		t.Errorf("AdminOAuth = %+v", o)
	}
}

func TestAdminOAuthConfigProblems(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "state"), 0o700)
	os.Unsetenv("POLICYC_UNSET_SECRET")
	for _, tc := range []struct {
		head, admin string
		want        []string
	}{
		{adminHead, `{address: "127.0.0.1:0"}`, []string{"approvals.admin.approvers: no approver", "or an identity provider (oauth)"}},
		{adminHead, `{address: "127.0.0.1:0", oauth: {issuer: "https://i", approver_groups: ["a"]}}`,
			[]string{"approvals.admin.oauth: has no audience", "neither audience nor approvals.admin.public_url is set"}},
		{adminHead, `{address: "127.0.0.1:0", oauth: {issuer: "https://i", audience: "https://a/", approver_groups: []}}`, []string{"approvals.admin.oauth.approver_groups: lists no group"}},
		{adminHead, `{address: "127.0.0.1:0", oauth: {issuer: "https://i", audience: "https://a/", approver_groups: ["a"], principal_claim: "e mail"}}`,
			[]string{`approvals.admin.oauth.principal_claim: "e mail" is not a claim name`}},
		{adminHead, `{address: "127.0.0.1:0", oauth: {issuer: "https://i", audience: "https://a/"}}`, []string{"approvals.admin.oauth.approver_groups: required"}},
		{adminHead, `{address: "127.0.0.1:0", oauth: {issuer: "http://10.0.0.1", audience: "https://a/", approver_groups: ["a"]}}`,
			[]string{"approvals.admin.oauth.issuer: \"http://10.0.0.1\" must be https://"}},
		{adminHead, `{address: "127.0.0.1:0", oauth: {issuer: "https://i", audience: "https://a/?q=1", approver_groups: ["a"]}}`,
			[]string{"approvals.admin.oauth.audience: \"https://a/?q=1\" must not have a ?query"}},
		{adminHead, `{address: "127.0.0.1:0", oauth: {issuer: "https://i", audience: "https://a/", approver_groups: ["a", "a"]}}`, []string{`group "a" is listed twice`}},
		{adminHead, `{address: "127.0.0.1:0", oauth: {issuer: "https://i", audience: "https://a/", approver_groups: ["a"], sign_in: client_id: "c", sign_in: client_secret_env: "POLICYC_UNSET_SECRET"}}`,
			[]string{"approvals.admin.oauth.sign_in.client_secret_env: POLICYC_UNSET_SECRET must hold the page's client secret and is not set"}},
		{adminHead, `{address: "127.0.0.1:0", oauth: {issuer: "https://i", audience: "https://a/", approver_groups: ["a"], sign_in: {}}}`,
			[]string{"approvals.admin.oauth.sign_in.client_id: required"}},
		{adminHead, `{address: "127.0.0.1:0", oauth: {issuer: "https://i", audience: "https://a/", approver_groups: ["a"], sign_in: client_id: ""}}`,
			[]string{"approvals.admin.oauth.sign_in.client_id: an empty string is not a value here", "give the client id the provider registered"}},
		// An agent's token must not be an approver's.
		{oauthHead + `front: http: {address: "127.0.0.1:0", oauth: {resource: "https://mcp.example.com/", issuers: x: issuer: "https://i"}}` + "\n",
			`{address: "127.0.0.1:1", oauth: {issuer: "https://i", audience: "https://mcp.example.com", approver_groups: ["a"]}}`,
			[]string{"approvals.admin.oauth.audience: \"https://mcp.example.com\" is also front.http.oauth.resource"}},
	} {
		_, got := check(t, dir, tc.head+"approvals: admin: "+tc.admin+"\n", Options{Use: ForGateway, Trust: trusted})
		mustHave(t, got, tc.want...)
	}
}
