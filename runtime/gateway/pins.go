package gateway

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// pinIndex is one table's pins: per server, its pins mode and the pinned
// definition digests of its catalogued items. It is built once per table,
// on first use, and never changed.
type pinIndex struct {
	t       *decide.Table
	servers map[string]*serverPins
}

// serverPins are one server's pins.
type serverPins struct {
	// mode is table.PinsEnforce or table.PinsWarn; servers whose mode is
	// off are not in the index.
	mode string
	// byKind holds the pinned digests by name, per table.Kind.
	byKind [3]map[string]string
}

// pinState is the gateway's pins state: the index of the serving table
// and what drift has been reported.
type pinState struct {
	idx atomic.Pointer[pinIndex]

	mu sync.Mutex
	// reported holds, per drifted item (pinKey), the pair of digests last
	// reported and when that pair was first seen, so that each drift is
	// logged once per change and keeps the time it began.
	reported map[string]reportedDrift
	// reviewed holds, per item, the last live definition that matched its
	// pin, to tell what a later drift changed.
	reviewed map[string]any
	// drift is the drift being served or hidden now, for Drift.
	drift []Drift
	// auditFor is the table whose audit mode was last logged.
	auditFor *decide.Table
	// notify, when set, is told of every new drift (a signed webhook
	// delivery).
	notify func(context.Context, Drift)
	// sends holds the drift notifications waiting for a sender, made
	// with the senders on the first (sendDrift).
	sends     chan func()
	startSend sync.Once
}

// Drift notifications are sent by driftSenders goroutines, in the order
// found, with at most driftQueue waiting (a few hundred bytes each). A
// delivery to a webhook that does not answer takes a minute or more
// (retried with backoff), and an upstream whose definitions keep changing
// makes new drift at every listing: a notification past the queue is not
// sent (the drift is logged and in the status), so that no number of
// drifts makes as many goroutines, while a burst of them (an upstream
// that comes back with thousands of tools no catalogue has) to a webhook
// that answers is sent whole.
const (
	driftSenders = 4
	driftQueue   = 4096
)

// sendDrift queues f, a drift notification, for the senders, which run
// until ctx ends; it reports false when the queue is full.
func (ps *pinState) sendDrift(ctx context.Context, f func()) bool {
	ps.startSend.Do(func() {
		ps.sends = make(chan func(), driftQueue)
		for range driftSenders {
			go func() {
				for {
					select {
					case f := <-ps.sends:
						f()
					case <-ctx.Done():
						return
					}
				}
			}()
		}
	})
	select {
	case ps.sends <- f:
		return true
	default:
		return false
	}
}

// Drift is an item of an upstream whose live definition is not the one
// the table pins: changed since review, or not catalogued at all.
type Drift struct {
	// Time is when the gateway first saw this drift: the first listing
	// whose live digest was this one.
	Time   time.Time `json:"time"`
	Server string    `json:"server"`
	// Kind is "tool", "prompt" or "resource".
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Mode is the server's pins mode; Hidden says whether the item is
	// withheld (enforce, for tools and prompts) or served (warn, and
	// resources).
	Mode   string `json:"mode"`
	Hidden bool   `json:"hidden"`
	// Pinned is the table's digest, "" for an item not in the catalogue;
	// Live the digest of what the upstream lists now.
	Pinned string `json:"pinned,omitempty"`
	Live   string `json:"live"`
	// Difference is what changed, readable: the fields that differ from
	// the reviewed definition, with the description's text difference.
	Difference  string `json:"difference"`
	TableSerial uint64 `json:"table_serial"`
	TableDigest string `json:"table_digest"`
}

// reportedDrift is a drift's pair of digests and when it was first seen.
type reportedDrift struct {
	pair  string
	since time.Time
}

// DriftNotifier is an ApprovalGate that also delivers drift: the gateway
// tells it of each drift as it is first found, with the URLs of the
// table's webhook channels (the approval package's gate signs and sends
// them as it does approval requests).
type DriftNotifier interface {
	NotifyDrift(ctx context.Context, d Drift, webhooks []string)
}

// webhooks are the distinct URLs of t's webhook channels, sorted.
func webhooks(t *table.Table) []string {
	var out []string
	for _, ch := range t.Channels {
		if ch.Kind == table.ChannelWebhook && ch.URL != "" {
			out = append(out, ch.URL)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SetDriftNotify sets a function told of every drift as it is first
// found (for instance, a signed webhook delivery). It is called on its own
// goroutine.
func (g *Gateway) SetDriftNotify(f func(context.Context, Drift)) {
	g.pins.mu.Lock()
	g.pins.notify = f
	g.pins.mu.Unlock()
}

// Audited returns the servers the serving table has in audit mode.
func (g *Gateway) Audited() []string { return audited(g.table.Load().Source()) }

// Drift returns the items whose live definition differs from their pin,
// as found at the last listing of each upstream, sorted by server, kind
// and name.
func (g *Gateway) Drift() []Drift {
	g.pins.mu.Lock()
	defer g.pins.mu.Unlock()
	return slices.Clone(g.pins.drift)
}

// pinsOf returns the pins of table t.
func (g *Gateway) pinsOf(t *decide.Table) *pinIndex {
	if p := g.pins.idx.Load(); p != nil && p.t == t {
		return p
	}
	p := buildPins(t)
	g.pins.idx.Store(p)
	return p
}

func buildPins(t *decide.Table) *pinIndex {
	p := &pinIndex{t: t, servers: map[string]*serverPins{}}
	src := t.Source()
	for name, s := range src.Servers {
		if s.Pins == table.PinsEnforce || s.Pins == table.PinsWarn {
			sp := &serverPins{mode: s.Pins}
			for i := range sp.byKind {
				sp.byKind[i] = map[string]string{}
			}
			p.servers[name] = sp
		}
	}
	for _, it := range src.Items {
		sp := p.servers[it.Server]
		if sp == nil || it.Principal != "" {
			continue
		}
		if k, ok := table.ParseKind(it.Kind); ok && int(k) < len(sp.byKind) {
			sp.byKind[k][it.Name] = it.DefinitionDigest
		}
	}
	return p
}

// hides reports whether the pins withhold an item of server that c lists:
// the server's mode is enforce and the item's live definition digest is
// not the pinned one (or the item has no pin). Resources are never
// withheld: a server reads them by URI, listed or not. It is two map
// lookups and a comparison.
func (p *pinIndex) hides(server string, kind table.Kind, name string, c *catalogue) bool {
	sp := p.servers[server]
	if sp == nil || sp.mode != table.PinsEnforce || kind == table.Resource {
		return false
	}
	pin, ok := sp.byKind[kind][name]
	return !ok || pin == "" || pin != c.digest(kind, name)
}

// pinKey names an item in pinState's maps.
func pinKey(server string, kind table.Kind, name string) string {
	return server + "\x00" + kind.String() + "\x00" + name
}

// checkPins compares what every upstream lists with the serving table's
// pins, and logs (once per change) and keeps each item that drifted.
func (g *Gateway) checkPins() {
	t := g.table.Load()
	p := g.pinsOf(t)
	ps := &g.pins
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.reported == nil {
		ps.reported, ps.reviewed = map[string]reportedDrift{}, map[string]any{}
	}
	if ps.auditFor != t {
		ps.auditFor = t
		for _, name := range audited(t.Source()) {
			g.logger.Warn("server in audit mode: what its rules deny or hold is logged as would_deny or would_hold and served as allowed",
				"upstream", name, "table_serial", t.Serial(), "table_digest", t.Digest())
		}
	}
	now := g.now()
	var drift []Drift
	seen := map[string]bool{}
	var fresh []Drift
	for _, u := range g.ups {
		sp := p.servers[u.name]
		st := u.snapshot()
		if sp == nil || st.cat == nil {
			continue
		}
		check := func(kind table.Kind, name string, live any) {
			key := pinKey(u.name, kind, name)
			pin, pinned := sp.byKind[kind][name]
			got := st.cat.digest(kind, name)
			if pinned && pin != "" && pin == got {
				ps.reviewed[key] = live
				return
			}
			seen[key] = true
			isFresh := false
			if r := ps.reported[key]; r.pair != pin+" "+got {
				ps.reported[key] = reportedDrift{pair: pin + " " + got, since: now}
				isFresh = true
			}
			d := Drift{Time: ps.reported[key].since, Server: u.name, Kind: kind.String(), Name: name, Mode: sp.mode, Pinned: pin, Live: got,
				Hidden: p.hides(u.name, kind, name, st.cat), TableSerial: t.Serial(), TableDigest: t.Digest()}
			d.Difference = difference(pinned, ps.reviewed[key], live)
			drift = append(drift, d)
			if isFresh {
				fresh = append(fresh, d)
			}
		}
		for _, tl := range st.cat.tools {
			check(table.Tool, tl.Name, tl)
		}
		for _, pr := range st.cat.prompts {
			check(table.Prompt, pr.Name, pr)
		}
		for _, r := range st.cat.resources {
			check(table.Resource, r.URI, r)
		}
	}
	for key := range ps.reported {
		if !seen[key] {
			delete(ps.reported, key) // back to its pin, or gone: a new drift is new
		}
	}
	slices.SortFunc(drift, func(a, b Drift) int {
		return strings.Compare(a.Server+"\x00"+a.Kind+"\x00"+a.Name, b.Server+"\x00"+b.Kind+"\x00"+b.Name)
	})
	ps.drift = drift
	notSent := 0
	for _, d := range fresh {
		action := "served"
		if d.Hidden {
			action = "hidden: listed by no one and answered as absent"
		}
		g.logger.Warn("definition drift: the upstream's "+d.Kind+" is not the one the table pins",
			"upstream", d.Server, "kind", d.Kind, "name", catalog.ShowName(d.Name), "pins", d.Mode, "action", action,
			"pinned_digest", d.Pinned, "live_digest", d.Live, "difference", d.Difference,
			"table_serial", d.TableSerial, "table_digest", d.TableDigest)
		if notify := ps.notify; notify != nil && !ps.sendDrift(g.ctx, func() { notify(g.ctx, d) }) {
			notSent++
		}
		if n, ok := g.cfg.Approvals.(DriftNotifier); ok {
			if hooks := webhooks(t.Source()); len(hooks) > 0 && !ps.sendDrift(g.ctx, func() { n.NotifyDrift(g.ctx, d, hooks) }) {
				notSent++
			}
		}
	}
	if notSent > 0 {
		g.logger.Warn("drift notifications not sent: as many as the gateway keeps are waiting (a webhook that does not answer, or an upstream whose definitions keep changing); the drift is in this log and the gateway's status",
			"not_sent", notSent, "waiting", driftQueue)
	}
}

// difference says readably how live differs from the reviewed definition
// (nil when the gateway has not seen the reviewed one).
func difference(pinned bool, reviewed, live any) string {
	if !pinned {
		return "not in the catalogue the table was compiled with (a new tool, or a rename)"
	}
	var ws []string
	switch l := live.(type) {
	case *mcp.Tool:
		r, ok := reviewed.(*mcp.Tool)
		if !ok {
			break
		}
		a, errA := catalog.ToolFromMCP(r)
		b, errB := catalog.ToolFromMCP(l)
		if errA == nil && errB == nil {
			ws = catalog.DiffTool(a, b)
		}
	case *mcp.Prompt:
		if r, ok := reviewed.(*mcp.Prompt); ok {
			a, errA := catalog.PromptFromMCP(r)
			b, errB := catalog.PromptFromMCP(l)
			if errA == nil && errB == nil {
				ws = catalog.DiffPrompt(a, b)
			}
		}
	case *mcp.Resource:
		if r, ok := reviewed.(*mcp.Resource); ok {
			ws = catalog.DiffResource(catalog.ResourceFromMCP(r), catalog.ResourceFromMCP(l))
		}
	}
	if len(ws) == 0 {
		return "the definition differs from the reviewed one, which this gateway has not seen listed: compare with the server's catalogue snapshot (policyc catalog pull --check)"
	}
	return strings.Join(ws, "; ")
}
