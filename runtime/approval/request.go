package approval

import (
	"fmt"
	"time"
)

// Kind is what a request asks a human to decide.
type Kind string

// Kinds.
const (
	// KindTool: a tools/call the table holds for approval.
	KindTool Kind = "tool"
	// KindConsent: a read of an allowlisted ui:// resource (SEP-1865)
	// that needs the principal's consent.
	KindConsent Kind = "consent"
)

// Status is where a request is in its life. A request starts pending and
// ends, exactly once, approved, denied or expired.
type Status string

// Statuses.
const (
	Pending  Status = "pending"
	Approved Status = "approved"
	Denied   Status = "denied"
	// Expired: no one decided in time, or every call held for it ended
	// before a decision (the client went away, the gateway restarted).
	Expired Status = "expired"
)

// Request is one approval request, as the store keeps it and the admin API
// shows it. It never holds a call's arguments, only a Preview of them.
type Request struct {
	ID     string `json:"id"`
	Kind   Kind   `json:"kind"`
	Status Status `json:"status"`
	// Principal asked; Server and Tool (or URI, for consent) are the
	// upstream's own names.
	Principal string `json:"principal"`
	Server    string `json:"server"`
	Tool      string `json:"tool,omitempty"`
	URI       string `json:"uri,omitempty"`
	// Fingerprint is "sha256:" and the hex SHA-256 of the canonical
	// arguments: what an approval once is bound to, and what identical
	// calls fold by. It lives in memory only: it is never stored, logged or
	// shown, because the fingerprint of small arguments can be reversed by
	// guessing, which would reveal what the preview leaves out (or all of
	// the arguments, with previews off).
	Fingerprint string `json:"-"`
	// Preview is nil when previews are off for the server (PreviewOff).
	Preview    *Preview `json:"preview,omitempty"`
	PreviewOff bool     `json:"preview_off,omitempty"`
	// Origin is the file:line of the rule that asked for approval.
	Origin string `json:"origin,omitempty"`
	// Channel is the table's channel for the server; Delivery how
	// notifying it went (nil for the approvals page, which needs none).
	Channel  string    `json:"channel"`
	Delivery *Delivery `json:"delivery,omitempty"`
	// Client is the agent's name and version as its MCP client reported
	// them; Session the MCP session it asked in. Either may be empty.
	Client  string `json:"client,omitempty"`
	Session string `json:"session,omitempty"`
	// TableSerial and TableDigest identify the table that held the call.
	TableSerial uint64    `json:"table_serial"`
	TableDigest string    `json:"table_digest,omitempty"`
	Created     time.Time `json:"created"`
	Expires     time.Time `json:"expires"`
	// Calls counts the calls held for this request: the first and every
	// identical one folded into it.
	Calls int `json:"calls"`
	// Decision is set once the request is approved or denied.
	Decision *Decision `json:"decision,omitempty"`
	// Ended is when the request stopped being pending; End says why when
	// it expired.
	Ended time.Time `json:"ended,omitzero"`
	End   string    `json:"end,omitempty"`
	// Ran is set for an approval once: what became of it. "ran" when the
	// held call was dispatched; otherwise why it was not.
	Ran string `json:"ran,omitempty"`
	// rev is the request's revision in a shared store (0 in the file
	// store): a change is recorded only over the revision it was made
	// from.
	rev int64
}

// Decision is a human's answer to a request.
type Decision struct {
	// Verdict is "approve" or "deny".
	Verdict string `json:"verdict"`
	// For is how long an approval lasts: "once", "1h", "8h" or "7d" for a
	// tool, "remember" for consent. Until is when a duration ends.
	For   string    `json:"for,omitempty"`
	Until time.Time `json:"until,omitzero"`
	// By is the approver (the name of the admin token), From where the
	// decision came: "page" or "api", and the remote address.
	By     string    `json:"by"`
	From   string    `json:"from"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
	// Revoked ends a duration approval or a consent early.
	Revoked *Revocation `json:"revoked,omitempty"`
}

// Revocation records who ended a remembered approval, when, from where.
type Revocation struct {
	By   string    `json:"by"`
	From string    `json:"from"`
	At   time.Time `json:"at"`
}

// Delivery is how notifying a webhook channel went.
type Delivery struct {
	// State is "sending", "delivered" or "failed".
	State    string    `json:"state"`
	Attempts int       `json:"attempts"`
	At       time.Time `json:"at,omitzero"`
	Error    string    `json:"error,omitempty"`
}

// Verdicts.
const (
	VerdictApprove = "approve"
	VerdictDeny    = "deny"
)

// Durations an approval can be given for. "once" is consumed by exactly
// one call; the others cover every later call of the tool by the principal
// until they end or are revoked.
const (
	ForOnce     = "once"
	ForHour     = "1h"
	ForWorkday  = "8h"
	ForWeek     = "7d"
	ForRemember = "remember"
)

// Durations lists the approval durations from shortest to longest.
var Durations = []string{ForOnce, ForHour, ForWorkday, ForWeek}

// DurationOf returns how long an approval for d lasts; 0 for once.
func DurationOf(d string) (time.Duration, error) {
	switch d {
	case ForOnce:
		return 0, nil
	case ForHour:
		return time.Hour, nil
	case ForWorkday:
		return 8 * time.Hour, nil
	case ForWeek:
		return 7 * 24 * time.Hour, nil
	}
	return 0, fmt.Errorf("%q is not an approval duration; use once, 1h, 8h or 7d", d)
}

// Active reports whether r is a remembered approval (a duration approval or
// a consent) still in force at now.
func (r *Request) Active(now time.Time) bool {
	d := r.Decision
	if r.Status != Approved || d == nil || d.Revoked != nil {
		return false
	}
	switch d.For {
	case ForRemember:
		return true
	case ForOnce, "":
		return false
	}
	return now.Before(d.Until)
}

// clone returns a deep copy of r, safe to hand out.
func (r *Request) clone() Request {
	c := *r
	if r.Decision != nil {
		d := *r.Decision
		if d.Revoked != nil {
			rv := *d.Revoked
			d.Revoked = &rv
		}
		c.Decision = &d
	}
	if r.Delivery != nil {
		dl := *r.Delivery
		c.Delivery = &dl
	}
	// Preview is never modified once made, so it is shared.
	return c
}
