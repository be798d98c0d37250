package testcase

import (
	"fmt"
	"slices"
	"strings"

	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// Runner decides cases with a compiled table loaded into runtime/decide:
// the decisions are the gateway's, made by the same code from the same
// table.
type Runner struct {
	// rt decides; it is loaded from a copy of the compiled table in which
	// each set of groups a case names has one more member, made for the
	// cases (see memberOf), and nothing else differs.
	rt    *decide.Table
	rules *rules
	// keeps caches, per principal, server and kind, whether a narrowing
	// scope that applies has allow entries (see Run).
	keeps map[whoServerKind]bool
	// scopes holds, per principal decided as, the indexes of the scopes
	// that apply to it.
	scopes map[string][]int
	src    *table.Table
}

type whoServerKind struct {
	who, server string
	kind        table.Kind
}

// buildCost is what building a rule's automaton costs (decide.Load), in
// glob matches, as BenchmarkTest compares them. A Runner
// builds the table's automata before deciding only when deciding its
// cases pattern by pattern (decide.LoadForInspection, exact too) would
// cost more than the build: for many cases on large blocks, not for
// thousands of cases over blocks of fifty rules.
const buildCost = 1000

// NewRunner loads table t to decide cases, which Check must have accepted
// with no problem. The rules of the loaded table are t's own (their
// pointers are t's), so a decision names a rule of t.
func NewRunner(t *table.Table, cases []*Case) (*Runner, error) {
	load := *t
	load.Scopes = slices.Clone(t.Scopes)
	added := map[string]bool{}
	for _, c := range cases {
		c.who = c.Principal
		if len(c.Groups) == 0 {
			continue
		}
		c.who = memberOf(c.Groups)
		if added[c.who] {
			continue
		}
		added[c.who] = true
		for i := range load.Scopes {
			sc := &load.Scopes[i]
			if g, ok := strings.CutPrefix(sc.Name, "group:"); ok && slices.Contains(c.Groups, g) {
				at, _ := slices.BinarySearch(sc.Members, c.who)
				sc.Members = slices.Insert(slices.Clone(sc.Members), at, c.who)
			}
		}
	}
	rs := indexRules(t)
	var rt *decide.Table
	var err error
	if matches(t, cases) > buildCost*len(rs.all) {
		if rt, err = decide.Load(&load); err == nil {
			<-rt.Ready()
		}
	} else {
		rt, err = decide.LoadForInspection(&load)
	}
	if err != nil {
		return nil, fmt.Errorf("load the compiled table: %w", err)
	}
	return &Runner{rt: rt, rules: rs, keeps: map[whoServerKind]bool{}, scopes: map[string][]int{}, src: &load}, nil
}

// matches is the number of glob matches deciding cases pattern by pattern
// costs at most: the rules of each case's server and kind.
func matches(t *table.Table, cases []*Case) int {
	n := 0
	for _, c := range cases {
		s, ok := t.Servers[c.Server]
		if a := s.Access(c.Kind); ok && a != nil {
			n += len(a.Rules)
		}
	}
	return n
}

// memberOf is the principal a case naming groups is decided as: a member
// of exactly those groups with no scope of its own. Its name cannot be a
// principal's (those start with a letter or a digit), and is what explain
// shows for it.
func memberOf(groups []string) string {
	set := slices.Clone(groups)
	slices.Sort(set)
	return "(a member of " + groupList(slices.Compact(set)) + ")"
}

// Result is one case's outcome.
type Result struct {
	Case     *Case
	Decision decide.Decision
	Passed   bool
	// Explanation is the decision with the rules it beat, for a case that
	// failed; nil for one that passed.
	Explanation *decide.Explanation
}

// Who is the principal the case was decided as: its principal, a name
// standing for a member of its groups, or "" for anyone.
func (r *Result) Who() string { return r.Case.who }

// Report is the outcome of a run.
type Report struct {
	Results []Result
	Failed  int
	// decided counts, per rule (in rules order), the cases it decided; for a
	// narrowing scope's allow entry, the cases it kept from being denied.
	// Nil unless the run counted (see Run).
	decided []int
	rules   *rules
}

// Run decides every case and compares each decision with what the case
// expects. With count set it also counts the cases each rule decided, for
// Coverage: a rule decided a case when the decision names it; a narrowing
// scope's allow entry, which never decides, when it is the first rule of
// its block that matches and the decision is not deny (as the
// reachability analysis counts it, compiler.AnalyzeReach).
func (r *Runner) Run(cases []*Case, count bool) *Report {
	rep := &Report{Results: make([]Result, len(cases)), rules: r.rules}
	if count {
		rep.decided = make([]int, len(r.rules.all))
	}
	for i, c := range cases {
		d := r.rt.Decide(c.who, c.Server, c.Kind, c.Item)
		passed := d.Effect == c.Expect && (c.ref == nil || c.ref.decided(d))
		res := Result{Case: c, Decision: d, Passed: passed}
		var ex *decide.Explanation
		if !passed {
			rep.Failed++
			e := r.rt.Explain(c.who, c.Server, c.Kind, c.Item)
			ex = &e
			res.Explanation = ex
		}
		if count {
			if d.Rule != nil {
				rep.decided[r.rules.byPtr[d.Rule]]++
			}
			if d.Effect != table.Deny && r.narrowingAllows(c) {
				if ex == nil {
					e := r.rt.Explain(c.who, c.Server, c.Kind, c.Item)
					ex = &e
				}
				r.countKeeps(rep, ex)
			}
		}
		rep.Results[i] = res
	}
	return rep
}

// narrowingAllows reports whether a narrowing scope that applies to the
// case's principal has allow entries for its server and kind.
func (r *Runner) narrowingAllows(c *Case) bool {
	key := whoServerKind{c.who, c.Server, c.Kind}
	if v, ok := r.keeps[key]; ok {
		return v
	}
	idx, ok := r.scopes[c.who]
	if !ok {
		for i := range r.src.Scopes {
			if r.src.Scopes[i].AppliesTo(c.who) {
				idx = append(idx, i)
			}
		}
		r.scopes[c.who] = idx
	}
	found := false
	for _, i := range idx {
		for _, server := range [2]string{table.AllServers, c.Server} {
			s, ok := r.src.Scopes[i].Servers[server]
			if a := s.Access(c.Kind); ok && a != nil && slices.ContainsFunc(a.Rules, func(rule table.Rule) bool { return rule.Effect == table.Allow.String() }) {
				found = true
			}
		}
	}
	r.keeps[key] = found
	return found
}

// countKeeps counts, for a decision that is not deny, the narrowing allow
// entries that are the first matching rule of their block.
func (r *Runner) countKeeps(rep *Report, ex *decide.Explanation) {
	first := map[int]int{} // block → index into rules of its first match
	note := func(rule *table.Rule) {
		i, ok := r.rules.byPtr[rule]
		if !ok {
			return
		}
		b := r.rules.all[i].block
		if j, seen := first[b]; !seen || r.rules.all[i].index < r.rules.all[j].index {
			first[b] = i
		}
	}
	if ex.Decision.Rule != nil {
		note(ex.Decision.Rule)
	}
	for _, m := range ex.Beaten {
		note(m.Rule)
	}
	for _, i := range first {
		if r.rules.all[i].keeps() {
			rep.decided[i]++
		}
	}
}
