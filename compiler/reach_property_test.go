package compiler

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/policyc/policyc/internal/glob"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// The property: for random small policies over a small alphabet, every rule
// the analysis calls unreachable decides no name in a brute-force
// enumeration, and every rule it calls reachable decides the name it gives
// as its witness. Decisions come from the real runtime, on the table Freeze
// builds.

// propTokens are the pieces patterns are made of; 'c' never appears in a
// pattern, so it stands for every other rune in the enumeration.
var propTokens = []string{"a", "b", "a", "b", "*", "?", "[ab]", "[!a]", "*", "a", "b", "*", "?", "[ab]", "[!a]", "*",
	"[!\u0000-\U0010FFFF]"} // the last one matches no rune

var propPrincipals = []string{"", "p1", "p2", "p3", "p4"}

// propAskers are propPrincipals and principals whose access token names
// groups (principal.Ref), listed or not: any principal may be in any set
// of groups at the gateway, and one group alone is the most a group's
// rules decide for.
var propAskers = append(slices.Clone(propPrincipals), " groups=g1", " groups=g2", "p1 groups=g2")

func propGlob(r *rand.Rand) string {
	n := 1 + r.IntN(3)
	var b strings.Builder
	for range n {
		b.WriteString(propTokens[r.IntN(len(propTokens))])
	}
	return b.String()
}

func propResourceGlob(r *rand.Rand) string {
	switch r.IntN(5) {
	case 0:
		return "ui://" + propGlob(r)
	case 1:
		return "ui://*"
	}
	return propGlob(r)
}

// propGen builds policies as the decoder would, without CUE, so thousands
// can be checked quickly. Every entry has its own line.
type propGen struct {
	r    *rand.Rand
	line int
}

func (g *propGen) pos() Position {
	g.line++
	return Position{File: "p.cue", Line: g.line, Column: 1}
}

func (g *propGen) list(path, key, kind string) *List {
	if g.r.IntN(3) == 0 {
		return nil
	}
	l := &List{Key: key, Path: path + "." + key, Pos: g.pos()}
	for range g.r.IntN(4) {
		pat := propGlob(g.r)
		if kind == table.Resource.String() {
			pat = propResourceGlob(g.r)
		}
		l.Entries = append(l.Entries, Entry{Pattern: pat, Glob: glob.MustParse(pat), Pos: g.pos(), Index: len(l.Entries)})
	}
	return l
}

func (g *propGen) access(path, kind string, narrowing bool) *Access {
	if g.r.IntN(4) == 0 {
		return nil
	}
	a := &Access{Path: path + "." + kind, Pos: g.pos()}
	if !narrowing && g.r.IntN(2) == 0 {
		a.Default = &Setting{Value: []string{table.Allow.String(), table.Deny.String()}[g.r.IntN(2)], Pos: g.pos()}
	}
	a.Deny = g.list(a.Path, "deny_list", kind)
	a.Allow = g.list(a.Path, "allow_list", kind)
	if kind == table.Tool.String() {
		a.Approval = g.list(a.Path, "approval_list", kind)
	}
	return a
}

func (g *propGen) scopeServer(path string, narrowKinds []string) *ScopeServer {
	ss := &ScopeServer{Pos: g.pos(), Access: map[string]*Access{}}
	for _, k := range narrowKinds {
		if a := g.access(path, k, true); a != nil {
			ss.Access[k] = a
		}
	}
	return ss
}

func (g *propGen) policy() *Policy {
	r := g.r
	kinds := []string{table.Tool.String(), table.Resource.String()}
	p := &Policy{
		Defaults:   map[string]Setting{},
		Channels:   map[string]*Channel{"page": {Name: "page", Kind: table.ChannelApprovalsPage, ReachesHuman: true}},
		Servers:    map[string]*Server{},
		Groups:     map[string]*Scope{},
		Principals: map[string]*Scope{},
	}
	if r.IntN(2) == 0 {
		p.Defaults[table.Tool.String()] = Setting{Value: table.Allow.String(), Pos: g.pos()}
	}
	if r.IntN(3) == 0 {
		p.Defaults[table.Resource.String()] = Setting{Value: table.Allow.String(), Pos: g.pos()}
	}
	for _, name := range []string{"s1", "s2"}[:1+r.IntN(2)] {
		s := &Server{Name: name, Pos: g.pos(), Access: map[string]*Access{}}
		for _, k := range kinds {
			if a := g.access("mcp_servers."+name+".access", k, false); a != nil {
				s.Access[k] = a
			}
		}
		if r.IntN(2) == 0 {
			s.UI = &UI{Pos: g.pos(), ConsentChannel: Setting{Value: "page"}}
			for _, u := range []string{"ui://a*", "ui://ab", "ui://b/", "ui://ba"} {
				if r.IntN(2) == 0 {
					s.UI.Allow = append(s.UI.Allow, Entry{Pattern: u, Pos: g.pos()})
				}
			}
		}
		p.Servers[name] = s
	}
	servers := slices.Sorted(maps.Keys(p.Servers))
	if r.IntN(2) == 0 {
		p.Global = &Scope{Name: "global", Servers: map[string]*ScopeServer{}}
		p.Global.Servers[table.AllServers] = g.scopeServer("global.access", kinds)
	}
	narrowing := func(sc *Scope, path string) {
		if r.IntN(2) == 0 {
			sc.Servers[table.AllServers] = g.scopeServer(path+".global.access", kinds)
		}
		for _, s := range servers {
			if r.IntN(2) == 0 {
				sc.Servers[s] = g.scopeServer(path+".mcp_servers."+s+".access", kinds)
			}
		}
	}
	for _, name := range []string{"g1", "g2"}[:r.IntN(3)] {
		sc := &Scope{Name: "group:" + name, Servers: map[string]*ScopeServer{}}
		for _, m := range propPrincipals[1:4] {
			if r.IntN(2) == 0 {
				sc.Members = append(sc.Members, m)
			}
		}
		narrowing(sc, "groups."+name)
		p.Groups[name] = sc
	}
	if r.IntN(2) == 0 {
		name := propPrincipals[1+r.IntN(4)]
		sc := &Scope{Name: "principal:" + name, Servers: map[string]*ScopeServer{}}
		narrowing(sc, "principals."+name)
		p.Principals[name] = sc
	}
	return p
}

// propNames are every name over {a, b, c} up to length 5, and the same up
// to length 3 behind ui://.
func propNames() []string {
	names := []string{""}
	var grow func(prefix string, n int)
	grow = func(prefix string, n int) {
		if n == 0 {
			return
		}
		for _, c := range "abc" {
			names = append(names, prefix+string(c))
			grow(prefix+string(c), n-1)
		}
	}
	grow("", 5)
	var ui []string
	for _, n := range names {
		if len(n) <= 3 {
			ui = append(ui, "ui://"+n)
		}
	}
	return append(names, ui...)
}

// frozenRule returns the table rule a verdict is about, and its block.
func frozenRule(t *testing.T, tab *table.Table, rr RuleReach) (*table.Access, *table.Rule) {
	t.Helper()
	var srv table.Server
	if rr.Scope == ServerScope {
		srv = tab.Servers[rr.Server]
	} else {
		for _, sc := range tab.Scopes {
			if sc.Name == rr.Scope {
				srv = sc.Servers[rr.Server]
			}
		}
	}
	a := srv.Kind(rr.Kind)
	if a == nil || rr.Index >= len(a.Rules) {
		t.Fatalf("no frozen rule for %+v", rr)
	}
	fr := &a.Rules[rr.Index]
	if fr.Pattern != rr.Entry.Pattern || fr.Effect != rr.Effect {
		t.Fatalf("verdict %s (%s %q) maps to frozen rule %s %q", rr.Path, rr.Effect, rr.Entry.Pattern, fr.Effect, fr.Pattern)
	}
	return a, fr
}

// decidesOracle reports whether the frozen rule fr (of block blk, narrowing
// allow when narrowAllow) decides name for principal on server, per the
// decide. Reachability is about names as written: a witness URI that is
// not in normal form (say "ui://b/") is decided as written.
func decidesOracle(rt *decide.Table, blk *table.Access, fr *table.Rule, scope string, narrowAllow bool, principal, server string, kind table.Kind, name string) bool {
	d := rt.DecideWritten(principal, server, kind, name)
	if !narrowAllow {
		return d.Rule == fr
	}
	if d.Effect == table.Deny || !slices.Contains(rt.Explain(principal, server, kind, name).Scopes, scope) {
		return false
	}
	for i := range blk.Rules {
		if glob.MustParse(blk.Rules[i].Pattern).Match(name) {
			return &blk.Rules[i] == fr
		}
	}
	return false
}

// gatewayDecides is decidesOracle at the gateway: the URI decided as the
// gateway decides it, in its other readings too (decide.Table.Decide).
func gatewayDecides(rt *decide.Table, blk *table.Access, fr *table.Rule, scope string, narrowAllow bool, principal, server string, kind table.Kind, name string) bool {
	d := rt.Decide(principal, server, kind, name)
	if d.Effect != table.Allow {
		return false
	}
	if !narrowAllow {
		return d.Rule == fr
	}
	return decidesOracle(rt, blk, fr, scope, narrowAllow, principal, server, kind, name)
}

// appliesToServer reports whether a verdict's block covers server.
func appliesToServer(rr RuleReach, server string) bool {
	return rr.Server == server || rr.Server == table.AllServers
}

var deadCodes = map[string]bool{
	CodeEmptyPattern: true, CodeDuplicatePattern: true, CodeShadowedRule: true, CodeApprovalNeverAsked: true,
	CodeAllowNeverAllows: true, CodeNarrowingNoEffect: true, CodeRedundantDeny: true, CodeUIResourceDenied: true,
}

func TestReachProperty(t *testing.T) {
	n := 400
	if testing.Short() {
		n = 100
	}
	if s := os.Getenv("POLICYC_REACH_PROPERTY_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	names := propNames()
	var reachable, unreachable int
	codes := map[string]int{}
	for seed := range n {
		g := &propGen{r: rand.New(rand.NewPCG(uint64(seed), 7))}
		p := g.policy()
		res := AnalyzeReach(p, ReachOptions{})
		tab := Freeze(p, table.Source{PolicyPath: "."}, 1)
		rt, err := decide.Load(tab)
		if err != nil {
			t.Fatalf("seed %d: load: %v", seed, err)
		}
		diagAt := map[Position][]string{}
		for _, d := range res.Diagnostics {
			diagAt[d.Pos] = append(diagAt[d.Pos], d.Code)
			codes[d.Code]++
		}
		for _, rr := range res.Rules {
			blk, fr := frozenRule(t, tab, rr)
			kind, _ := table.ParseKind(rr.Kind)
			narrowAllow := rr.Scope != ServerScope && rr.Effect == table.Allow.String()
			// ui-resource-denied also warns about a reachable allow entry
			// that admits some ui:// URIs the ui allowlist does not.
			hasDead, hasDeadOnly := false, false
			for _, c := range diagAt[rr.Entry.Pos] {
				hasDead = hasDead || deadCodes[c]
				hasDeadOnly = hasDeadOnly || deadCodes[c] && c != CodeUIResourceDenied
			}
			switch rr.Status {
			case ReachUnknown:
				t.Errorf("seed %d: %s %q: search gave up on a small policy", seed, rr.Path, rr.Entry.Pattern)
			case Reachable:
				reachable++
				if !decidesOracle(rt, blk, fr, rr.Scope, narrowAllow, rr.Principal, rr.WitnessServer, kind, rr.Witness) {
					t.Errorf("seed %d: %s %q called reachable, but it does not decide its witness %q on %s for principal %q\n%s",
						seed, rr.Path, rr.Entry.Pattern, rr.Witness, rr.WitnessServer, rr.Principal, dumpPolicy(tab))
				}
				if hasDeadOnly {
					t.Errorf("seed %d: %s %q is reachable but reported as dead: %v", seed, rr.Path, rr.Entry.Pattern, diagAt[rr.Entry.Pos])
				}
			case Unreachable:
				unreachable++
				for _, server := range slices.Sorted(maps.Keys(p.Servers)) {
					if !appliesToServer(rr, server) {
						continue
					}
					oracle := decidesOracle
					if rr.NotNormal {
						oracle = gatewayDecides
					}
					for _, principal := range propAskers {
						for _, name := range names {
							if oracle(rt, blk, fr, rr.Scope, narrowAllow, principal, server, kind, name) {
								t.Fatalf("seed %d: %s %q called unreachable, but it decides %q on %s for principal %q\n%s",
									seed, rr.Path, rr.Entry.Pattern, name, server, principal, dumpPolicy(tab))
							}
						}
					}
				}
				if !hasDead && !blockReported(res, p, rr) {
					t.Errorf("seed %d: %s %q is unreachable but no finding says so", seed, rr.Path, rr.Entry.Pattern)
				}
			}
		}
	}
	t.Logf("%d policies: %d rules reachable, %d unreachable; findings %v", n, reachable, unreachable, codes)
	if reachable == 0 || unreachable == 0 {
		t.Errorf("the generator must produce both verdicts")
	}
	for c := range deadCodes {
		if codes[c] == 0 {
			t.Errorf("the generator never produced a %s finding", c)
		}
	}
}

// blockReported reports whether the rule's whole block is dead for a reason
// reported once per block: a group with no members.
func blockReported(res *ReachResult, p *Policy, rr RuleReach) bool {
	if !strings.HasPrefix(rr.Scope, "group:") {
		return false
	}
	for _, d := range res.Diagnostics {
		if d.Code == CodeEmptyGroup && d.Path == "groups."+strings.TrimPrefix(rr.Scope, "group:")+".members" {
			return true
		}
	}
	return false
}

func dumpPolicy(tab *table.Table) string {
	var b strings.Builder
	dumpAccess := func(where string, a *table.Access) {
		if a == nil {
			return
		}
		fmt.Fprintf(&b, "  %s default=%s timeout=%d\n", where, a.Default, a.ApprovalTimeoutSeconds)
		for i, r := range a.Rules {
			fmt.Fprintf(&b, "    [%d] %s %q\n", i, r.Effect, r.Pattern)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(tab.Servers)) {
		srv := tab.Servers[s]
		dumpAccess("server "+s+" tool", srv.Tool)
		dumpAccess("server "+s+" resource", srv.Resource)
		if srv.UI != nil {
			fmt.Fprintf(&b, "  server %s ui %v consent=%q\n", s, srv.UI.AllowList, srv.UI.ConsentChannel)
		}
	}
	for _, sc := range tab.Scopes {
		for _, s := range slices.Sorted(maps.Keys(sc.Servers)) {
			srv := sc.Servers[s]
			dumpAccess(sc.Name+" "+s+" tool", srv.Tool)
			dumpAccess(sc.Name+" "+s+" resource", srv.Resource)
		}
		if len(sc.Members) > 0 {
			fmt.Fprintf(&b, "  %s members %v\n", sc.Name, sc.Members)
		}
	}
	return b.String()
}

// TestAffixesSound checks the cheap filter against the exact search: when
// affixes say two globs share no name, no name matches both.
func TestAffixesSound(t *testing.T) {
	tokens := []string{"a", "b", "*", "?", "[ab]", "[!a]", `\*`, `\\`, `\]`, "]", "[]a]", "[a-]", "ab", "ba"}
	r := rand.New(rand.NewPCG(1, 2))
	gen := func() string {
		var b strings.Builder
		for range 1 + r.IntN(4) {
			b.WriteString(tokens[r.IntN(len(tokens))])
		}
		return b.String()
	}
	rule := func(s string) *rrule {
		g, err := glob.Parse(s)
		if err != nil {
			return nil
		}
		x := &rrule{entry: &Entry{Pattern: s, Glob: g}}
		x.prefix, x.suffix = affixes(s)
		return x
	}
	checked := 0
	for range 20000 {
		p, q := rule(gen()), rule(gen())
		if p == nil || q == nil || !disjoint(p, q) {
			continue
		}
		checked++
		if name, ok, _ := glob.Witness(p.pat(), []*glob.Pattern{q.pat()}, func(m []bool) bool { return m[0] }); ok {
			t.Fatalf("affixes call %q and %q disjoint, but both match %q", p.entry.Pattern, q.entry.Pattern, name)
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d disjoint pairs checked", checked)
	}
}
