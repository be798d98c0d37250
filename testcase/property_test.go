package testcase

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/glob"
	"github.com/policyc/policyc/internal/policygen"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// TestCoverageAgreesWithExplain: over random policies (internal/policygen,
// with groups, and narrowing allow lists added here) and random cases,
// the cases Coverage says a rule decided are exactly the cases whose
// explanation names it as the deciding rule; for a narrowing scope's allow
// entry, exactly the cases in which it is the first rule of its block to
// match the name (by its own glob, not by the engine) and the decision is
// not deny. No rule the reachability analysis calls unreachable decides
// any case.
func TestCoverageAgreesWithExplain(t *testing.T) {
	kept := 0
	defer func() {
		if kept == 0 {
			t.Error("no narrowing allow entry kept any case: the property says nothing of them")
		}
	}()
	for seed := uint64(1); seed <= 12; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		spec := policygen.Spec{Servers: 2 + r.IntN(4), RulesPerServer: 3 + r.IntN(12), Groups: r.IntN(4), Seed: seed}
		gen := policygen.Generate(spec)
		files := append(gen.Files, narrowingAllows(r, gen))
		res := compiler.Compile(compiler.Input{Files: files, Source: table.Source{PolicyPath: "gen"}})
		if res.Table == nil {
			for _, d := range res.Diagnostics {
				t.Log(d.Format(""))
			}
			t.Fatalf("seed %d: the generated policy does not compile", seed)
		}
		principals := append([]string{"", "nobody@example.com", "pat@example.com"}, gen.Members...)
		var cases []*Case
		for i := range 300 {
			c := &Case{Group: "g", Name: fmt.Sprint(i), Principal: principals[r.IntN(len(principals))],
				Server: gen.Servers[r.IntN(len(gen.Servers))], Kind: table.Tool, Item: gen.Names[r.IntN(len(gen.Names))], Expect: table.Deny}
			if r.IntN(10) == 0 {
				c.Kind = table.Prompt
			}
			cases = append(cases, c)
		}
		if ds := Check(cases, res.Table); len(ds) > 0 {
			t.Fatal(formatAll(ds))
		}
		runner, err := NewRunner(res.Table, cases)
		if err != nil {
			t.Fatal(err)
		}
		cov := runner.Run(cases, true).Coverage(compiler.AnalyzeReach(res.Policy, compiler.ReachOptions{}))

		rt, err := decide.LoadForInspection(res.Table)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int{}
		key := func(scope, server, kind string, effect, pattern string) string {
			return strings.Join([]string{scope, server, kind, effect, pattern}, "\x00")
		}
		for _, c := range cases {
			ex := rt.Explain(c.Principal, c.Server, c.Kind, c.Item)
			if d := ex.Decision; d.Rule != nil {
				server := c.Server
				if d.Scope != decide.ServerScope && !blockHas(res.Table, d.Scope, c.Server, c.Kind, d.Rule) {
					server = table.AllServers
				}
				want[key(d.Scope, server, c.Kind.String(), d.Rule.Effect, d.Rule.Pattern)]++
			}
			if ex.Decision.Effect == table.Deny {
				continue
			}
			for _, sc := range res.Table.Scopes {
				if !sc.AppliesTo(c.Principal) {
					continue
				}
				for _, server := range []string{table.AllServers, c.Server} {
					s, ok := sc.Servers[server]
					if a := s.Access(c.Kind); ok && a != nil {
						if first := firstMatch(t, a, c.Item); first != nil && first.Effect == table.Allow.String() {
							want[key(sc.Name, server, c.Kind.String(), first.Effect, first.Pattern)]++
						}
					}
				}
			}
		}
		total := 0
		for _, rc := range cov.Rules {
			k := key(rc.Scope, rc.Server, rc.Kind, rc.Effect, rc.Pattern)
			if rc.Cases != want[k] {
				t.Errorf("seed %d: %s at %s: coverage counts %d cases, explain %d", seed, rc.Label(), rc.Origin, rc.Cases, want[k])
			}
			if rc.Reach == compiler.Unreachable && rc.Cases > 0 {
				t.Errorf("seed %d: %s at %s decided %d cases, and the analysis calls it unreachable (%s)", seed, rc.Label(), rc.Origin, rc.Cases, rc.Why)
			}
			delete(want, k)
			total += rc.Cases
			if rc.Keeps {
				kept += rc.Cases
			}
		}
		for k, n := range want {
			t.Errorf("seed %d: explain counts %d cases for a rule coverage does not list: %q", seed, n, k)
		}
		if total == 0 {
			t.Errorf("seed %d: no rule decided any of the cases: the property says nothing", seed)
		}
	}
}

// narrowingAllows is a file of principal scopes and a group with allow
// lists, which take away what they do not list, over gen's servers.
func narrowingAllows(r *rand.Rand, gen policygen.Policy) compiler.File {
	var b strings.Builder
	b.WriteString("package policy\n\n")
	verbs := []string{"get", "list", "search", "create", "delete", "merge"}
	globs := func() string {
		n := 1 + r.IntN(3)
		var out []string
		for range n {
			if g := fmt.Sprintf("%q", verbs[r.IntN(len(verbs))]+"_*"); !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
		return strings.Join(out, ", ")
	}
	fmt.Fprintf(&b, "principals: \"pat@example.com\": mcp_servers: %q: access: tool: {allow_list: [%s], deny_list: [%s]}\n",
		gen.Servers[0], globs(), fmt.Sprintf("%q", "*_secret"))
	fmt.Fprintf(&b, "groups: readers: {members: [\"pat@example.com\", \"nobody@example.com\"], global: access: tool: allow_list: [%s]}\n", globs())
	return compiler.File{Name: "narrowing.cue", Data: []byte(b.String())}
}

// blockHas reports whether the block of scope for server (not every
// server) holds rule.
func blockHas(t *table.Table, scope, server string, kind table.Kind, rule *table.Rule) bool {
	for _, sc := range t.Scopes {
		if sc.Name != scope {
			continue
		}
		s, ok := sc.Servers[server]
		if a := s.Access(kind); ok && a != nil {
			for i := range a.Rules {
				if &a.Rules[i] == rule {
					return true
				}
			}
		}
	}
	return false
}

// firstMatch is the first rule of a block whose glob matches name, by the
// glob alone.
func firstMatch(t *testing.T, a *table.Access, name string) *table.Rule {
	for i := range a.Rules {
		p, err := glob.Parse(a.Rules[i].Pattern)
		if err != nil {
			t.Fatal(err)
		}
		if p.Match(name) {
			return &a.Rules[i]
		}
	}
	return nil
}
