package table

import "fmt"

// The policy's vocabulary: the kinds of item a decision is about and the
// effects a decision can have. The table stores them as their names; the
// engine and the tools around it use these types.

// Effect is a decision's outcome, ordered by the access it grants.
type Effect uint8

// Effects. A lower value grants less; combining scopes keeps the lowest.
const (
	Deny Effect = iota
	Approve
	Allow
)

func (e Effect) String() string {
	switch e {
	case Deny:
		return "deny"
	case Approve:
		return "approve"
	case Allow:
		return "allow"
	}
	return fmt.Sprintf("effect(%d)", int(e))
}

// MarshalText prints effects as their table words.
func (e Effect) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// ParseEffect reads "deny", "approve" or "allow", as the table writes them.
func ParseEffect(s string) (Effect, bool) {
	switch s {
	case "deny":
		return Deny, true
	case "approve":
		return Approve, true
	case "allow":
		return Allow, true
	}
	return 0, false
}

// Kind is the kind of MCP item a decision is about.
type Kind uint8

// Kinds.
const (
	Tool Kind = iota
	Prompt
	Resource
	// NumKinds is the number of kinds, for arrays indexed by Kind.
	NumKinds
)

var kindNames = [NumKinds]string{"tool", "prompt", "resource"}

func (k Kind) String() string {
	if k < NumKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// ParseKind reads "tool", "prompt" or "resource".
func ParseKind(s string) (Kind, bool) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), true
		}
	}
	return 0, false
}
