// Package principal spells who a request is decided for as one string.
//
// A principal is a name, as the policy writes it ("alice"). A client that
// authenticated with an identity provider's access token is also a name,
// the one its token's principal claim gives, and more: the policy groups
// its token's groups claim maps to, and the token's issuer and subject. A
// Ref carries all of that in one string, so that it travels wherever a
// principal's name does (a session's owner, a decision, a log line, an
// approval request):
//
//	bob groups=dev,ops iss=https://idp.example.com sub=248289761001
//
// The name comes first and ends at the first space, which no principal
// name has; "groups=" lists the groups, sorted, when there are any; "iss="
// and "sub=" follow, the subject last, so that it may hold any printable
// text. A plain name is a Ref with nothing after it. The decision engine
// reads the name and the groups (Decided); the rest is for people and
// logs, and tells two subjects of one name apart.
package principal

import (
	"strings"
)

// Parts are what a Ref holds.
type Parts struct {
	Name    string
	Groups  []string // sorted, without repeats
	Issuer  string
	Subject string
}

const (
	groupsKey  = " groups="
	issuerKey  = " iss="
	subjectKey = " sub="
)

// Ref spells p as a Ref. Groups must be sorted names without repeats, the
// issuer a URL; none of them may hold a space (the verifier and the
// policy's names see to that).
func Ref(p Parts) string {
	if len(p.Groups) == 0 && p.Issuer == "" && p.Subject == "" {
		return p.Name
	}
	var b strings.Builder
	b.WriteString(p.Name)
	if len(p.Groups) > 0 {
		b.WriteString(groupsKey)
		for i, g := range p.Groups {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(g)
		}
	}
	if p.Issuer != "" || p.Subject != "" {
		b.WriteString(issuerKey)
		b.WriteString(p.Issuer)
		b.WriteString(subjectKey)
		b.WriteString(p.Subject)
	}
	return b.String()
}

// IsRef says whether s is a reference with groups, an issuer or both, not
// a plain name. It allocates nothing.
func IsRef(s string) bool {
	i := strings.IndexByte(s, ' ')
	return i >= 0 && (strings.HasPrefix(s[i:], groupsKey) || strings.HasPrefix(s[i:], issuerKey))
}

// Name is the principal's name in ref.
func Name(ref string) string {
	if i := strings.IndexByte(ref, ' '); i >= 0 {
		return ref[:i]
	}
	return ref
}

// Decided is the part of ref decisions depend on: the name and the
// groups, without the issuer and the subject. It is a substring of ref:
// taking it allocates nothing.
func Decided(ref string) string {
	if i := strings.Index(ref, issuerKey); i >= 0 {
		return ref[:i]
	}
	return ref
}

// Groups is the comma-separated groups of ref, "" when it has none.
func Groups(ref string) string {
	d := Decided(ref)
	if i := strings.Index(d, groupsKey); i >= 0 {
		return d[i+len(groupsKey):]
	}
	return ""
}

// Issuer and Subject are ref's issuer and subject, "" when it has none.
// They are substrings of ref.
func Issuer(ref string) string {
	iss, _ := issuerSubject(ref)
	return iss
}

// Subject is ref's subject, "" when it has none.
func Subject(ref string) string {
	_, sub := issuerSubject(ref)
	return sub
}

func issuerSubject(ref string) (iss, sub string) {
	i := strings.Index(ref, issuerKey)
	if i < 0 {
		return "", ""
	}
	rest := ref[i+len(issuerKey):]
	if j := strings.Index(rest, subjectKey); j >= 0 {
		return rest[:j], rest[j+len(subjectKey):]
	}
	return rest, ""
}

// Parse splits ref into its parts.
func Parse(ref string) Parts {
	p := Parts{Name: Name(ref)}
	if g := Groups(ref); g != "" {
		p.Groups = strings.Split(g, ",")
	}
	p.Issuer, p.Subject = issuerSubject(ref)
	return p
}

// Same says whether a and b may be one person: the same name, or the
// same subject of the same issuer (whatever names their tokens gave).
// Approver and requester are compared with it.
func Same(a, b string) bool {
	pa, pb := Parse(a), Parse(b)
	if pa.Name == pb.Name {
		return true
	}
	return pa.Issuer != "" && pa.Issuer == pb.Issuer && pa.Subject == pb.Subject
}
