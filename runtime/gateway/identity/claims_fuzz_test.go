package identity

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// FuzzMapClaims feeds mapClaims the claims of any JSON object: the
// principal it returns is a principal name, the groups are policy groups
// the mapping names, sorted and without repeats, and a scope has no
// space.
func FuzzMapClaims(f *testing.F) {
	for _, s := range []string{
		`{"sub":"agent-7","groups":["idp-ops","idp-dev","x"],"scope":"mcp tools"}`,
		`{"sub":"a","realm":{"roles":["idp-ops"]},"scp":["mcp"]}`,
		`{"sub":"a","groups":"idp-ops"}`,
		`{"sub":"a","groups":[1,"idp-ops"]}`,
		`{"sub":"","groups":[]}`,
		`{"email":"a@b.c","realm.roles":["idp-dev"],"scope":7}`,
		`{"sub":"a","realm":{"roles":{"idp-ops":true}}}`,
		`{"sub":"a b","groups":null}`,
	} {
		f.Add([]byte(s), "sub", "groups", false)
		f.Add([]byte(s), "email", "realm.roles", true)
	}
	mapping := map[string]string{"idp-ops": "ops", "idp-dev": "dev", "idp-oncall": "ops"}
	f.Fuzz(func(t *testing.T, data []byte, principalClaim, groupsClaim string, optional bool) {
		var claims map[string]any
		if json.Unmarshal(data, &claims) != nil || claims == nil {
			return
		}
		if principalClaim == "" {
			principalClaim = "sub"
		}
		is := &Issuer{PrincipalClaim: principalClaim, GroupsClaim: groupsClaim, Groups: mapping, GroupsOptional: optional}
		m, err := mapClaims(claims, is)
		if err != nil {
			ce, ok := err.(*claimError)
			if !ok || (ce.reason != MissingClaim && ce.reason != BadClaim) || ce.detail == "" {
				t.Fatalf("error %#v is not a claim refusal", err)
			}
			return
		}
		if !validPrincipal(m.principal) {
			t.Fatalf("principal %q is not a principal name", m.principal)
		}
		if !slices.IsSorted(m.groups) || len(slices.Compact(slices.Clone(m.groups))) != len(m.groups) {
			t.Fatalf("groups %q are not sorted and unique", m.groups)
		}
		for _, g := range m.groups {
			if g != "ops" && g != "dev" {
				t.Fatalf("group %q is none of the mapping's", g)
			}
		}
		if groupsClaim == "" && len(m.groups) > 0 {
			t.Fatalf("groups %q without a groups claim", m.groups)
		}
		for _, s := range m.scopes {
			if _, isString := claims["scope"].(string); isString && (s == "" || strings.ContainsAny(s, " \t\n")) {
				t.Fatalf("scope %q from a space-separated string", s)
			}
		}
	})
}
