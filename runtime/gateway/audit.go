package gateway

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// Verdicts of a decision that audit mode served as allowed: the record
// keeps what the table decided (deny, or approve for a held call).
const (
	VerdictWouldDeny = "would_deny"
	VerdictWouldHold = "would_hold"
)

// ErrAuditUnserialed is the refusal of a table that sets audit on a
// server and has serial 0.
var ErrAuditUnserialed = errors.New("audit mode in a table of serial 0")

// audited returns the servers of t in audit mode, sorted.
func audited(t *table.Table) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(t.Servers)) {
		if t.Servers[name].Audit {
			out = append(out, name)
		}
	}
	return out
}

// checkAudit refuses a table of serial 0 (built from a work tree, not a
// commit) that sets audit on a server: audit serves what the rules deny,
// so only a table that names its commit may ask for it.
func checkAudit(t *decide.Table) error {
	if t.Serial() != 0 {
		return nil
	}
	if names := audited(t.Source()); len(names) > 0 {
		return fmt.Errorf("%w: servers %s are in audit mode, which serves every request the rules deny or hold, and the table has serial 0 (compiled from a work tree, not a commit); compile it from a commit, or remove audit: true",
			ErrAuditUnserialed, strings.Join(names, ", "))
	}
	return nil
}

// audit returns the decision to act on for d, t's decision for an item of
// server, and the verdict to record beside d: a server in audit mode has
// what its rules deny or hold served as allowed, with the verdict
// would_deny or would_hold. A table that has expired, or has serial 0,
// is never audited.
func audit(t *decide.Table, server string, d decide.Decision) (decide.Decision, string) {
	if d.Effect == table.Allow || d.Reason == decide.TableExpired || t.Serial() == 0 || !t.Source().Servers[server].Audit {
		return d, ""
	}
	verdict := VerdictWouldDeny
	if d.Effect == table.Approve {
		verdict = VerdictWouldHold
	}
	served := d
	served.Effect = table.Allow
	return served, verdict
}

// logAudited writes r, the record of a decision audit mode serves as
// served, and returns served; a deny when r could not be written.
func (g *Gateway) logAudited(r Record, served decide.Decision) (decide.Decision, error) {
	if err := g.cfg.Log.Log(&r); err != nil {
		g.logger.Error("decision log write failed", "error", err.Error())
		return decide.Decision{Effect: table.Deny}, errLogFailed
	}
	return served, nil
}
