package decisiondiff

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/policyc/policyc/internal/glob"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// block compares the decisions of one principal class on one server and
// kind.
type block struct {
	old, new *table.Table
	server   string
	kind     table.Kind
	class    class
	opts     Options
	bounds   glob.Search // the comparison's budget

	// The patterns of both tables, each once: rule patterns, ui allowlist
	// entries as globs, and ui://* for resources.
	pats  []*glob.Pattern
	srcs  []string
	fixes []affix
	index map[string]int
	uiAny int

	// row marks the patterns that are rules or ui allowlist entries (not
	// the ui://* helper): each glob of them gets a row when its names
	// change.
	row []bool

	sides [2]model
	// v is the match vector the models are evaluated on.
	v    []bool
	seen map[string]bool
	// found marks the patterns that have a row, or need none.
	found []bool
	// wantUnmatched is set while the names no pattern matches change and
	// have no row yet.
	wantUnmatched bool
}

// model is one table's decision procedure for the block, over the match
// vector: the same computation as decide.Table.Decide (the tests hold the
// two to each other), with "does pattern i match" in place of matching a
// name.
type model struct {
	exists bool
	layers []layer
	ui     *uiModel
	// uiSig is the ui allowlist's content.
	uiSig string
	// sig is the model's content; equal sigs decide alike.
	sig string
}

type layer struct {
	// id names the scope block: "server", or scope@server-key.
	id string
	// scope is the scope's name as decisions report it.
	scope     string
	def       table.Effect
	defOrigin string
	rules     []rule
}

type rule struct {
	pat int
	eff table.Effect
	src *table.Rule
}

type uiModel struct {
	entries []int
	consent bool
}

func (b *block) compare(rep *Report) error {
	b.index = map[string]int{}
	b.uiAny = -1
	if b.kind == table.Resource {
		if _, err := b.pattern("ui://*"); err != nil {
			return err
		}
		b.uiAny = 0
	}
	var err error
	if b.sides[0], err = b.model(b.old); err != nil {
		return err
	}
	if b.sides[1], err = b.model(b.new); err != nil {
		return err
	}
	if b.sides[0].sig == b.sides[1].sig {
		return nil
	}
	b.v = make([]bool, len(b.pats))
	b.seen = map[string]bool{}

	// Literal patterns: the name itself. A literal needs no search.
	b.found = make([]bool, len(b.pats))
	for i, p := range b.pats {
		if lit, ok := p.Literal(); ok {
			b.found[i] = true
			if err := b.confirm(rep, lit, FoundLiteral, ""); err != nil {
				return err
			}
		}
	}
	// Globs and the names no pattern matches: search the regions where a
	// decision can change for names each unfound glob matches.
	regions, whole := b.regions()
	if whole {
		clear(b.v)
		b.wantUnmatched = b.eval(0) != b.eval(1)
	}
	for _, r := range regions {
		if err := b.search(rep, r); err != nil {
			return err
		}
	}
	// Catalogued items.
	if b.opts.Items != nil {
		for _, name := range b.opts.Items.Names(b.server, b.kind) {
			if err := b.confirm(rep, name, FoundCatalogue, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// anyName matches every name but the empty one, which no item has.
var anyName = glob.MustParse("?*")

// regions returns the patterns whose names hold every name whose decision
// can change, or whole (region -1: every name) when that cannot be
// narrowed.
//
// Within one scope block the rules are ordered deny, approve, allow, so
// the first rule that matches is the most restrictive that matches: the
// block's answer for a name depends only on the set of (pattern, effect)
// pairs that match it, and its default. When both tables have the same
// blocks with the same defaults, a name no added or removed pair's pattern
// matches gets the same answer from every block, hence the same decision.
// Changes to the ui allowlist only touch ui:// names.
func (b *block) regions() (regions []int, whole bool) {
	o, n := &b.sides[0], &b.sides[1]
	if o.exists != n.exists || len(o.layers) != len(n.layers) {
		return []int{-1}, true
	}
	delta := map[int]bool{}
	for i := range o.layers {
		lo, ln := &o.layers[i], &n.layers[i]
		if lo.id != ln.id || lo.def != ln.def || !lo.ordered() || !ln.ordered() {
			return []int{-1}, true
		}
		type pair struct {
			pat int
			eff table.Effect
		}
		count := map[pair]int{}
		for _, r := range lo.rules {
			count[pair{r.pat, r.eff}]++
		}
		for _, r := range ln.rules {
			count[pair{r.pat, r.eff}]--
		}
		for r, c := range count {
			if c != 0 {
				delta[r.pat] = true
			}
		}
	}
	if o.uiSig != n.uiSig {
		delta[b.uiAny] = true
	}
	for i := range delta {
		if _, lit := b.pats[i].Literal(); !lit {
			regions = append(regions, i)
		}
	}
	sort.Ints(regions)
	return regions, false
}

// ordered reports whether the block's rules are in precedence order.
func (l *layer) ordered() bool {
	for i := 1; i < len(l.rules); i++ {
		if l.rules[i].eff < l.rules[i-1].eff {
			return false
		}
	}
	return true
}

// search finds, in region r (a pattern index, or -1 for every name),
// names whose decision changes until every glob with such a name in the
// region has one, and the names no pattern matches have one when their
// decision changes. Each search stops at the shortest name that serves a
// glob not yet served, so it runs once per row found, plus once to prove
// there is no more.
func (b *block) search(rep *Report, r int) error {
	probe, self := anyName, -1
	if r >= 0 {
		self = r
		if !b.pats[r].Match("") {
			probe = b.pats[r]
		}
	}
	others := b.meeting(probe, self)
	otherPats := make([]*glob.Pattern, len(others))
	for j, o := range others {
		otherPats[j] = b.pats[o]
	}
	accept := func(m []bool) bool {
		clear(b.v)
		if self >= 0 {
			b.v[self] = true
		}
		for j, o := range others {
			b.v[o] = m[j]
		}
		if b.eval(0) == b.eval(1) {
			return false
		}
		if self >= 0 && b.row[self] && !b.found[self] {
			return true
		}
		matched := self >= 0
		for j, o := range others {
			if m[j] {
				matched = true
				if b.row[o] && !b.found[o] {
					return true
				}
			}
		}
		return !matched && b.wantUnmatched
	}
	for {
		name, ok, complete := b.bounds.Witness(probe, otherPats, accept)
		if !complete {
			what := "(every name)"
			if self >= 0 {
				what = b.srcs[self]
			}
			rep.Undecided = append(rep.Undecided, Undecided{Principals: b.principals(), Server: b.server, Kind: b.kind.String(), Pattern: what})
			return nil
		}
		if !ok {
			return nil
		}
		// The name serves every unfound glob it matches; it is shown as
		// an example of the most specific of them.
		label, best := "", -1
		for i, p := range b.pats {
			if !b.row[i] || b.found[i] || !p.Match(name) {
				continue
			}
			b.found[i] = true
			f := b.fixes[i]
			if n := len(f.prefix) + len(f.suffix); n > best {
				label, best = b.srcs[i], n
			}
		}
		found := FoundGlob
		if best < 0 {
			found = FoundOther
			b.wantUnmatched = false
		}
		if err := b.confirm(rep, name, found, label); err != nil {
			return err
		}
	}
}

// confirm decides name on both sides, matching it against every pattern,
// and records a change. A name the search found must change: if deciding
// it directly disagrees with the search, the comparison cannot be trusted
// and fails rather than hide a change.
func (b *block) confirm(rep *Report, name, found, pattern string) error {
	if b.seen[name] {
		return nil
	}
	for i, p := range b.pats {
		b.v[i] = p.Match(name)
	}
	before, after := b.decide(0), b.decide(1)
	if before.Effect == after.Effect {
		if found == FoundGlob || found == FoundOther {
			return fmt.Errorf("decision diff: internal error: %s %s %q was found to change (%s) but both tables decide %s",
				b.server, b.kind, name, pattern, before.Effect)
		}
		return nil
	}
	b.seen[name] = true
	rep.Changes = append(rep.Changes, Change{
		Principals: b.principals(), Server: b.server, Kind: b.kind.String(), Name: name,
		Found: found, Pattern: pattern, Before: before, After: after,
	})
	return nil
}

func (b *block) principals() []string {
	if b.class.principals == nil {
		return []string{}
	}
	return b.class.principals
}

// eval decides the match vector b.v with the model of side s.
func (b *block) eval(s int) table.Effect {
	m := &b.sides[s]
	if !m.exists {
		return table.Deny
	}
	d := table.Allow + 1
	for _, l := range m.layers {
		e := l.def
		for _, r := range l.rules {
			if b.v[r.pat] {
				e = r.eff
				break
			}
		}
		if e < d {
			d = e
		}
	}
	if b.uiAny >= 0 && d != table.Deny && b.v[b.uiAny] {
		if m.ui == nil || !m.ui.consent {
			return table.Deny
		}
		admitted := false
		for _, i := range m.ui.entries {
			admitted = admitted || b.v[i]
		}
		if !admitted {
			return table.Deny
		}
	}
	return d
}

// decide is eval with what decided, as decide.Table.Decide reports it.
func (b *block) decide(s int) Decision {
	m := &b.sides[s]
	if !m.exists {
		return Decision{Effect: table.Deny.String(), Reason: decide.UnknownServer.String()}
	}
	var d Decision
	best := table.Allow + 1
	for _, l := range m.layers {
		e, by := l.def, -1
		for i, r := range l.rules {
			if b.v[r.pat] {
				e, by = r.eff, i
				break
			}
		}
		if e >= best {
			continue
		}
		best = e
		d = Decision{Effect: e.String(), Reason: decide.ByDefault.String(), Scope: l.scope, Origin: l.defOrigin}
		if by >= 0 {
			r := l.rules[by].src
			d.Reason, d.List, d.Pattern, d.Origin = decide.ByRule.String(), listName(r.Effect), r.Pattern, r.Origin
		}
	}
	if b.uiAny >= 0 && best != table.Deny && b.v[b.uiAny] {
		admitted := false
		if m.ui != nil {
			for _, i := range m.ui.entries {
				admitted = admitted || b.v[i]
			}
		}
		switch {
		case !admitted:
			return Decision{Effect: table.Deny.String(), Reason: decide.UINotAllowlisted.String()}
		case !m.ui.consent:
			return Decision{Effect: table.Deny.String(), Reason: decide.UINoConsent.String()}
		}
	}
	return d
}

// pattern returns the index of a pattern, adding it to the universe.
func (b *block) pattern(src string) (int, error) {
	if i, ok := b.index[src]; ok {
		return i, nil
	}
	p, err := parseGlob(src)
	if err != nil {
		return 0, err
	}
	i := len(b.pats)
	b.index[src] = i
	b.pats = append(b.pats, p)
	b.row = append(b.row, false)
	b.srcs = append(b.srcs, src)
	b.fixes = append(b.fixes, affixes(src))
	return i, nil
}

// model builds one table's model for the block, as decide.Load assembles
// the layers for the class's principal.
func (b *block) model(t *table.Table) (model, error) {
	s, exists := t.Servers[b.server]
	m := model{exists: exists}
	var sig strings.Builder
	add := func(scope, id string, a *table.Access) error {
		def, ok := table.ParseEffect(a.Default)
		if !ok || def == table.Approve {
			return fmt.Errorf("table: server %q %s: invalid default %q", b.server, b.kind, a.Default)
		}
		l := layer{id: id, scope: scope, def: def, defOrigin: a.DefaultOrigin}
		fmt.Fprintf(&sig, "[%s %s", id, a.Default)
		for k := range a.Rules {
			r := &a.Rules[k]
			eff, ok := table.ParseEffect(r.Effect)
			if !ok {
				return fmt.Errorf("table: server %q %s: invalid effect %q", b.server, b.kind, r.Effect)
			}
			i, err := b.pattern(r.Pattern)
			if err != nil {
				return err
			}
			b.row[i] = true
			l.rules = append(l.rules, rule{pat: i, eff: eff, src: r})
			fmt.Fprintf(&sig, " %s:%q", r.Effect, r.Pattern)
		}
		sig.WriteString("]")
		m.layers = append(m.layers, l)
		return nil
	}
	if exists {
		base := s.Kind(b.kind.String())
		if base == nil {
			return model{}, fmt.Errorf("table: server %q has no %s block", b.server, b.kind)
		}
		if err := add(decide.ServerScope, decide.ServerScope, base); err != nil {
			return model{}, err
		}
	}
	// The scopes of a table without the server decide nothing for it, but
	// their patterns are patterns of that side: they are searched too.
	for i := range t.Scopes {
		sc := &t.Scopes[i]
		if !sc.AppliesTo(b.class.rep) {
			continue
		}
		for _, key := range [2]string{table.AllServers, b.server} {
			if ss, ok := sc.Servers[key]; ok {
				if a := ss.Kind(b.kind.String()); a != nil {
					if err := add(sc.Name, sc.Name+"@"+key, a); err != nil {
						return model{}, err
					}
				}
			}
		}
	}
	if exists && b.kind == table.Resource && s.UI != nil {
		ch, ok := t.Channels[s.UI.ConsentChannel]
		m.ui = &uiModel{consent: ok && ch.ReachesHuman}
		var ui strings.Builder
		fmt.Fprintf(&ui, "ui(consent=%v)", m.ui.consent)
		for _, e := range s.UI.AllowList {
			i, err := b.pattern(uiGlob(e))
			if err != nil {
				return model{}, err
			}
			b.row[i] = true
			m.ui.entries = append(m.ui.entries, i)
			fmt.Fprintf(&ui, " %q", e)
		}
		m.uiSig = ui.String()
		sig.WriteString(m.uiSig)
	}
	m.sig = sig.String()
	if !exists {
		m.sig, m.layers = "absent", nil
	}
	return m, nil
}

// meeting returns the patterns other than self that can match a name
// probe matches; the rest match none of its names, so leaving them out of
// its search changes no answer and keeps the search small.
func (b *block) meeting(probe *glob.Pattern, self int) []int {
	var out []int
	pf := affixes(probe.String())
	for j, q := range b.pats {
		if j == self {
			continue
		}
		if lit, ok := q.Literal(); ok {
			if probe.Match(lit) {
				out = append(out, j)
			}
			continue
		}
		if pf.meets(b.fixes[j]) {
			out = append(out, j)
		}
	}
	return out
}

// affix is the literal text a glob's names must start and end with.
type affix struct{ prefix, suffix string }

// meets reports whether two globs might match a common name: both literal
// prefixes must be prefixes of it, so one of the other, and likewise the
// suffixes. It may say yes for globs that share no name, never no for
// globs that do.
func (a affix) meets(b affix) bool {
	return (strings.HasPrefix(a.prefix, b.prefix) || strings.HasPrefix(b.prefix, a.prefix)) &&
		(strings.HasSuffix(a.suffix, b.suffix) || strings.HasSuffix(b.suffix, a.suffix))
}

// affixes returns the literal prefix and suffix of a valid glob.
func affixes(src string) affix {
	type elem struct {
		lit bool
		r   rune
	}
	var elems []elem
	for i := 0; i < len(src); {
		switch src[i] {
		case '*', '?':
			elems = append(elems, elem{})
			i++
		case '[':
			j := i + 1
			if j < len(src) && (src[j] == '!' || src[j] == '^') {
				j++
			}
			for first := true; j < len(src); first = false {
				if src[j] == ']' && !first {
					break
				}
				if src[j] == '\\' {
					j++
				}
				_, size := utf8.DecodeRuneInString(src[j:])
				j += size
			}
			elems = append(elems, elem{})
			i = j + 1
		case '\\':
			r, size := utf8.DecodeRuneInString(src[i+1:])
			elems = append(elems, elem{lit: true, r: r})
			i += 1 + size
		default:
			r, size := utf8.DecodeRuneInString(src[i:])
			elems = append(elems, elem{lit: true, r: r})
			i += size
		}
	}
	var pre, suf []rune
	for _, e := range elems {
		if !e.lit {
			break
		}
		pre = append(pre, e.r)
	}
	for k := len(elems) - 1; k >= 0 && elems[k].lit; k-- {
		suf = append([]rune{elems[k].r}, suf...)
	}
	return affix{string(pre), string(suf)}
}
