package identity

import (
	"fmt"
	"slices"
	"strings"
)

// mapped is what a token's claims give the gateway.
type mapped struct {
	principal string
	groups    []string
	scopes    []string
}

// claimError is a claim the gateway cannot use.
type claimError struct {
	reason Reason
	detail string
}

func (e *claimError) Error() string { return e.detail }

// maxGroups bounds the groups a token may list: a provider that sends
// more is misconfigured (or the token is not what it seems).
const maxGroups = 1024

// mapClaims reads the principal, the groups and the scopes from a
// verified token's claims, as issuer is configured to.
func mapClaims(claims map[string]any, is *Issuer) (*mapped, error) {
	var m mapped
	pv, ok := claim(claims, is.PrincipalClaim)
	if !ok {
		return nil, &claimError{MissingClaim, fmt.Sprintf("no %s claim, which names the principal", is.PrincipalClaim)}
	}
	p, ok := pv.(string)
	switch {
	case !ok:
		return nil, &claimError{BadClaim, fmt.Sprintf("claim %s is a %s, not a string naming the principal", is.PrincipalClaim, kindOf(pv))}
	case !validPrincipal(p):
		return nil, &claimError{BadClaim, fmt.Sprintf("claim %s is %s, not a principal name (letters, digits and . _ @ + : / -, starting with a letter or digit)", is.PrincipalClaim, quoteShort(p))}
	}
	m.principal = p
	if is.GroupsClaim != "" {
		gv, ok := claim(claims, is.GroupsClaim)
		if !ok && !is.GroupsOptional {
			return nil, &claimError{MissingClaim, fmt.Sprintf("no %s claim: the issuer is configured to send the token's groups in it (an empty list for none)", is.GroupsClaim)}
		}
		if ok {
			names, err := stringList(gv)
			if err != nil {
				return nil, &claimError{BadClaim, fmt.Sprintf("claim %s %v", is.GroupsClaim, err)}
			}
			if len(names) > maxGroups {
				return nil, &claimError{BadClaim, fmt.Sprintf("claim %s lists %d groups, more than %d", is.GroupsClaim, len(names), maxGroups)}
			}
			for _, n := range names {
				if g, ok := is.Groups[n]; ok {
					m.groups = append(m.groups, g)
				}
			}
			slices.Sort(m.groups)
			m.groups = slices.Compact(m.groups)
		}
	}
	// RFC 9068 (and 8693) spell it scope, one space-separated string;
	// some providers send scp, a string or an array.
	for _, name := range []string{"scope", "scp"} {
		v, ok := claims[name]
		if !ok {
			continue
		}
		switch s := v.(type) {
		case string:
			m.scopes = strings.Fields(s)
		default:
			list, err := stringList(v)
			if err != nil {
				return nil, &claimError{BadClaim, fmt.Sprintf("claim %s %v", name, err)}
			}
			m.scopes = list
		}
		break
	}
	return &m, nil
}

// claim looks name up in claims: as it is, else (a dotted name) through
// the objects its parts name, so that realm_access.roles reaches a
// nested list while a claim named https://example.com/groups is found as
// it is.
func claim(claims map[string]any, name string) (any, bool) {
	if v, ok := claims[name]; ok {
		return v, true
	}
	if !strings.Contains(name, ".") {
		return nil, false
	}
	var cur any = claims
	for part := range strings.SplitSeq(name, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// stringList reads a claim that lists strings: an array of strings, or
// one string (a provider sending a single group).
func stringList(v any) ([]string, error) {
	switch l := v.(type) {
	case string:
		return []string{l}, nil
	case []any:
		out := make([]string, 0, len(l))
		for i, e := range l {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("has a %s at index %d; it must list strings", kindOf(e), i)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("is a %s; it must be an array of strings", kindOf(v))
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// quoteShort quotes s for a message, cut to 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q…", s[:64])
	}
	return fmt.Sprintf("%q", s)
}
