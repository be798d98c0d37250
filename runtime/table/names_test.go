package table

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// TestNamesMatchSchema checks ValidName and ValidPrincipal against the
// policy schema's patterns (schema/policy.cue #Name and #PrincipalName).
func TestNamesMatchSchema(t *testing.T) {
	name := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	principal := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+:/-]*$`)
	cases := []string{"", "a", "github", "srv-1.x_y", "-a", ".a", "a b", "carol@example.com", "spiffe://x/y", "a+b:c", "@a", "é", "a\x00", "a\n"}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "aZ09._-@+:/ é*\x00"
	for range 5000 {
		b := make([]byte, rng.IntN(6))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := ValidName(s), name.MatchString(s); got != want {
			t.Errorf("ValidName(%q) = %v; the schema says %v", s, got, want)
		}
		if got, want := ValidPrincipal(s), principal.MatchString(s); got != want {
			t.Errorf("ValidPrincipal(%q) = %v; the schema says %v", s, got, want)
		}
	}
}
