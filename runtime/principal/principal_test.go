package principal

import (
	"slices"
	"strings"
	"testing"
)

func TestRef(t *testing.T) {
	for _, tc := range []struct {
		p    Parts
		ref  string
		name string
		dec  string
	}{
		{Parts{Name: "alice"}, "alice", "alice", "alice"},
		{Parts{Name: "bob", Groups: []string{"dev", "ops"}}, "bob groups=dev,ops", "bob", "bob groups=dev,ops"},
		{Parts{Name: "bob", Groups: []string{"ops"}, Issuer: "https://idp.example.com", Subject: "248 289"},
			"bob groups=ops iss=https://idp.example.com sub=248 289", "bob", "bob groups=ops"},
		{Parts{Name: "a@b.c", Issuer: "http://127.0.0.1:9", Subject: "x iss= sub=y"},
			"a@b.c iss=http://127.0.0.1:9 sub=x iss= sub=y", "a@b.c", "a@b.c"},
	} {
		ref := Ref(tc.p)
		if ref != tc.ref || Name(ref) != tc.name || Decided(ref) != tc.dec {
			t.Errorf("%+v: ref %q name %q decided %q", tc.p, ref, Name(ref), Decided(ref))
		}
		back := Parse(ref)
		if back.Name != tc.p.Name || !slices.Equal(back.Groups, tc.p.Groups) || back.Issuer != tc.p.Issuer || back.Subject != tc.p.Subject {
			t.Errorf("Parse(%q) = %+v, want %+v", ref, back, tc.p)
		}
		if g := Groups(ref); g != strings.Join(tc.p.Groups, ",") {
			t.Errorf("Groups(%q) = %q", ref, g)
		}
	}
}

func TestDecidedAllocatesNothing(t *testing.T) {
	ref := Ref(Parts{Name: "bob", Groups: []string{"ops"}, Issuer: "https://idp", Subject: "1"})
	if n := testing.AllocsPerRun(100, func() { _ = Decided(ref); _ = Name(ref) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

func TestSame(t *testing.T) {
	bob := Ref(Parts{Name: "bob", Issuer: "https://idp", Subject: "1"})
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"bob", "bob", true},
		{"bob", bob, true}, // a static approver bob, a requester bob from a token
		{bob, Ref(Parts{Name: "robert", Issuer: "https://idp", Subject: "1"}), true},
		{bob, Ref(Parts{Name: "carol", Issuer: "https://idp", Subject: "2"}), false},
		{bob, Ref(Parts{Name: "carol", Issuer: "https://other", Subject: "1"}), false},
		{"carol", bob, false},
	} {
		if got := Same(tc.a, tc.b); got != tc.same {
			t.Errorf("Same(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
}

func TestIsRef(t *testing.T) {
	for s, want := range map[string]bool{
		"alice":                             false,
		"":                                  false,
		"(a member of group contractors)":   false,
		"bob groups=ops":                    true,
		"bob iss=https://idp sub=1":         true,
		" groups=contractors":               true,
		Ref(Parts{Name: "b", Subject: "s"}): true,
		Ref(Parts{Name: "b", Groups: []string{"g"}}): true,
	} {
		if IsRef(s) != want {
			t.Errorf("IsRef(%q) = %v", s, !want)
		}
	}
}
