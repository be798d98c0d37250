package gateway

import (
	"fmt"
	"strings"

	"github.com/policyc/policyc/runtime/table"
)

// Separator joins an upstream's name and one of its tool or prompt names
// into the name a client sees: "github" and "create_issue" become
// "github__create_issue".
//
// The split is at the first occurrence of the separator. Because an
// upstream name may not contain "__" nor end in "_" (CheckUpstreamName),
// that occurrence is always the one Join put there, whatever the item's own
// name holds, so every name round-trips exactly. Resources are not renamed:
// a URI already says where it points, and the gateway routes it to the
// upstream that listed it.
const Separator = "__"

// Join returns the name a client sees for item of upstream.
func Join(upstream, item string) string { return upstream + Separator + item }

// Split undoes Join. It reports false for a name that has no separator or
// an empty part; such a name names nothing.
func Split(name string) (upstream, item string, ok bool) {
	i := strings.Index(name, Separator)
	if i <= 0 || i+len(Separator) == len(name) {
		return "", "", false
	}
	return name[:i], name[i+len(Separator):], true
}

// splitAsked is Split for a name a client asked for: a name that routes
// nowhere is kept whole as the item's name, with no upstream, so the
// decision log records what was asked. No upstream is named "", so such a
// name is denied, and answered as absent.
func splitAsked(name string) (upstream, item string) {
	if s, i, ok := Split(name); ok {
		return s, i
	}
	return "", name
}

// CheckUpstreamName reports why name cannot name an upstream, or nil. The
// rules are those of a policy server name (it must match the table's
// mcp_servers key) plus the two that make Split exact.
func CheckUpstreamName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("an upstream name must not be empty")
	case !table.ValidName(name):
		return fmt.Errorf("upstream name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit (the name of the server in the policy's mcp_servers)", name)
	case strings.Contains(name, Separator):
		return fmt.Errorf("upstream name %q contains %q, the separator of namespaced tool and prompt names; rename the server (in the policy too)", name, Separator)
	case strings.HasSuffix(name, "_"):
		return fmt.Errorf("upstream name %q ends in '_', which would make namespaced names ambiguous; rename the server (in the policy too)", name)
	case name == ReservedServer:
		return fmt.Errorf("upstream name %q is reserved for the gateway's own tools (%s); rename the server (in the policy too)", name, WaitToolName)
	}
	return nil
}
