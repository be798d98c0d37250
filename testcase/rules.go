package testcase

import (
	"maps"
	"slices"

	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// ruleAt is one rule of a table and the block it is in.
type ruleAt struct {
	rule *table.Rule
	// scope is decide.ServerScope for a server's own rules, else the
	// narrowing scope's name; server is the block's server, or
	// table.AllServers for a narrowing scope's rules of every server.
	scope, server string
	kind          table.Kind
	// index is the rule's position in its block; block numbers the
	// blocks of the table.
	index, block int
}

// narrowing reports whether the rule is a narrowing scope's.
func (r *ruleAt) narrowing() bool { return r.scope != decide.ServerScope }

// keeps reports whether the rule is a narrowing scope's allow entry: it
// never decides a case (a narrower scope only takes access away), it keeps
// its scope's allow_list from denying the names it matches.
func (r *ruleAt) keeps() bool { return r.narrowing() && r.rule.Effect == table.Allow.String() }

// rules indexes every rule of a table by the pointer a decision names it
// with (decide.Decision.Rule points into the table it was loaded from).
type rules struct {
	all   []ruleAt
	byPtr map[*table.Rule]int
	// of holds, per server and kind, the rules that can decide its items:
	// the server's own and those of every narrowing scope for it or for
	// every server.
	of map[serverKind][]int
}

type serverKind struct {
	server string
	kind   table.Kind
}

// indexRules indexes the rules of t: servers in name order, then scopes in
// table order, each block's rules in block order.
func indexRules(t *table.Table) *rules {
	rs := &rules{byPtr: map[*table.Rule]int{}, of: map[serverKind][]int{}}
	block := 0
	add := func(scope, server string, s table.Server) {
		for k := table.Tool; k < table.NumKinds; k++ {
			a := s.Access(k)
			if a == nil {
				continue
			}
			for i := range a.Rules {
				rs.byPtr[&a.Rules[i]] = len(rs.all)
				rs.all = append(rs.all, ruleAt{rule: &a.Rules[i], scope: scope, server: server, kind: k, index: i, block: block})
			}
			block++
		}
	}
	for _, name := range slices.Sorted(maps.Keys(t.Servers)) {
		add(decide.ServerScope, name, t.Servers[name])
	}
	for _, sc := range t.Scopes {
		for _, name := range slices.Sorted(maps.Keys(sc.Servers)) {
			add(sc.Name, name, sc.Servers[name])
		}
	}
	for i, r := range rs.all {
		if !r.narrowing() {
			key := serverKind{r.server, r.kind}
			rs.of[key] = append(rs.of[key], i)
		}
	}
	for i, r := range rs.all {
		if !r.narrowing() {
			continue
		}
		if r.server != table.AllServers {
			if _, ok := t.Servers[r.server]; ok {
				key := serverKind{r.server, r.kind}
				rs.of[key] = append(rs.of[key], i)
			}
			continue
		}
		for name := range t.Servers {
			key := serverKind{name, r.kind}
			rs.of[key] = append(rs.of[key], i)
		}
	}
	for key, idx := range rs.of {
		slices.Sort(idx)
		rs.of[key] = idx
	}
	return rs
}
