// Package decide is the decision engine: it loads a frozen decision table into
// an immutable structure and answers decisions from it.
//
// It never evaluates CUE, and it never loads an unverified table: the only
// entry points take bytes that a signature check has already accepted (see
// LoadVerified) or that the caller vouches for explicitly (Load, used by the
// compiler's own tools on a table it just built). A decision is a lookup:
// servers in a map, exact names in a table indexed by a signature of the
// name, globs compiled to automata; it allocates nothing.
package decide

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/policyc/policyc/internal/glob"
	"github.com/policyc/policyc/runtime/table"
)

// Reason says what kind of thing decided.
type Reason uint8

// Reasons.
const (
	// ByRule: a rule matched; Decision.Rule is set.
	ByRule Reason = iota
	// ByDefault: no rule of the deciding scope matched.
	ByDefault
	// UnknownServer: the table has no such server.
	UnknownServer
	// UnknownKind: not a tool, prompt or resource.
	UnknownKind
	// UINotAllowlisted: a ui:// resource off the server's ui allowlist.
	UINotAllowlisted
	// UINoConsent: a ui:// resource allowlisted, but no consent channel.
	UINoConsent
	// TableExpired: the table's expiry has passed; it decides nothing.
	TableExpired
	// URINotNormal: a resource URI allowed as written whose normal form
	// (decoded, cleaned) is denied: an upstream might read it as that
	// form.
	URINotNormal
)

var reasonNames = [...]string{"rule", "default", "unknown server", "unknown kind", "ui:// resource not allowlisted", "ui:// resource without a consent channel", "table expired", "uri not in normal form"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// MarshalText prints reasons as words.
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// Decision is the answer for one (principal, server, kind, name).
type Decision struct {
	Effect table.Effect
	Reason Reason
	// Scope is the scope whose rule or default decided: "server" for the
	// server's own rules, else "global", "group:NAME" or "principal:NAME".
	Scope string
	// Rule is the deciding rule, nil when a default (or no rule at all)
	// decided.
	Rule *table.Rule
	// Origin is the file:line of the deciding rule or default; empty for
	// the built-in deny.
	Origin string
	// ApprovalTimeoutSeconds and ApprovalChannel are set when Effect is
	// Approve: the shortest timeout of every scope that applies, and the
	// server's channel.
	ApprovalTimeoutSeconds int
	ApprovalChannel        string
	// Consent is set for an allowed ui:// resource: the read needs the
	// principal's consent through ConsentChannel (SEP-1865).
	Consent        bool
	ConsentChannel string
}

// ServerScope is the scope name of a server's own rules.
const ServerScope = "server"

// Table is a loaded decision table: immutable, safe for concurrent use.
type Table struct {
	src *table.Table
	// expires is the table's expiry, zero when it has none.
	expires time.Time
	// ready is closed when every automaton is built.
	ready chan struct{}
	// servers holds each server's own rules, by name.
	servers map[string]*server
	// anyone is what a principal with no group or principal scope sees.
	anyone *view
	// named holds the views of principals that have scopes of their own.
	named map[string]*view
	// layers holds every compiled layer, for buildAutomata.
	layers []*layer
	// comp builds views: at load, and for principal references after.
	comp *composer
}

// server is a server's own rules, one layer per kind, and its ui://
// allowlist: what every principal's decision starts from. The layers are
// held by value, so that a decision finds its own layer in the allocation
// the server map points to.
type server struct {
	kinds [table.NumKinds]layer
	ui    *uiList
}

// view is the decision structure of one class of principals. When its
// scopes narrow some server, it holds every server with the layers that
// narrow it; a view that narrows nothing holds none, and decisions take the
// table's servers.
type view struct {
	servers map[string]*viewServer
}

// viewServer is a server as a view decides it: its own layers, then the
// narrowing layers of each kind, in scope order.
type viewServer struct {
	*server
	narrowing [table.NumKinds][]*layer
}

// layer is one scope's compiled rules for one server and kind. The fields a
// decision reads come first, in one cache line with the start of set.
type layer struct {
	hot     []ruleHot // per rule, what a decision reads of it
	scope   string
	timeout int
	def     table.Effect
	set     glob.Set
	origin  string
	channel string
	rules   []table.Rule
	pats    []*glob.Pattern
}

// ruleHot is what a decision reads of a matching rule, in one place.
type ruleHot struct {
	origin string
	rule   *table.Rule
	effect table.Effect
}

type uiList struct {
	exact    map[string]bool
	prefixes []string
	consent  string
}

func (u *uiList) admits(uri string) bool {
	if u.exact[uri] {
		return true
	}
	for _, p := range u.prefixes {
		if strings.HasPrefix(uri, p) {
			return true
		}
	}
	return false
}

// Source returns the table as decoded. Callers must not modify it.
func (t *Table) Source() *table.Table { return t.src }

// Digest returns the table's content digest.
func (t *Table) Digest() string { return t.src.Digest }

// Serial returns the table's serial.
func (t *Table) Serial() uint64 { return t.src.Serial }

// Expires returns the table's expiry; ok is false when it has none.
func (t *Table) Expires() (at time.Time, ok bool) { return t.expires, !t.expires.IsZero() }

// Expired reports whether the table's expiry has passed at now. Decide
// does not look at it: a gateway denies everything once it has.
func (t *Table) Expired(now time.Time) bool {
	return !t.expires.IsZero() && !now.Before(t.expires)
}

// Decide returns the decision for principal calling (or listing, or
// fetching) name of kind on server. A resource URI is decided as written
// and in its normal form (see decideURI). It allocates nothing, but for a
// resource URI that may not be in normal form.
func (t *Table) Decide(principal, server string, kind table.Kind, name string) Decision {
	if kind == table.Resource {
		return t.decideURI(principal, server, name)
	}
	return t.decide(principal, server, kind, name)
}

// DecideWritten is Decide on name as written: a resource URI is not also
// decided in its normal form. It is for analyses of the rules themselves
// (which name a rule decides); a gateway calls Decide.
func (t *Table) DecideWritten(principal, server string, kind table.Kind, name string) Decision {
	return t.decide(principal, server, kind, name)
}

// decide is Decide on name as written.
func (t *Table) decide(principal, server string, kind table.Kind, name string) (d Decision) {
	if kind >= table.NumKinds {
		return Decision{Effect: table.Deny, Reason: UnknownKind}
	}
	srv, narrowing := t.serverOf(principal, server, kind)
	if srv == nil {
		return Decision{Effect: table.Deny, Reason: UnknownServer}
	}
	// The winner stays in registers; the Decision, a dozen words, is
	// built once, in place.
	win := &srv.kinds[kind]
	winRule := win.set.First(name)
	best := win.def
	if winRule >= 0 {
		best = win.hot[winRule].effect
	}
	timeout := max(win.timeout, 0) // as for every layer, only a positive timeout counts
	for _, l := range narrowing {
		rule := l.set.First(name)
		e := l.def
		if rule >= 0 {
			e = l.hot[rule].effect
		}
		if l.timeout > 0 && (timeout == 0 || l.timeout < timeout) {
			timeout = l.timeout
		}
		if e < best {
			best, win, winRule = e, l, rule
		}
	}
	d.Effect, d.Scope = best, win.scope
	if winRule >= 0 {
		d.Reason, d.Rule, d.Origin = ByRule, win.hot[winRule].rule, win.hot[winRule].origin
	} else {
		d.Reason, d.Origin = ByDefault, win.origin
	}
	if d.Effect == table.Approve {
		d.ApprovalTimeoutSeconds = timeout
		d.ApprovalChannel = srv.kinds[table.Tool].channel
	}
	if kind == table.Resource && d.Effect != table.Deny && strings.HasPrefix(name, "ui://") {
		switch {
		case srv.ui == nil || !srv.ui.admits(name):
			return Decision{Effect: table.Deny, Reason: UINotAllowlisted}
		case srv.ui.consent == "":
			return Decision{Effect: table.Deny, Reason: UINoConsent}
		}
		d.Consent, d.ConsentChannel = true, srv.ui.consent
	}
	return d
}

// serverOf returns server, nil if the table does not have it, and the
// layers that narrow its kind layer for principal.
func (t *Table) serverOf(principal, server string, kind table.Kind) (*server, []*layer) {
	if v := t.viewOf(principal); v.servers != nil {
		if vs := v.servers[server]; vs != nil {
			return vs.server, vs.narrowing[kind]
		}
		return nil, nil
	}
	return t.servers[server], nil
}

// viewOf returns the view of principal: its own if its scopes give it one,
// the view of its name and groups for a principal reference (refView),
// else the anonymous principal's (with no map lookup for that one).
func (t *Table) viewOf(principal string) *view {
	if principal == "" {
		return t.anyone
	}
	if isRef(principal) {
		return t.refView(principal)
	}
	if len(t.named) > 0 {
		if v := t.named[principal]; v != nil {
			return v
		}
	}
	return t.anyone
}

// Load builds the decision structure of a decoded table. It parses every
// pattern; a table with a pattern that does not parse is refused. Load does
// not verify signatures: the gateway reaches it only through LoadVerified.
//
// Load returns once the table is checked and can decide. The automata that
// make a decision a few table steps are built in the background, on every
// core, right after; until a block's automata are built its decisions are
// exact but made pattern by pattern. Ready reports when all are built.
func Load(src *table.Table) (*Table, error) {
	t, err := load(src)
	if err != nil {
		return nil, err
	}
	go t.buildAutomata()
	return t, nil
}

// LoadForInspection is Load for tools that make a handful of decisions
// (explain, blame, lint, freezing catalogue items): it builds no automata,
// so every decision is exact but made pattern by pattern, and no core is
// spent on speed that is never used. Its Ready is closed at once.
func LoadForInspection(src *table.Table) (*Table, error) {
	t, err := load(src)
	if err != nil {
		return nil, err
	}
	close(t.ready)
	return t, nil
}

// Class is what decides for a principal. Two principals of one class, for
// instance members of the same groups with no scope of their own, get the
// same decision for every request from the table they were classed by.
// Classes are comparable; the zero Class is no table's.
type Class struct{ v *view }

// ClassOf returns the class of principal.
func (t *Table) ClassOf(principal string) Class { return Class{t.viewOf(principal)} }

// Principals returns, sorted, the principals whose group or principal
// scopes give them decisions of their own; every other principal decides
// as the empty principal does.
func (t *Table) Principals() []string {
	out := make([]string, 0, len(t.named))
	for p := range t.named {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Ready is closed when every automaton of the table is built.
func (t *Table) Ready() <-chan struct{} { return t.ready }

// buildAutomata builds every layer's automata, on as many goroutines as
// there are cores, and closes ready.
func (t *Table) buildAutomata() {
	defer close(t.ready)
	work := make(chan *layer)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for l := range work {
				l.set.Build()
			}
		})
	}
	for _, l := range t.layers {
		work <- l
	}
	close(work)
	wg.Wait()
}

func load(src *table.Table) (*Table, error) {
	t := &Table{src: src, servers: map[string]*server{}, named: map[string]*view{}, ready: make(chan struct{})}
	if src.Expires != "" {
		at, err := time.Parse(time.RFC3339, src.Expires)
		if err != nil {
			return nil, fmt.Errorf("table: expires: %w", err)
		}
		t.expires = at
	}
	// Compile each scope's blocks once; views share them.
	for name, s := range src.Servers {
		srv := &server{}
		for k := table.Tool; k < table.NumKinds; k++ {
			a := s.Access(k)
			if a == nil {
				return nil, fmt.Errorf("table: server %q has no %s block", name, k)
			}
			if err := t.compileLayer(&srv.kinds[k], ServerScope, a); err != nil {
				return nil, fmt.Errorf("table: server %q %s: %w", name, k, err)
			}
		}
		if s.UI != nil {
			srv.ui = compileUI(s.UI, src.Channels)
		}
		t.servers[name] = srv
	}
	var scopes []scopeLayers
	for i := range src.Scopes {
		sc := &src.Scopes[i]
		sl := scopeLayers{Scope: sc, servers: map[string][table.NumKinds]*layer{}}
		for sname, s := range sc.Servers {
			var ks [table.NumKinds]*layer
			for k := table.Tool; k < table.NumKinds; k++ {
				a := s.Access(k)
				if a == nil {
					continue
				}
				ks[k] = new(layer)
				if err := t.compileLayer(ks[k], sc.Name, a); err != nil {
					return nil, fmt.Errorf("table: scope %s server %q %s: %w", sc.Name, sname, k, err)
				}
			}
			sl.servers[sname] = ks
		}
		scopes = append(scopes, sl)
	}
	// Principals to whom the same scopes apply decide alike: they share
	// one view, built once, keyed by the indexes of those scopes. The
	// indexes of each named principal's scopes are gathered in one pass
	// over the scopes and their members, so that loading costs the size of
	// the table, not principals × scopes.
	everyone, applies := table.ScopeIndexes(len(scopes), func(i int) table.Scope { return *scopes[i].Scope })
	c := newComposer(t, scopes, everyone, applies)
	t.comp = c
	var buf []int
	build := func(principal string) *view {
		// Both lists are in scope order; merge them.
		own := applies[principal]
		idx, g := buf[:0], 0
		for _, i := range own {
			for ; g < len(everyone) && everyone[g] < i; g++ {
				idx = append(idx, everyone[g])
			}
			idx = append(idx, i)
		}
		idx = append(idx, everyone[g:]...)
		buf = idx
		return c.view(idx)
	}
	t.anyone = build("")
	for _, sc := range scopes {
		var who []string
		switch {
		case strings.HasPrefix(sc.Name, "group:"):
			who = sc.Members
		case strings.HasPrefix(sc.Name, "principal:"):
			who = []string{strings.TrimPrefix(sc.Name, "principal:")}
		}
		for _, p := range who {
			if _, done := t.named[p]; !done && p != "" {
				t.named[p] = build(p)
			}
		}
	}
	return t, nil
}

// scopeLayers is a scope with its compiled layers, by server (or
// table.AllServers) and kind.
type scopeLayers struct {
	*table.Scope
	servers map[string][table.NumKinds]*layer
}

// build makes the view of the scopes idx (indexes into c.scopes, in scope
// order): every server with the layers of those scopes that narrow it, or
// no servers at all when none does.
func (c *composer) build(idx []int) *view {
	v, narrows := &view{servers: map[string]*viewServer{}}, false
	for name, srv := range c.t.servers {
		vs := &viewServer{server: srv}
		for _, i := range idx {
			for _, key := range [2]string{table.AllServers, name} {
				for k, l := range c.scopes[i].servers[key] {
					if l != nil && !l.neutral() {
						vs.narrowing[k] = append(vs.narrowing[k], l)
						narrows = true
					}
				}
			}
		}
		v.servers[name] = vs
	}
	if !narrows {
		v.servers = nil
	}
	return v
}

// neutral reports whether a narrowing layer can change no decision: no
// rules, nothing restricted, no timeout. Such layers are left out of the
// views, so a decision does not pay for them.
func (l *layer) neutral() bool {
	return len(l.rules) == 0 && l.def == table.Allow && l.timeout == 0
}

// compileLayer compiles into l one scope's block for one server and kind,
// and adds it to the layers whose automata buildAutomata builds.
func (t *Table) compileLayer(l *layer, scope string, a *table.Access) error {
	l.scope, l.rules, l.origin, l.timeout, l.channel = scope, a.Rules, a.DefaultOrigin, a.ApprovalTimeoutSeconds, a.ApprovalChannel
	var ok bool
	if l.def, ok = table.ParseEffect(a.Default); !ok || l.def == table.Approve {
		return fmt.Errorf("invalid default %q", a.Default)
	}
	pats := make([]*glob.Pattern, len(a.Rules))
	l.hot = make([]ruleHot, len(a.Rules))
	for i, r := range a.Rules {
		p, err := glob.Parse(r.Pattern)
		if err != nil {
			return fmt.Errorf("rule %d (%s): %w", i, r.Origin, err)
		}
		pats[i] = p
		l.hot[i].origin, l.hot[i].rule = r.Origin, &a.Rules[i]
		if l.hot[i].effect, ok = table.ParseEffect(r.Effect); !ok {
			return fmt.Errorf("rule %d (%s): invalid effect %q", i, r.Origin, r.Effect)
		}
	}
	l.pats = pats
	l.set.Init(pats)
	t.layers = append(t.layers, l)
	return nil
}

// compileUI builds a server's ui:// allowlist. A consent channel that is
// missing or reaches no human is dropped, so the resources stay denied.
func compileUI(ui *table.UI, channels map[string]table.Channel) *uiList {
	u := &uiList{exact: map[string]bool{}}
	if ch, ok := channels[ui.ConsentChannel]; ok && ch.ReachesHuman {
		u.consent = ui.ConsentChannel
	}
	for _, p := range ui.AllowList {
		switch {
		case strings.HasSuffix(p, "*"):
			u.prefixes = append(u.prefixes, strings.TrimSuffix(p, "*"))
		case strings.HasSuffix(p, "/"):
			u.prefixes = append(u.prefixes, p)
		default:
			u.exact[p] = true
		}
	}
	return u
}
