package compiler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/policyc/policyc/internal/clip"
	"github.com/policyc/policyc/internal/glob"
	"github.com/policyc/policyc/runtime/principal"
	"github.com/policyc/policyc/runtime/table"
)

// DefaultMaxApprovalTimeout is the longest life of an approval request, in
// seconds, that approval-timeout-too-long accepts unless the lint
// configuration says otherwise: a working day; a request open longer is
// usually forgotten by the agent and its user alike. A request's life is
// not how long a call waits in place: the gateway answers a held call
// before hosts give up on it, and the agent waits for the request through
// the gateway's wait tool.
const DefaultMaxApprovalTimeout = 28800

// ReachOptions tunes the reachability analysis.
type ReachOptions struct {
	// MaxApprovalTimeout is the longest life of an approval request, in
	// seconds, the team allows; 0 means DefaultMaxApprovalTimeout.
	MaxApprovalTimeout int
	// Budget bounds the work of the analysis, in glob.Budget units; 0
	// means ReachBudget.
	Budget int64
}

// Reachability is the verdict on one rule.
type Reachability uint8

// Verdicts.
const (
	// ReachUnknown: a search gave up (see glob.Witness), or the analysis
	// had spent ReachBudget; reach-incomplete reports such rules, once.
	ReachUnknown Reachability = iota
	// Reachable: the rule decides at least one name for some principal.
	Reachable
	// Unreachable: the rule decides no name for any principal.
	Unreachable
)

func (r Reachability) String() string {
	switch r {
	case Reachable:
		return "reachable"
	case Unreachable:
		return "unreachable"
	}
	return "unknown"
}

// RuleReach is the verdict on one entry of a deny_list, approval_list or
// allow_list, in one block (scope, server, kind).
type RuleReach struct {
	Entry *Entry
	// Path is the entry's key path, e.g.
	// mcp_servers.github.access.tool.allow_list[2].
	Path string
	// Scope is "server" for a server's own rules, else the narrowing scope:
	// "global", "group:NAME" or "principal:NAME".
	Scope string
	// Server is the server of the block, or table.AllServers.
	Server string
	Kind   string
	// Effect is table.Deny.String(), table.Approve.String() or table.Allow.String().
	Effect string
	// Index is the rule's position in its frozen block (deny, approve,
	// allow, each in source order).
	Index  int
	Status Reachability
	// When Reachable: a principal ("" stands for any principal with no
	// group or scope of its own, " groups=NAME", a principal.Ref, for
	// one in group NAME by its access token alone), a server and a name
	// this rule decides.
	Principal, WitnessServer, Witness string
	// NotNormal is set on an Unreachable resource allow entry that decides
	// URIs as written, none of which the gateway allows: every one is out
	// of normal form, and a reading of it is denied (decide.Table.Decide).
	NotNormal bool
}

// ReachResult is the outcome of the analysis.
type ReachResult struct {
	// Rules holds one verdict per rule, in block order.
	Rules []RuleReach
	// Diagnostics are the findings, unsorted.
	Diagnostics []Diagnostic
}

// ServerScope is the scope name of a server's own rules, as the runtime
// names it.
const ServerScope = "server"

// Reach runs the reachability analysis with default options and returns its
// findings. Compile calls it on every policy without type errors.
func Reach(p *Policy) []Diagnostic { return AnalyzeReach(p, ReachOptions{}).Diagnostics }

// AnalyzeReach finds the rules of p that cannot take effect.
//
// A rule decides a name for a principal when the gateway's decision for it
// names that rule (runtime Decision.Rule). A narrowing scope's allow entry
// never grants anything by itself: it decides a name when it is the first
// rule of its block that matches and the final decision is not deny (it is
// what keeps its allow_list from denying the name). Any principal may be in
// any groups (an access token names them), so a group's rules are judged for
// a principal in that group alone. A rule that decides no name for any
// principal is reported, with the reason: it is empty, a duplicate, shadowed
// within its block, or beaten in every case by another scope or by the ui://
// allowlist; a resource allow entry also when it matches only URIs out of
// normal form whose normal forms no rule allows (checkNormal).
//
// The analysis is exact (glob.Witness over the patterns of the scopes that
// apply) and runs block by block: a rule is only ever compared with the
// rules of the blocks that decide together with it, never with the whole
// policy.
func AnalyzeReach(p *Policy, opts ReachOptions) *ReachResult {
	if opts.MaxApprovalTimeout <= 0 {
		opts.MaxApprovalTimeout = DefaultMaxApprovalTimeout
	}
	if opts.Budget <= 0 {
		opts.Budget = ReachBudget
	}
	a := newAnalyzer(p)
	a.search.Budget = glob.NewBudget(opts.Budget)
	for _, b := range a.blocks {
		a.analyzeBlock(b)
	}
	a.reportDeadUIEntries()
	a.reportIncomplete()
	a.res.Diagnostics = append(a.res.Diagnostics, ApprovalTimeoutDiagnostics(p, opts.MaxApprovalTimeout)...)
	return a.res
}

type effect uint8

const (
	effDeny effect = iota
	effApprove
	effAllow
)

func effectOf(s string) effect {
	switch s {
	case table.Deny.String():
		return effDeny
	case table.Approve.String():
		return effApprove
	}
	return effAllow
}

func (e effect) String() string {
	return [...]string{table.Deny.String(), table.Approve.String(), table.Allow.String()}[e]
}

// verb says what a decision of e does to a name.
func (e effect) verb() string {
	return [...]string{"denied", "held for approval", "allowed"}[e]
}

// rrule is one rule of a block.
type rrule struct {
	entry *Entry
	list  *List
	pos   int // index in the block
	eff   effect
	path  string
	lit   string
	isLit bool
	// prefix and suffix are literal text every name the rule matches
	// starts and ends with (see affixes).
	prefix, suffix string
	// shape is what the rule's literal text tells of the URIs it matches
	// (shapeOf), once read.
	shape     *uriShape
	shapeRead bool
}

func (r *rrule) pat() *glob.Pattern { return r.entry.Glob }

// readPattern sets what the block's index reads of the rule's pattern: its
// literal, if it is one, and its literal prefix and suffix.
func (r *rrule) readPattern() {
	// A literal with U+FFFD also matches names with invalid UTF-8 (see
	// package glob): it is searched like a glob.
	r.lit, r.isLit = r.entry.Glob.Literal()
	r.isLit = r.isLit && !strings.ContainsRune(r.lit, utf8.RuneError)
	r.prefix, r.suffix = affixes(r.entry.Pattern)
}

func (r *rrule) match(name string) bool {
	if r.isLit {
		return r.lit == name
	}
	return r.entry.Glob.Match(name)
}

// describe names a rule in a message: its key path, pattern and position.
func (r *rrule) describe() string {
	return fmt.Sprintf("%s %s (%s)", r.path, clip.Quote(r.entry.Pattern), r.entry.Pos)
}

// rblock is the rules of one scope for one server (or all) and kind.
type rblock struct {
	scope     *Scope // nil for a server's own rules
	scopeName string
	server    string
	kind      string
	access    *Access
	rules     []*rrule
	def       effect
	defPos    Position
	narrowing bool
	// known is false for a narrowing block of a server mcp_servers does
	// not define: it never applies (unknown-server says so).
	known bool
	// lits holds, for each literal, the first rule that spells it; globs
	// are the other rules, in order (setRules). A name's first rule is
	// then its literal's or an earlier glob's: a block of thousands of
	// literals is searched through its few globs, not rule by rule.
	lits  map[string]*rrule
	globs []*rrule
	// byKey holds the rules by their prefix key, then by their suffix key
	// (see indexKeys); keys are the distinct prefix keys, sorted, and
	// keyLens their distinct lengths, ascending. A name is matched only by
	// rules whose keys it starts and ends with, so a block of thousands of
	// globs with distinct prefixes (t1_*, t2_*, ...) or suffixes (*_t1,
	// *_t2, ...) is searched through a few of them.
	byKey   map[string]*suffixIndex
	keys    []string
	keyLens []int
	// work counts, in glob.Budget units, the comparisons of rules with a
	// name or with another rule (first, earlier, newQuery), for the
	// analysis to charge to its budget.
	work *int64
}

// suffixIndex holds the rules of one prefix key by their suffix key, each
// list in block order: revs are the distinct suffix keys reversed, sorted,
// with their rules in buckets; lens their distinct lengths, ascending.
type suffixIndex struct {
	bySuffix map[string][]*rrule
	revs     []string
	buckets  [][]*rrule
	lens     []int
}

// indexKeys are the texts every name r matches starts and ends with, as
// bytes: the literal prefix and suffix, each cut at a U+FFFD, which also
// matches invalid UTF-8.
func indexKeys(r *rrule) (prefix, suffix string) {
	prefix, suffix = r.prefix, r.suffix
	if i := strings.IndexRune(prefix, utf8.RuneError); i >= 0 {
		prefix = prefix[:i]
	}
	if i := strings.LastIndex(suffix, string(utf8.RuneError)); i >= 0 {
		suffix = suffix[i+len(string(utf8.RuneError)):]
	}
	return prefix, suffix
}

func reverse(s string) string {
	b := []byte(s)
	slices.Reverse(b)
	return string(b)
}

// indexedBlock is the number of rules from which a block's rules are
// indexed by their affixes; a smaller block is scanned in order, which
// costs less memory than the index would and, at that size, hardly more
// time.
const indexedBlock = 256

// setRules sets b's rules and indexes them for first and earlier.
func (b *rblock) setRules(rules []*rrule) {
	b.rules = rules
	b.lits = make(map[string]*rrule, len(rules))
	for _, r := range rules {
		if !r.isLit {
			b.globs = append(b.globs, r)
		} else if b.lits[r.lit] == nil {
			b.lits[r.lit] = r
		}
	}
	if len(rules) < indexedBlock {
		return
	}
	b.byKey = map[string]*suffixIndex{}
	lens := map[int]bool{}
	for _, r := range rules {
		p, sfx := indexKeys(r)
		x := b.byKey[p]
		if x == nil {
			x = &suffixIndex{bySuffix: map[string][]*rrule{}}
			b.byKey[p] = x
			b.keys = append(b.keys, p)
			lens[len(p)] = true
		}
		x.bySuffix[sfx] = append(x.bySuffix[sfx], r)
	}
	slices.Sort(b.keys)
	b.keyLens = slices.Sorted(maps.Keys(lens))
	for _, x := range b.byKey {
		sufLens := map[int]bool{}
		for sfx := range x.bySuffix {
			x.revs = append(x.revs, reverse(sfx))
			sufLens[len(sfx)] = true
		}
		slices.Sort(x.revs)
		for _, rev := range x.revs {
			x.buckets = append(x.buckets, x.bySuffix[reverse(rev)])
		}
		x.lens = slices.Sorted(maps.Keys(sufLens))
	}
}

// count adds n to the work counter.
func (b *rblock) count(n int) {
	if b.work != nil {
		*b.work += int64(n)
	}
}

// first returns the first rule of b matching name, or nil.
func (b *rblock) first(name string) *rrule {
	best := b.lits[name]
	if b.byKey == nil {
		for _, r := range b.globs {
			if best != nil && r.pos > best.pos {
				break
			}
			b.count(int(matchCost(name, r)))
			if r.match(name) {
				return r
			}
		}
		return best
	}
	for _, lp := range b.keyLens {
		if lp > len(name) {
			break
		}
		x := b.byKey[name[:lp]]
		if x == nil {
			continue
		}
		b.count(1)
		for _, ls := range x.lens {
			if ls > len(name) {
				break
			}
			for _, r := range x.bySuffix[name[len(name)-ls:]] {
				if best != nil && r.pos > best.pos {
					break
				}
				if r.isLit {
					continue
				}
				b.count(int(matchCost(name, r)))
				if r.match(name) {
					best = r
					break
				}
			}
		}
	}
	return best
}

// earlier returns the rules of b before r that may match a name r
// matches, as far as their affixes tell (see disjoint), in block order.
func (b *rblock) earlier(r *rrule) []*rrule {
	var out []*rrule
	consider := func(rs []*rrule) {
		for _, o := range rs {
			if o.pos >= r.pos {
				break
			}
			b.count(1)
			if !o.pat().Empty() && !disjoint(r, o) && (!o.isLit || r.pat().Match(o.lit)) {
				out = append(out, o)
			}
		}
	}
	if b.byKey == nil {
		consider(b.rules)
		return out
	}
	// Of the rules of one prefix key: those whose suffix key ends r's
	// suffix, then those whose suffix key ends with r's suffix.
	bySuffix := func(x *suffixIndex) {
		for _, l := range x.lens {
			if l > len(r.suffix) {
				break
			}
			consider(x.bySuffix[r.suffix[len(r.suffix)-l:]])
		}
		rev := reverse(r.suffix)
		i, _ := slices.BinarySearch(x.revs, rev)
		for ; i < len(x.revs) && strings.HasPrefix(x.revs[i], rev); i++ {
			b.count(1)
			if len(x.revs[i]) > len(rev) {
				consider(x.buckets[i])
			}
		}
	}
	// Rules whose prefix key r's prefix starts with, then those whose
	// prefix key goes on from r's prefix.
	for _, l := range b.keyLens {
		if l > len(r.prefix) {
			break
		}
		if x := b.byKey[r.prefix[:l]]; x != nil {
			bySuffix(x)
		}
	}
	i, _ := slices.BinarySearch(b.keys, r.prefix)
	for ; i < len(b.keys) && strings.HasPrefix(b.keys[i], r.prefix); i++ {
		b.count(1)
		if len(b.keys[i]) > len(r.prefix) {
			bySuffix(b.byKey[b.keys[i]])
		}
	}
	slices.SortFunc(out, func(x, y *rrule) int { return x.pos - y.pos })
	return out
}

func (b *rblock) eval(name string) effect {
	if r := b.first(name); r != nil {
		return r.eff
	}
	return b.def
}

// class is a set of principals to whom the same narrowing scopes apply.
type class struct {
	// principal is a representative: a listed principal, "" for
	// principals with no scope, or a principal.Ref with groups only for
	// a principal in one group by its token (tokens).
	principal string
	scopes    []*Scope
	has       map[*Scope]bool
	// rare is the scope of scopes that applies to the fewest classes.
	rare *Scope
}

// uiList is a server's ui:// allowlist as the runtime applies it.
type uiList struct {
	exact    map[string]bool
	prefixes []string
	consent  bool
	globs    []*glob.Pattern
}

const uiPrefix = "ui://"

// pass reports whether a decision other than deny survives the ui://
// check for name.
func (u *uiList) pass(name string) bool {
	if !strings.HasPrefix(name, uiPrefix) {
		return true
	}
	if u == nil || !u.consent {
		return false
	}
	if u.exact[name] {
		return true
	}
	for _, p := range u.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

type blockKey struct {
	scope        *Scope
	server, kind string
}

type analyzer struct {
	p       *Policy
	servers []string
	base    map[string]map[string]*rblock // server, kind
	narrow  map[blockKey]*rblock
	blocks  []*rblock // in report order: base, then scopes
	anyone  *class
	classes []*class // classes of named principals
	// tokens are the classes of principals in one group by their access
	// token alone, one per group no listed principal's class already is.
	tokens []*class
	scoped map[*Scope]*scopeClasses
	ui     map[string]*uiList
	uiAll  *glob.Pattern
	res    *ReachResult
	// clean holds the answers of cleanAllowed: whether a URI in normal
	// form may be allowed (or the search gave up).
	clean map[cleanKey]bool
	// search bounds every Witness search of the analysis with one budget.
	search glob.Search
	// work is the rules compared name by name since the budget was last
	// charged for them (charge).
	work int64
}

// charge spends on the analysis's budget the work counted since the last
// charge, and reports whether the budget lasted.
func (a *analyzer) charge() bool {
	n := a.work
	a.work = 0
	return a.search.Budget.Spend(int(min(n, 1<<40))) && !a.search.Budget.Exhausted()
}

func newAnalyzer(p *Policy) *analyzer {
	a := &analyzer{
		p:       p,
		servers: slices.Sorted(maps.Keys(p.Servers)),
		base:    map[string]map[string]*rblock{},
		narrow:  map[blockKey]*rblock{},
		ui:      map[string]*uiList{},
		uiAll:   glob.MustParse(uiPrefix + "*"),
		res:     &ReachResult{},
	}
	for _, name := range a.servers {
		s := p.Servers[name]
		a.base[name] = map[string]*rblock{}
		for _, k := range Kinds {
			b := &rblock{scopeName: ServerScope, server: name, kind: k, access: s.Access[k], def: effDeny, known: true}
			if d, ok := p.Defaults[k]; ok {
				b.def, b.defPos = effectOf(d.Value), d.Pos
			}
			if b.access != nil && b.access.Default != nil {
				b.def, b.defPos = effectOf(b.access.Default.Value), b.access.Default.Pos
			}
			b.setRules(blockRules(b.access))
			a.base[name][k] = b
			b.work = &a.work
			a.blocks = append(a.blocks, b)
		}
		a.ui[name] = a.uiList(s)
	}
	for _, sc := range p.scopes() {
		for _, sname := range slices.Sorted(maps.Keys(sc.Servers)) {
			ss := sc.Servers[sname]
			_, known := p.Servers[sname]
			for _, k := range Kinds {
				acc := ss.Access[k]
				if acc == nil {
					continue
				}
				b := &rblock{scope: sc, scopeName: sc.Name, server: sname, kind: k, access: acc,
					def: effAllow, narrowing: true, known: known || sname == table.AllServers}
				if acc.Allow != nil {
					b.def, b.defPos = effDeny, acc.Allow.Pos
				}
				b.setRules(blockRules(acc))
				a.narrow[blockKey{sc, sname, k}] = b
				b.work = &a.work
				a.blocks = append(a.blocks, b)
			}
		}
	}
	a.buildClasses()
	return a
}

// blockRules orders a block's entries as Freeze does.
func blockRules(acc *Access) []*rrule {
	if acc == nil {
		return nil
	}
	var out []*rrule
	for _, l := range acc.OrderedLists() {
		for i := range l.Entries {
			e := &l.Entries[i]
			if e.Glob == nil {
				continue
			}
			r := &rrule{entry: e, list: l, pos: len(out), eff: effectOf(listEffect(l.Key)), path: fmt.Sprintf("%s[%d]", l.Path, e.Index)}
			r.readPattern()
			out = append(out, r)
		}
	}
	return out
}

func (a *analyzer) uiList(s *Server) *uiList {
	if s.UI == nil || len(s.UI.Allow) == 0 {
		return nil
	}
	u := &uiList{exact: map[string]bool{}}
	if ch, ok := a.p.Channels[s.UI.ConsentChannel.Value]; ok && ch.ReachesHuman {
		u.consent = true
	}
	for _, e := range s.UI.Allow {
		prefix := ""
		switch {
		case strings.HasSuffix(e.Pattern, "*"):
			prefix = strings.TrimSuffix(e.Pattern, "*")
		case strings.HasSuffix(e.Pattern, "/"):
			prefix = e.Pattern
		default:
			u.exact[e.Pattern] = true
			if g, err := glob.Parse(escapeGlob(e.Pattern)); err == nil {
				u.globs = append(u.globs, g)
			}
			continue
		}
		u.prefixes = append(u.prefixes, prefix)
		if g, err := glob.Parse(escapeGlob(prefix) + "*"); err == nil {
			u.globs = append(u.globs, g)
		}
	}
	return u
}

// affixes returns a literal prefix and suffix of a glob: the text before its
// first metacharacter and after its last one. It only ever errs on the short
// side (it stops at any of * ? [ ] \), so every name the glob matches starts
// with prefix and ends with suffix. It is a cheap filter: two rules whose
// prefixes or suffixes disagree match no name in common, and the exact search
// can leave one out of the other's question.
func affixes(pattern string) (prefix, suffix string) {
	const meta = `*?[]\`
	i := strings.IndexAny(pattern, meta)
	if i < 0 {
		return pattern, pattern
	}
	return pattern[:i], pattern[strings.LastIndexAny(pattern, meta)+1:]
}

// disjoint reports whether the affixes of r and o prove that no name
// matches both.
func disjoint(r, o *rrule) bool {
	return !strings.HasPrefix(r.prefix, o.prefix) && !strings.HasPrefix(o.prefix, r.prefix) ||
		!strings.HasSuffix(r.suffix, o.suffix) && !strings.HasSuffix(o.suffix, r.suffix)
}

// escapeGlob quotes the glob metacharacters of a literal text.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// buildClasses groups principals by the narrowing scopes that apply to
// them, as the runtime builds one view per named principal. The scopes of
// each named principal are gathered in one pass over the scopes and their
// members, as runtime.load gathers them, so that this costs the size of
// the policy, not principals × scopes.
func (a *analyzer) buildClasses() {
	scopes := a.p.scopes()
	a.anyone = &class{has: map[*Scope]bool{}}
	if a.p.Global != nil {
		a.anyone.scopes = []*Scope{a.p.Global}
		a.anyone.has[a.p.Global] = true
	}
	named := map[string]bool{}
	for _, g := range a.p.Groups {
		for _, m := range g.Members {
			named[m] = true
		}
	}
	for n := range a.p.Principals {
		named[n] = true
	}
	// everyone holds the indexes of the scopes that apply to every
	// principal, applies those of the scopes that apply to each named one:
	// both in scope order.
	everyone, applies := table.ScopeIndexes(len(scopes), func(i int) table.Scope {
		return table.Scope{Name: scopes[i].Name, Members: scopes[i].Members}
	})
	a.scoped = map[*Scope]*scopeClasses{}
	seen := map[string]bool{}
	var key []byte
	var idx []int
	for _, name := range slices.Sorted(maps.Keys(named)) {
		if name == "" {
			continue
		}
		// Merge the two lists, in scope order.
		idx, key = idx[:0], key[:0]
		g := 0
		for _, i := range applies[name] {
			for ; g < len(everyone) && everyone[g] < i; g++ {
				idx = append(idx, everyone[g])
			}
			idx = append(idx, i)
		}
		idx = append(idx, everyone[g:]...)
		for n, i := range idx {
			if n > 0 {
				key = append(key, 0)
			}
			key = append(key, scopes[i].Name...)
		}
		if seen[string(key)] {
			continue
		}
		seen[string(key)] = true
		c := &class{principal: name, scopes: make([]*Scope, len(idx)), has: make(map[*Scope]bool, len(idx))}
		for n, i := range idx {
			c.scopes[n] = scopes[i]
			c.has[scopes[i]] = true
		}
		a.classes = append(a.classes, c)
		a.addScoped(c)
	}
	// A principal whose access token names groups is in those groups too
	// (the gateway's groups_claim), whatever members lists: any principal
	// may be in any set of groups. Layers only narrow, so a group's rules
	// decide most for a principal in that group alone, with no scope of
	// its own: one class per group stands for every such principal.
	for i, sc := range scopes {
		gname, ok := strings.CutPrefix(sc.Name, "group:")
		if !ok {
			continue
		}
		idx = append(append(idx[:0], everyone...), i)
		slices.Sort(idx)
		key = key[:0]
		for n, j := range idx {
			if n > 0 {
				key = append(key, 0)
			}
			key = append(key, scopes[j].Name...)
		}
		if seen[string(key)] {
			continue // a listed principal is in that group alone
		}
		seen[string(key)] = true
		c := &class{principal: principal.Ref(principal.Parts{Groups: []string{gname}}), has: map[*Scope]bool{}}
		for _, j := range idx {
			c.scopes = append(c.scopes, scopes[j])
			c.has[scopes[j]] = true
		}
		a.tokens = append(a.tokens, c)
		a.addScoped(c)
	}
	// A class's rarest scope is the one that applies to the fewest
	// classes; classesFor looks the classes up by it.
	for _, c := range slices.Concat(a.classes, a.tokens) {
		for _, sc := range c.scopes {
			if c.rare == nil || len(a.scoped[sc].all) < len(a.scoped[c.rare].all) {
				c.rare = sc
			}
		}
	}
}

// addScoped lists c among the classes of each of its scopes.
func (a *analyzer) addScoped(c *class) {
	for _, sc := range c.scopes {
		// A scope listed twice lists the class once.
		s := a.scoped[sc]
		if s == nil {
			s = &scopeClasses{}
			a.scoped[sc] = s
		}
		if len(s.all) == 0 || s.all[len(s.all)-1] != c {
			s.all = append(s.all, c)
		}
	}
}

// scopeClasses is the classes a group or principal scope applies to, in
// class order, and, once classesFor has found them, the minimal ones.
type scopeClasses struct {
	all, minimal []*class
	done         bool
}

// classesFor returns the classes a block's rules must be judged for. Every
// extra scope only adds constraints on a rule, so when one class's scopes
// include another's, the smaller class suffices. The classes depend on the
// block's scope only and are found once for each; callers must not modify
// them.
func (a *analyzer) classesFor(b *rblock) []*class {
	if b.scope == nil || b.scope.Name == "global" {
		return []*class{a.anyone}
	}
	s := a.scoped[b.scope]
	if s == nil {
		return nil
	}
	if !s.done {
		s.minimal, s.done = slices.Clip(minimalClasses(s.all)), true
	}
	return s.minimal
}

// minimalClasses returns the classes of cands whose scopes include no
// other's of cands. A class's scopes include d's only if they include d's
// rarest scope, so each class is compared only with the classes whose
// rarest scope it has, not with every other.
func minimalClasses(cands []*class) []*class {
	byRare := make(map[*Scope][]*class, len(cands))
	for _, d := range cands {
		byRare[d.rare] = append(byRare[d.rare], d)
	}
	var out []*class
	for _, c := range cands {
		if !hasSubclass(c, byRare) {
			out = append(out, c)
		}
	}
	return out
}

// hasSubclass reports whether a class of byRare other than c has fewer
// scopes than c, all of them c's.
func hasSubclass(c *class, byRare map[*Scope][]*class) bool {
	for _, sc := range c.scopes {
		for _, d := range byRare[sc] {
			if d != c && len(d.scopes) < len(c.scopes) && subset(d, c) {
				return true
			}
		}
	}
	return false
}

func subset(d, c *class) bool {
	for _, s := range d.scopes {
		if !c.has[s] {
			return false
		}
	}
	return true
}

// stack returns the blocks that decide for class c on server and kind, in
// evaluation order, as the runtime layers them.
func (a *analyzer) stack(c *class, server, kind string) []*rblock {
	st := []*rblock{a.base[server][kind]}
	for _, sc := range c.scopes {
		for _, key := range [2]string{table.AllServers, server} {
			if b := a.narrow[blockKey{sc, key, kind}]; b != nil {
				st = append(st, b)
			}
		}
	}
	return st
}

// serversFor returns the servers a block applies to.
func (a *analyzer) serversFor(b *rblock) []string {
	if !b.known {
		return nil
	}
	if b.server == table.AllServers {
		return a.servers
	}
	return []string{b.server}
}

// combine reports whether rule r (effect er) of layer j decides a name, given
// the effect of every other layer and whether the ui:// check passes.
func combine(st []*rblock, j int, er effect, effOf func(i int) effect, uiPass bool) bool {
	if st[j].narrowing && er == effAllow {
		for i := range st {
			if i != j && effOf(i) == effDeny {
				return false
			}
		}
		return uiPass
	}
	for i := range st {
		if i == j {
			continue
		}
		e := effOf(i)
		if i < j && e <= er || i > j && e < er {
			return false
		}
	}
	return er == effDeny || uiPass
}

// decides reports whether r, of layer j of st on server, decides name.
func (a *analyzer) decides(st []*rblock, j int, r *rrule, server, name string) bool {
	b := st[j]
	if !r.match(name) || b.first(name) != r {
		return false
	}
	return combine(st, j, r.eff, func(i int) effect { return st[i].eval(name) }, a.uiPass(b.kind, server, name))
}

func (a *analyzer) uiPass(kind, server, name string) bool {
	return kind != table.Resource.String() || a.ui[server].pass(name)
}

// query is a Witness search for names matched by r: the patterns that may
// also match them, and where each sits in the stack.
type query struct {
	pats  []*glob.Pattern
	idx   [][]int // per layer, per rule: index in pats, or -1 (matches none of r's names)
	ui    bool    // pats[uiAt] is ui://*, pats[uiAt+1:] the server's ui allowlist
	uiAt  int
	uiEnd int
}

// newQuery builds the search for rule r of layer j. Rules of r's own block
// after r are left out: they never matter for a name r matches first.
func (a *analyzer) newQuery(st []*rblock, j int, r *rrule, server string) *query {
	q := &query{idx: make([][]int, len(st))}
	for i, b := range st {
		rules := b.rules
		if i == j {
			rules = rules[:r.pos]
		}
		b.count(len(rules))
		q.idx[i] = make([]int, len(rules))
		for k, o := range rules {
			q.idx[i][k] = q.add(r, o)
		}
	}
	if st[j].kind == table.Resource.String() {
		q.ui = true
		q.uiAt = len(q.pats)
		q.pats = append(q.pats, a.uiAll)
		if u := a.ui[server]; u != nil {
			q.pats = append(q.pats, u.globs...)
		}
		q.uiEnd = len(q.pats)
	}
	return q
}

// add includes rule o in the search for names of r, unless o can match none
// of them.
func (q *query) add(r, o *rrule) int {
	if o.pat().Empty() || disjoint(r, o) || o.isLit && !r.pat().Match(o.lit) {
		return -1
	}
	q.pats = append(q.pats, o.pat())
	return len(q.pats) - 1
}

// effect is the effect of layer i for a name with match vector m.
func (q *query) effect(st []*rblock, i int, m []bool) effect {
	for k, at := range q.idx[i] {
		if at >= 0 && m[at] {
			return st[i].rules[k].eff
		}
	}
	return st[i].def
}

func (q *query) uiPass(a *analyzer, server string, m []bool) bool {
	if !q.ui || !m[q.uiAt] {
		return true
	}
	u := a.ui[server]
	if u == nil || !u.consent {
		return false
	}
	return slices.Contains(m[q.uiAt+1:q.uiEnd], true)
}

// avoiding is the analysis's search for a query whose names no earlier
// rule of r's block (layer j) may match (see firstInBlock).
func (a *analyzer) avoiding(q *query, j int) glob.Search {
	s := a.search
	for _, at := range q.idx[j] {
		if at >= 0 {
			s.Avoid = append(s.Avoid, at)
		}
	}
	return s
}

// firstInBlock reports whether no earlier rule of r's block matches.
func (q *query) firstInBlock(j int, m []bool) bool {
	for _, at := range q.idx[j] {
		if at >= 0 && m[at] {
			return false
		}
	}
	return true
}

// witness searches a name r decides in the stack. For a literal rule the
// answer is direct.
func (a *analyzer) witness(st []*rblock, j int, r *rrule, server string) (name string, ok, complete bool) {
	if r.isLit {
		return r.lit, a.decides(st, j, r, server, r.lit), true
	}
	q := a.newQuery(st, j, r, server)
	return a.avoiding(q, j).Witness(r.pat(), q.pats, func(m []bool) bool {
		if !q.firstInBlock(j, m) {
			return false
		}
		return combine(st, j, r.eff, func(i int) effect {
			if i == j {
				return r.eff
			}
			return q.effect(st, i, m)
		}, q.uiPass(a, server, m))
	})
}

// nonEmpty matches every name but the empty one.
var nonEmpty = glob.MustParse("?*")

// nonEmptyWitness searches a name other than "" that r, of block b,
// decides for class c on server.
func (a *analyzer) nonEmptyWitness(b *rblock, r *rrule, c *class, server string) (string, bool) {
	if r.isLit || c == nil {
		return "", false
	}
	st := a.stack(c, server, b.kind)
	j := slices.Index(st, b)
	if n, ok := glob.Filled(r.pat()); ok && n != "" && a.decides(st, j, r, server, n) {
		return n, true
	}
	q := a.newQuery(st, j, r, server)
	at := len(q.pats)
	q.pats = append(q.pats, nonEmpty)
	n, ok, _ := a.avoiding(q, j).Witness(r.pat(), q.pats, func(m []bool) bool {
		return m[at] && q.firstInBlock(j, m) && combine(st, j, r.eff, func(i int) effect {
			if i == j {
				return r.eff
			}
			return q.effect(st, i, m)
		}, q.uiPass(a, server, m))
	})
	return n, ok
}

// firstNonEmpty searches a name other than "" that r matches first in
// its block.
func (a *analyzer) firstNonEmpty(b *rblock, r *rrule) (string, bool) {
	if n, ok := glob.Filled(r.pat()); ok && n != "" && b.first(n) == r {
		return n, true
	}
	earlier := b.earlier(r)
	pats := []*glob.Pattern{nonEmpty}
	for _, o := range earlier {
		pats = append(pats, o.pat())
	}
	n, ok, _ := a.search.Witness(r.pat(), pats, func(m []bool) bool { return m[0] && !slices.Contains(m[1:], true) })
	return n, ok
}

// searchOthers finds a name r matches first in its block for which accept
// holds of the other layers' effects (r's own layer left out) and the ui
// check, on some server and class.
func (a *analyzer) searchOthers(b *rblock, r *rrule, accept func(st []*rblock, j int, effOf func(i int) effect, uiPass bool) bool) (name, server string, ok bool) {
	for _, s := range a.serversFor(b) {
		for _, c := range a.classesFor(b) {
			st := a.stack(c, s, b.kind)
			j := slices.Index(st, b)
			if r.isLit {
				n := r.lit
				if b.first(n) == r && accept(st, j, func(i int) effect { return st[i].eval(n) }, a.uiPass(b.kind, s, n)) {
					return n, s, true
				}
				continue
			}
			q := a.newQuery(st, j, r, s)
			n, found, _ := a.avoiding(q, j).Witness(r.pat(), q.pats, func(m []bool) bool {
				return q.firstInBlock(j, m) && accept(st, j, func(i int) effect { return q.effect(st, i, m) }, q.uiPass(a, s, m))
			})
			if found {
				return n, s, true
			}
		}
	}
	return "", "", false
}

func (a *analyzer) analyzeBlock(b *rblock) {
	servers := a.serversFor(b)
	classes := a.classesFor(b)
	// An allow_list restricts even when it is empty: allow_list: [] in a
	// narrowing block denies everything, which for no one is no rule.
	restricts := len(b.rules) > 0 || b.narrowing && b.access != nil && b.access.Allow != nil
	if b.scope != nil && strings.HasPrefix(b.scope.Name, "group:") && len(b.scope.Members) == 0 && restricts {
		a.reportEmptyGroup(b.scope)
	}
	seen := map[string]*rrule{}
	for _, r := range b.rules {
		rr := RuleReach{Entry: r.entry, Path: r.path, Scope: b.scopeName, Server: b.server, Kind: b.kind,
			Effect: r.eff.String(), Index: r.pos, Status: Unreachable}
		a.res.Rules = append(a.res.Rules, a.analyzeRule(b, r, seen, servers, classes, rr))
		if _, dup := seen[r.entry.Pattern]; !dup {
			seen[r.entry.Pattern] = r
		}
	}
}

func (a *analyzer) analyzeRule(b *rblock, r *rrule, seen map[string]*rrule, servers []string, classes []*class, rr RuleReach) RuleReach {
	if r.pat().Empty() {
		a.add(r, CodeEmptyPattern, fmt.Sprintf("%s: %s can match no name: a character class in it admits no character", r.path, clip.Quote(r.entry.Pattern)),
			"fix the class so that it admits the characters you mean, or remove the entry")
		return rr
	}
	if first := seen[r.entry.Pattern]; first != nil {
		hint := "remove the duplicate"
		if first.list != r.list {
			// Removing the dead copy keeps every decision; removing the
			// other may hand the names to a third list, or to another
			// scope, so no outcome is promised for it.
			hint = fmt.Sprintf("remove it from %s, where it decides nothing: %s decides these names, and removing it there instead changes what they get",
				r.list.Key, first.list.Key)
		}
		a.add(r, CodeDuplicatePattern, fmt.Sprintf("%s: %s is already listed at %s (%s): this entry never decides any name",
			r.path, clip.Quote(r.entry.Pattern), first.path, first.entry.Pos), hint)
		return rr
	}
	if len(servers) == 0 || len(classes) == 0 {
		// The block applies to no server (unknown-server): reported once
		// for the block.
		return rr
	}
	if !a.charge() {
		rr.Status = ReachUnknown
		return rr
	}

	// Within the block: is every name r matches taken by an earlier rule?
	var earlier []*rrule
	var kept string
	if r.isLit {
		if o := b.first(r.lit); o != r {
			a.reportShadowed(r, []*rrule{o})
			return rr
		}
		kept = r.lit
	} else {
		earlier = b.earlier(r)
		if !a.charge() {
			rr.Status = ReachUnknown
			return rr
		}
		pats := make([]*glob.Pattern, len(earlier))
		for i, o := range earlier {
			pats[i] = o.pat()
		}
		// r's shortest name, when no earlier rule takes it, settles the
		// question without a search.
		if ex, _ := glob.Example(r.pat()); a.firstOf(earlier, ex) == nil {
			kept = ex
		} else if o := a.singleCover(r, earlier, ex); o != nil {
			a.reportShadowed(r, []*rrule{o})
			return rr
		} else {
			covered, w, complete := a.search.Covered(r.pat(), pats)
			switch {
			case !complete:
				rr.Status = ReachUnknown
				return rr
			case covered:
				a.reportShadowed(r, a.minimalCover(r, earlier))
				return rr
			}
			kept = w
		}
	}

	// Across scopes: does r decide some name for some principal? Try the
	// names at hand first; search only when they fail.
	candidates := []string{kept}
	if ex, ok := glob.Example(r.pat()); ok && ex != kept {
		candidates = append(candidates, ex)
	}
	unknown := false
	found := false
	var wc *class // the class of rr.Principal
search:
	for _, s := range servers {
		for _, c := range classes {
			st := a.stack(c, s, b.kind)
			j := slices.Index(st, b)
			for _, n := range candidates {
				if a.decides(st, j, r, s, n) {
					rr.Principal, rr.WitnessServer, rr.Witness = c.principal, s, n
					wc, found = c, true
					break search
				}
			}
		}
	}
	if !found && !a.charge() {
		rr.Status = ReachUnknown
		return rr
	}
	if !found && !r.isLit {
	exhaustive:
		for _, s := range servers {
			for _, c := range classes {
				st := a.stack(c, s, b.kind)
				j := slices.Index(st, b)
				n, ok, complete := a.witness(st, j, r, s)
				if ok {
					rr.Principal, rr.WitnessServer, rr.Witness = c.principal, s, n
					wc, found = c, true
					break exhaustive
				}
				unknown = unknown || !complete
			}
		}
	}
	switch {
	case found && a.checkNormal(b, r, servers, classes, &rr):
	case found:
		rr.Status = Reachable
		if rr.Witness == "" {
			// No tool, prompt or resource has the empty name, and
			// explain refuses it: quote another name when there is one.
			if n, ok := a.nonEmptyWitness(b, r, wc, rr.WitnessServer); ok {
				rr.Witness = n
			}
		}
		a.reportPartial(b, r, earlier, rr, wc)
		a.reportUIPartial(b, r, rr)
	case unknown:
		rr.Status = ReachUnknown
	default:
		a.reportDead(b, r, kept, servers[0], classes[0])
	}
	return rr
}

func (a *analyzer) add(r *rrule, code, msg, suggestion string) {
	info, _ := LookupCode(code)
	a.res.Diagnostics = append(a.res.Diagnostics, Diagnostic{Pos: r.entry.Pos, Code: code, Severity: info.Level,
		Path: r.path, Message: msg, Suggestion: suggestion})
}

// singleCover returns an earlier rule that alone matches every name r
// matches, or nil. Such a rule matches ex, r's shortest name, so only those
// are tried; each try is a search over two patterns, far cheaper than one
// over the whole block.
func (a *analyzer) singleCover(r *rrule, earlier []*rrule, ex string) *rrule {
	for _, o := range earlier {
		a.work += matchCost(ex, o)
		if !o.match(ex) {
			continue
		}
		if covered, _, _ := a.search.Covered(r.pat(), []*glob.Pattern{o.pat()}); covered {
			return o
		}
	}
	return nil
}

// minimalCover drops rules from a cover while the rest still covers r.
func (a *analyzer) minimalCover(r *rrule, cover []*rrule) []*rrule {
	var overlapping []*rrule
	for _, o := range cover {
		if o.isLit {
			overlapping = append(overlapping, o)
			continue
		}
		if _, ok, complete := a.search.Witness(r.pat(), []*glob.Pattern{o.pat()}, func(m []bool) bool { return m[0] }); ok || !complete {
			overlapping = append(overlapping, o)
		}
	}
	for i := len(overlapping) - 1; i >= 0 && len(overlapping) > 1; i-- {
		rest := slices.Delete(slices.Clone(overlapping), i, i+1)
		pats := make([]*glob.Pattern, len(rest))
		for k, o := range rest {
			pats[k] = o.pat()
		}
		if covered, _, _ := a.search.Covered(r.pat(), pats); covered {
			overlapping = rest
		}
	}
	return overlapping
}

// firstOf returns the first of rules matching name, or nil.
func (a *analyzer) firstOf(rules []*rrule, name string) *rrule {
	for _, o := range rules {
		a.work += matchCost(name, o)
		if o.match(name) {
			return o
		}
	}
	return nil
}

// matchCost is what matching name against r is charged, in glob.Budget
// units: about what four comparisons of rules cost, and at worst growing
// with the name's length times the pattern's.
func matchCost(name string, r *rrule) int64 {
	return int64(4 + len(name)*len(r.entry.Pattern)/64)
}

func describeAll(rs []*rrule) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.describe()
	}
	return strings.Join(parts, ", ")
}

func (a *analyzer) reportShadowed(r *rrule, cover []*rrule) {
	msg := fmt.Sprintf("%s: %s is wholly shadowed by %s, which come first in this block: it never decides any name", r.path, clip.Quote(r.entry.Pattern), describeAll(cover))
	if len(cover) == 1 {
		msg = fmt.Sprintf("%s: %s is wholly shadowed by %s, which comes first in this block: it never decides any name", r.path, clip.Quote(r.entry.Pattern), cover[0].describe())
	}
	// Only a deny keeps the human from being asked: an earlier approval
	// asks as well.
	if r.eff == effApprove && !slices.ContainsFunc(cover, func(o *rrule) bool { return o.eff != effDeny }) {
		msg += ", so the human is never asked"
	}
	a.add(r, CodeShadowedRule, msg, "remove the entry, or narrow the rules that shadow it (deny_list comes before approval_list, which comes before allow_list)")
}

// reportPartial reports a reachable rule that loses some of its names to
// an earlier rule of its block with another effect (overlapping entries of
// one list are normal and not reported). A deny whose every name r matches
// too is carved out of r, the intended idiom (allow file:///srv/*, deny
// file:///srv/*/.env), and not reported; a deny that overlaps r only in part,
// and an approval that takes names from an allow, are. wc is the class of
// rr.Principal.
func (a *analyzer) reportPartial(b *rblock, r *rrule, earlier []*rrule, rr RuleReach, wc *class) {
	if r.isLit {
		return
	}
	// In block order every rule of another effect comes before the earlier
	// rules of r's own list, so r loses a name to another effect exactly
	// when it overlaps one of those rules; pairs are cheap to search. A
	// rule passed over (carved) is one whose every name r loses is
	// carved out: a name both r and o match, and none of carved, goes to o.
	ex, _ := glob.Example(r.pat())
	var carved []*rrule
	for _, o := range earlier {
		if o.eff == r.eff {
			continue
		}
		both, ok := a.overlap(r, o, ex)
		if !ok {
			continue
		}
		if o.eff == effDeny && a.within(o, r) {
			carved = append(carved, o)
			continue
		}
		if lost, ok := a.lostTo(b, r, o, both, carved); ok {
			a.reportLost(r, a.readableKept(b, r, rr, wc), lost, o)
			return
		}
		carved = append(carved, o)
	}
}

// overlap returns a name both r and o match, if there is one: o's literal,
// o's pattern filled in, or r's shortest name ex when they serve, else the
// shortest a search over the pair finds.
func (a *analyzer) overlap(r, o *rrule, ex string) (string, bool) {
	if o.isLit {
		return o.lit, r.match(o.lit)
	}
	if disjoint(r, o) {
		return "", false
	}
	if n, ok := glob.Filled(o.pat()); ok && r.match(n) {
		return n, true
	}
	if o.match(ex) {
		return ex, true
	}
	n, ok, _ := a.search.Witness(r.pat(), []*glob.Pattern{o.pat()}, func(m []bool) bool { return m[0] })
	return n, ok
}

// within reports whether every name o matches, r matches too. A search that
// gives up answers no, so the overlap is reported as it was before.
func (a *analyzer) within(o, r *rrule) bool {
	if o.isLit {
		return r.match(o.lit)
	}
	// Names of o that r does not match are most often its own shortest
	// and filled-in ones: no search when one of them shows it.
	for _, name := range [2]func(*glob.Pattern) (string, bool){glob.Example, glob.Filled} {
		if n, ok := name(o.pat()); ok && !r.match(n) {
			return false
		}
	}
	covered, _, complete := a.search.Covered(o.pat(), []*glob.Pattern{r.pat()})
	return covered && complete
}

// lostTo finds a name r matches that goes to o, given both, a name r and o
// match: the names of both patterns filled in (glob.Filled) when one
// qualifies, else both when it matches none of the carved rules before o,
// else the shortest a search finds.
func (a *analyzer) lostTo(b *rblock, r, o *rrule, both string, carved []*rrule) (string, bool) {
	goes := func(n string) bool { return r.match(n) && b.first(n) == o }
	for _, p := range [2]*glob.Pattern{o.pat(), r.pat()} {
		if n, ok := glob.Filled(p); ok && n != both && goes(n) {
			return n, true
		}
	}
	if len(carved) == 0 || goes(both) {
		return both, true
	}
	pats := []*glob.Pattern{o.pat()}
	for _, c := range carved {
		pats = append(pats, c.pat())
	}
	n, ok, _ := a.search.Witness(r.pat(), pats, func(m []bool) bool { return m[0] && !slices.Contains(m[1:], true) })
	return n, ok && goes(n)
}

// readableKept is a name r decides for the finding to quote: r's pattern
// filled in (glob.Filled) when r decides it for rr.Principal on
// rr.WitnessServer, else rr.Witness.
func (a *analyzer) readableKept(b *rblock, r *rrule, rr RuleReach, wc *class) string {
	n, ok := glob.Filled(r.pat())
	if !ok || n == rr.Witness || wc == nil {
		return rr.Witness
	}
	st := a.stack(wc, rr.WitnessServer, b.kind)
	if a.decides(st, slices.Index(st, b), r, rr.WitnessServer, n) {
		return n
	}
	return rr.Witness
}

func (a *analyzer) reportLost(r *rrule, kept, lost string, taker *rrule) {
	a.add(r, CodePartlyShadowed, fmt.Sprintf("%s: %s is partly shadowed: it still decides %s, but %s goes to %s",
		r.path, clip.Quote(r.entry.Pattern), clip.Quote(kept), clip.Quote(lost), taker.describe()),
		"nothing to do if that is intended; otherwise narrow one of the two patterns")
}

// reportUIPartial reports a server's resource allow entry that admits ui://
// URIs the server's ui allowlist does not.
func (a *analyzer) reportUIPartial(b *rblock, r *rrule, rr RuleReach) {
	if b.narrowing || b.kind != table.Resource.String() || r.eff != effAllow {
		return
	}
	n, ok := a.uiDenied(b, r)
	if !ok {
		return
	}
	a.add(r, CodeUIResourceDenied, fmt.Sprintf("%s: %s admits ui:// URIs that mcp_servers.%s.ui does not allowlist, so they are denied, for example %s",
		r.path, clip.Quote(r.entry.Pattern), b.server, clip.Quote(n)), a.uiSuggestion(b.server))
}

// uiDenied finds a ui:// URI that r decides within its block but the ui
// check of its server denies.
func (a *analyzer) uiDenied(b *rblock, r *rrule) (string, bool) {
	st := []*rblock{b}
	if r.isLit {
		n := r.lit
		return n, strings.HasPrefix(n, uiPrefix) && b.first(n) == r && !a.uiPass(b.kind, b.server, n)
	}
	q := a.newQuery(st, 0, r, b.server)
	n, ok, _ := a.avoiding(q, 0).Witness(r.pat(), q.pats, func(m []bool) bool {
		return q.firstInBlock(0, m) && m[q.uiAt] && !q.uiPass(a, b.server, m)
	})
	return n, ok
}

func (a *analyzer) uiSuggestion(server string) string {
	return fmt.Sprintf("list the URIs in mcp_servers.%s.ui.allow_list (with a consent_channel that reaches a human), or keep ui:// out of this pattern", server)
}

// reportDead explains a rule that no principal's decision ever names.
func (a *analyzer) reportDead(b *rblock, r *rrule, example, server string, c *class) {
	if example == "" {
		if n, ok := a.firstNonEmpty(b, r); ok {
			example = n
		}
	}
	st := a.stack(c, server, b.kind)
	why := a.decider(st, server, example)
	on := ""
	if b.server == table.AllServers && len(a.servers) > 1 {
		on = " on " + server
	}
	// ignoringUI: would r decide if the ui:// check let everything pass?
	if b.kind == table.Resource.String() && r.eff != effDeny && !b.narrowing {
		if n, s, ok := a.searchOthers(b, r, func(st []*rblock, j int, effOf func(i int) effect, _ bool) bool {
			return combine(st, j, r.eff, effOf, true)
		}); ok {
			a.add(r, CodeUIResourceDenied, fmt.Sprintf("%s: %s never allows anything: the ui:// URIs it admits are not on mcp_servers.%s.ui.allow_list, so they are denied (for example %s), and every other name it matches is decided by other rules",
				r.path, clip.Quote(r.entry.Pattern), s, clip.Quote(n)), a.uiSuggestion(s))
			return
		}
	}
	switch {
	case r.eff == effApprove:
		// Is some call it matches held anyway, by another scope?
		if b.narrowing {
			if n, _, ok := a.searchOthers(b, r, func(st []*rblock, j int, effOf func(i int) effect, ui bool) bool {
				for i := range st {
					if i != j && effOf(i) == effDeny {
						return false
					}
				}
				return true
			}); ok {
				a.add(r, CodeNarrowingNoEffect, fmt.Sprintf("%s: %s changes no decision: every call it matches is already held for approval or denied, for example %s%s is %s",
					r.path, clip.Quote(r.entry.Pattern), clip.Quote(n), on, a.decider(st, server, n)),
					"remove the entry; the broader scope already holds these calls")
				return
			}
		}
		a.add(r, CodeApprovalNeverAsked, fmt.Sprintf("%s: %s is never held for approval, so the human is never asked: a deny always wins, for example %s%s is %s",
			r.path, clip.Quote(r.entry.Pattern), clip.Quote(example), on, why),
			"remove the entry, or narrow the deny that beats it if a human should decide these calls")
	case b.narrowing && r.eff == effAllow:
		a.add(r, CodeNarrowingNoEffect, fmt.Sprintf("%s: %s cannot widen access: %s can only take access away, and every name it matches is denied anyway, for example %s%s is %s",
			r.path, clip.Quote(r.entry.Pattern), scopePath(b.scopeName), clip.Quote(example), on, why),
			"grant access in the server's own rules (mcp_servers.<server>.access), then narrow it here; or remove the entry")
	case b.narrowing:
		a.add(r, CodeRedundantDeny, fmt.Sprintf("%s: %s changes no decision today: every name it matches is already denied, for example %s%s is %s",
			r.path, clip.Quote(r.entry.Pattern), clip.Quote(example), on, why),
			"keep it if it guards against later changes to the server rules, or remove it")
	default:
		a.add(r, CodeAllowNeverAllows, fmt.Sprintf("%s: %s never allows anything: another scope holds or denies every name it matches, for example %s is %s",
			r.path, clip.Quote(r.entry.Pattern), clip.Quote(example), why),
			"remove the entry, or change the rule that beats it")
	}
}

// decider says how the runtime decides name on server with stack st, and
// by what: "denied by global.access.tool.deny_list[0] "*" (policy.cue:3:5)".
func (a *analyzer) decider(st []*rblock, server, name string) string {
	best, at := effAllow+1, -1
	var rule *rrule
	for i, b := range st {
		r := b.first(name)
		e := b.def
		if r != nil {
			e = r.eff
		}
		if e < best {
			best, at, rule = e, i, r
		}
	}
	if best != effDeny && !a.uiPass(st[0].kind, server, name) {
		if u := a.ui[server]; u != nil && !u.consent {
			return fmt.Sprintf("denied: mcp_servers.%s.ui has no consent channel that reaches a human", server)
		}
		return fmt.Sprintf("denied: it is not on mcp_servers.%s.ui.allow_list", server)
	}
	b := st[at]
	switch {
	case rule != nil:
		return fmt.Sprintf("%s by %s", best.verb(), rule.describe())
	case b.narrowing:
		return fmt.Sprintf("denied: it is not on %s (%s)", b.access.Allow.Path, b.defPos)
	case b.defPos.File != "":
		return fmt.Sprintf("%s by the %s default of %s (%s)", best.verb(), b.kind, b.server, b.defPos)
	}
	return fmt.Sprintf("denied by the built-in %s default of %s", b.kind, b.server)
}

// reportEmptyGroup reports, once, a group with rules and no members: its
// rules apply only to principals whose access token names it. The policy
// keeps no position of a group's own key, so the finding is at its first
// block; lint moves it to the key (members, or the group's name).
func (a *analyzer) reportEmptyGroup(sc *Scope) {
	path := scopePath(sc.Name)
	for _, d := range a.res.Diagnostics {
		if d.Code == CodeEmptyGroup && d.Path == path+".members" {
			return
		}
	}
	var pos Position
	for _, ss := range sc.Servers {
		if pos.File == "" || ss.Pos.File < pos.File || ss.Pos.File == pos.File && (ss.Pos.Line < pos.Line || ss.Pos.Line == pos.Line && ss.Pos.Column < pos.Column) {
			pos = ss.Pos
		}
	}
	info, _ := LookupCode(CodeEmptyGroup)
	a.res.Diagnostics = append(a.res.Diagnostics, Diagnostic{Pos: pos, Code: CodeEmptyGroup, Severity: info.Level, Path: path + ".members",
		Message:    fmt.Sprintf("%s has no members: its rules apply only to principals whose access token names the group, none the policy lists", path),
		Suggestion: "add the principals it is meant for to members; if access tokens name the group (groups_claim), silence this with // policyc:ignore empty-group <reason>"})
}

// ApprovalTimeoutDiagnostics reports approval requests that live longer
// than max seconds, the longest the team allows a request to stay open. A
// request lives the shortest approval_timeout_seconds of the scopes that
// apply (DefaultApprovalTimeout when none is set).
func ApprovalTimeoutDiagnostics(p *Policy, max int) []Diagnostic {
	type source struct {
		seconds  int
		pos      Position
		path     string
		implicit bool
	}
	info, _ := LookupCode(CodeApprovalTimeout)
	var out []Diagnostic
	seen := map[Position]bool{}
	servers := slices.Sorted(maps.Keys(p.Servers))
	tool := func(sc *Scope, server string) *Access {
		if sc == nil || sc.Servers[server] == nil {
			return nil
		}
		return sc.Servers[server].Access[table.Tool.String()]
	}
	check := func(holder *Access, sc *Scope, targets []string) {
		if holder == nil || holder.Approval == nil || len(holder.Approval.Entries) == 0 {
			return
		}
		for _, s := range targets {
			srv, ok := p.Servers[s]
			if !ok {
				continue
			}
			src := source{seconds: DefaultApprovalTimeout, pos: holder.Approval.Pos, path: holder.Approval.Path, implicit: true}
			if base := srv.Access[table.Tool.String()]; base != nil && base.Timeout > 0 {
				src = source{seconds: base.Timeout, pos: base.TimeoutPos, path: base.Path + ".approval_timeout_seconds"}
			}
			shorter := func(acc *Access) {
				if acc != nil && acc.Timeout > 0 && acc.Timeout < src.seconds {
					src = source{seconds: acc.Timeout, pos: acc.TimeoutPos, path: acc.Path + ".approval_timeout_seconds"}
				}
			}
			shorter(tool(p.Global, table.AllServers))
			if sc != nil && sc != p.Global {
				shorter(tool(sc, table.AllServers))
				shorter(tool(sc, s))
			}
			if src.seconds <= max || seen[src.pos] {
				continue
			}
			seen[src.pos] = true
			msg := fmt.Sprintf("%s: approval requests live up to %d s, longer than the %d s this repository allows",
				src.path, src.seconds, max)
			if src.implicit {
				msg = fmt.Sprintf("%s: approval requests live up to %d s (approval_timeout_seconds is not set), longer than the %d s this repository allows",
					src.path, src.seconds, max)
			}
			out = append(out, Diagnostic{Pos: src.pos, Code: CodeApprovalTimeout, Severity: info.Level, Path: src.path, Message: msg,
				Suggestion: fmt.Sprintf("set approval_timeout_seconds to %d or less, or raise rules.%q.max_seconds in %s", max, CodeApprovalTimeout, ConfigFileName)})
		}
	}
	for _, s := range servers {
		check(p.Servers[s].Access[table.Tool.String()], nil, []string{s})
	}
	for _, sc := range p.scopes() {
		for _, key := range slices.Sorted(maps.Keys(sc.Servers)) {
			targets := []string{key}
			if key == table.AllServers {
				targets = servers
			}
			check(tool(sc, key), sc, targets)
		}
	}
	return out
}

// ReachBudget is the work the reachability analysis of one policy may do,
// in glob.Budget units.
const ReachBudget = glob.DefaultBudget

// reportIncomplete reports, once, the rules whose verdict the analysis
// could not settle: a search of one passed glob.MaxWitnessStates states or
// glob.MaxWitnessWords words, or the analysis spent ReachBudget. Any of
// them might never take effect.
func (a *analyzer) reportIncomplete() {
	var unknown []RuleReach
	for _, rr := range a.res.Rules {
		if rr.Status == ReachUnknown {
			unknown = append(unknown, rr)
		}
	}
	if len(unknown) == 0 {
		return
	}
	first := unknown[0]
	stopped := a.search.Budget.Stopped()
	var why string
	switch {
	case stopped&glob.WorkLimit != 0:
		why = "the analysis used up the work it may do on one policy"
	case stopped&glob.MemoryLimit != 0:
		why = fmt.Sprintf("a search over the patterns of its block would have held more than %d words of automaton and states (glob.MaxWitnessWords)", glob.MaxWitnessWords)
	default:
		why = fmt.Sprintf("a search over the patterns of its block passed %d states", glob.MaxWitnessStates)
	}
	others := ""
	switch n := len(unknown) - 1; n {
	case 0:
	case 1:
		others = " (and 1 other rule)"
	default:
		others = fmt.Sprintf(" (and %d other rules)", n)
	}
	info, _ := LookupCode(CodeReachIncomplete)
	a.res.Diagnostics = append(a.res.Diagnostics, Diagnostic{Pos: first.Entry.Pos, Code: CodeReachIncomplete, Severity: info.Level, Path: first.Path,
		Message:    fmt.Sprintf("%s: the analysis could not tell whether %s%s ever takes effect: %s, so a rule among them that never does goes unreported", first.Path, clip.Quote(first.Entry.Pattern), others, why),
		Suggestion: "a wildcard followed by many ? (*a????????????????) or long lists of patterns like *x*y make the search grow exponentially; write them more narrowly, or check these rules by hand and silence this finding with // policyc:ignore reach-incomplete <reason>"})
}
