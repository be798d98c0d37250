package testcase

import (
	"cmp"
	"fmt"
	"math/big"
	"slices"

	"github.com/policyc/policyc/compiler"
)

// RuleCoverage is one rule of the table and the cases of a run it decided.
type RuleCoverage struct {
	// Scope is "server" for a server's own rules, else the narrowing
	// scope ("global", "group:NAME", "principal:NAME"); Server is the
	// block's server, or "*" for a narrowing scope's rules of every
	// server.
	Scope, Server, Kind string
	Effect, Pattern     string
	// Origin is the rule's FILE:LINE in the table; Pos where its entry is
	// written, with its column when the analysis knows it.
	Origin string
	Pos    compiler.Position
	// Cases is the number of cases the rule decided. For a narrowing
	// scope's allow entry (Keeps), which never decides, it is the number of
	// cases it kept from its scope's allow_list default.
	Cases int
	Keeps bool
	// Reach is the reachability analysis's verdict; an Unreachable rule
	// decides no name for any principal, and Why is the code of the
	// finding that says so, when there is one.
	Reach compiler.Reachability
	Why   string
}

// Label is the rule as explain names it, with its block:
// allow_list "get_*" (server scope, tools of github).
func (rc *RuleCoverage) Label() string {
	server := rc.Server
	if server == "*" {
		server = "every server"
	}
	return fmt.Sprintf("%s %q (%s scope, %ss of %s)", listOf(rc.Effect), rc.Pattern, rc.Scope, rc.Kind, server)
}

// Coverage is every rule of the table with the cases of a run it decided.
type Coverage struct {
	// Rules are in the order of their positions.
	Rules []RuleCoverage
	// Counted is the number of rules that are not unreachable: coverage is
	// Covered of Counted. Unreachable rules are reported as such, never as
	// uncovered: no case can exercise them.
	Counted, Covered, Unreachable int
}

// Coverage returns the rules and the cases that decided each; reach is the
// reachability analysis of the policy the table was compiled from
// (compiler.AnalyzeReach), which tells the unreachable rules and where each
// is written. The report must come from Run with counting on.
func (rep *Report) Coverage(reach *compiler.ReachResult) *Coverage {
	type blockKey struct {
		scope, server, kind string
		index               int
	}
	verdicts := map[blockKey]*compiler.RuleReach{}
	why := map[compiler.Position]string{}
	if reach != nil {
		for i := range reach.Rules {
			rr := &reach.Rules[i]
			verdicts[blockKey{rr.Scope, rr.Server, rr.Kind, rr.Index}] = rr
		}
		for _, d := range reach.Diagnostics {
			if _, ok := why[d.Pos]; !ok && unreachableCodes[d.Code] {
				why[d.Pos] = d.Code
			}
		}
	}
	cov := &Coverage{}
	for i, r := range rep.rules.all {
		rc := RuleCoverage{Scope: r.scope, Server: r.server, Kind: r.kind.String(), Effect: r.rule.Effect,
			Pattern: r.rule.Pattern, Origin: r.rule.Origin, Keeps: r.keeps(), Pos: originPos(r.rule.Origin)}
		if rep.decided != nil {
			rc.Cases = rep.decided[i]
		}
		if rr := verdicts[blockKey{r.scope, r.server, r.kind.String(), r.index}]; rr != nil {
			rc.Reach = rr.Status
			if rr.Entry != nil && rr.Entry.Pos.File != "" {
				rc.Pos = rr.Entry.Pos
			}
		}
		if rc.Reach == compiler.Unreachable {
			rc.Why = why[rc.Pos]
			cov.Unreachable++
		} else {
			cov.Counted++
			if rc.Cases > 0 {
				cov.Covered++
			}
		}
		cov.Rules = append(cov.Rules, rc)
	}
	slices.SortStableFunc(cov.Rules, func(a, b RuleCoverage) int {
		return cmp.Or(compiler.CompareDiagnostics(compiler.Diagnostic{Pos: a.Pos}, compiler.Diagnostic{Pos: b.Pos}),
			cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Server, b.Server), cmp.Compare(a.Kind, b.Kind))
	})
	return cov
}

// unreachableCodes are the findings that say a rule decides nothing.
var unreachableCodes = map[string]bool{
	compiler.CodeEmptyPattern:       true,
	compiler.CodeDuplicatePattern:   true,
	compiler.CodeShadowedRule:       true,
	compiler.CodeApprovalNeverAsked: true,
	compiler.CodeAllowNeverAllows:   true,
	compiler.CodeNarrowingNoEffect:  true,
	compiler.CodeRedundantDeny:      true,
	compiler.CodeUIResourceDenied:   true,
	compiler.CodeUnknownServer:      true,
}

// originPos reads a table origin, FILE:LINE, as a position.
func originPos(origin string) compiler.Position {
	if m := originRE.FindStringSubmatch(origin); m != nil {
		var line int
		fmt.Sscan(m[2], &line)
		return compiler.Position{File: m[1], Line: line}
	}
	return compiler.Position{File: origin}
}

// Percent is Covered of Counted as a percentage with one decimal, rounded
// down, never up: 999 of 1,000 rules is 99.9, and 11,999 of 12,000 is
// 99.9, not 100.0. With no rule to count it is 100.0.
func (c *Coverage) Percent() string {
	if c.Counted == 0 {
		return "100.0"
	}
	tenths := c.Covered * 1000 / c.Counted
	return fmt.Sprintf("%d.%d", tenths/10, tenths%10)
}

// Meets reports whether Covered of Counted is at least min percent,
// exactly (no rounding): 999 of 1,000 does not meet 100 nor 99.95.
func (c *Coverage) Meets(min *big.Rat) bool {
	if c.Counted == 0 {
		return true
	}
	got := big.NewRat(int64(c.Covered)*100, int64(c.Counted))
	return got.Cmp(min) >= 0
}

// ParsePercent reads a --coverage-min value: a decimal number from 0 to
// 100, read exactly ("99.95" is 1999/20, not the nearest float).
func ParsePercent(s string) (*big.Rat, bool) {
	r, ok := new(big.Rat).SetString(s)
	if !ok || r.Sign() < 0 || r.Cmp(big.NewRat(100, 1)) > 0 {
		return nil, false
	}
	for _, ch := range s {
		if (ch < '0' || ch > '9') && ch != '.' {
			return nil, false // no fractions (1/2), exponents or signs
		}
	}
	return r, true
}
