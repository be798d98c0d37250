package principal

import (
	"slices"
	"strings"
	"testing"

	"github.com/policyc/policyc/runtime/table"
)

// FuzzRef: whatever a token's principal, groups, issuer and subject are
// (as far as the verifier and the configuration admit them: a principal
// name, group names, an issuer without spaces, a subject of any text), a
// reference reads back as what it was made of, and its decided part is
// the name and groups alone.
func FuzzRef(f *testing.F) {
	f.Add("bob", "dev,ops", "https://idp.example.com", "248289761001")
	f.Add("a@b.c", "", "http://127.0.0.1:9", "x iss= sub=y")
	f.Add("carol", "team", "", "")
	f.Add("", "contractors", "https://i", " groups=evil")
	f.Fuzz(func(t *testing.T, name, groups, issuer, subject string) {
		if name != "" && !table.ValidPrincipal(name) || strings.ContainsAny(issuer, " \t\n") || issuer == "" && subject != "" {
			return
		}
		var gs []string
		if groups != "" {
			gs = strings.Split(groups, ",")
			for _, g := range gs {
				if !table.ValidName(g) {
					return
				}
			}
			slices.Sort(gs)
			gs = slices.Compact(gs)
		}
		p := Parts{Name: name, Groups: gs, Issuer: issuer, Subject: subject}
		ref := Ref(p)
		back := Parse(ref)
		if back.Name != p.Name || !slices.Equal(back.Groups, p.Groups) || back.Issuer != p.Issuer || back.Subject != p.Subject {
			t.Fatalf("Parse(Ref(%+v)) = %+v (ref %q)", p, back, ref)
		}
		if want := Ref(Parts{Name: name, Groups: gs}); Decided(ref) != want {
			t.Fatalf("Decided(%q) = %q, want %q", ref, Decided(ref), want)
		}
		if !Same(ref, name) && name != "" {
			t.Fatalf("%q is not the same as its name %q", ref, name)
		}
	})
}
