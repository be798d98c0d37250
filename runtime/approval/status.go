package approval

import (
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/policyc/policyc/runtime/gateway"
	"github.com/policyc/policyc/runtime/table"
)

// GatewayStatus is the admin API's answer to GET /api/v1/status: what this
// gateway serves now, so that someone can tell a drift or an audit rollout
// from the admin side.
type GatewayStatus struct {
	// Time is when the status was taken.
	Time  time.Time   `json:"time"`
	Table TableStatus `json:"table"`
	// Audit lists the servers the serving table has in audit mode: what
	// their rules deny or hold is served, and logged as would_deny or
	// would_hold.
	Audit []string `json:"audit"`
	// Pinned lists the servers whose live definitions the table pins
	// (pins enforce or warn); none when it was compiled without a
	// catalogue snapshot. Absent from the status of earlier builds.
	Pinned []string `json:"pinned"`
	// Drift lists the items whose live definition is not the one the
	// table pins, as found at the last listing of each upstream.
	Drift []gateway.Drift `json:"drift"`
}

// TableStatus is the table a gateway serves.
type TableStatus struct {
	Serial uint64 `json:"serial"`
	Digest string `json:"digest"`
	// Expires is the table's expiry, absent when it has none.
	Expires *time.Time `json:"expires,omitempty"`
	// Expired says the expiry has passed: the gateway denies everything.
	Expired bool `json:"expired"`
}

// StatusOf returns gateway g's status at now: its serving table, the
// table's servers in audit mode, and its upstreams' drift.
func StatusOf(g *gateway.Gateway, now time.Time) GatewayStatus {
	t := g.Table()
	st := GatewayStatus{Time: now, Table: TableStatus{Serial: t.Serial(), Digest: t.Digest(), Expired: t.Expired(now)},
		Audit: []string{}, Pinned: []string{}, Drift: g.Drift()}
	if at, ok := t.Expires(); ok {
		st.Table.Expires = &at
	}
	// From t itself, not g.Audited: the audit and the serial shown are
	// then of one table, whatever a reload does meanwhile.
	for _, name := range slices.Sorted(maps.Keys(t.Source().Servers)) {
		srv := t.Source().Servers[name]
		if srv.Audit {
			st.Audit = append(st.Audit, name)
		}
		if srv.Pins == table.PinsEnforce || srv.Pins == table.PinsWarn {
			st.Pinned = append(st.Pinned, name)
		}
	}
	if st.Drift == nil {
		st.Drift = []gateway.Drift{}
	}
	return st
}

func (a *admin) apiStatus(r *http.Request, _ string) (any, error) {
	if a.status == nil {
		return nil, apiError(http.StatusNotFound, "this admin listener serves no gateway status (it is not mounted on a running gateway)")
	}
	for k := range r.URL.Query() {
		return nil, apiError(http.StatusBadRequest, "unknown query parameter %q: the status takes none", k)
	}
	return a.status(), nil
}
