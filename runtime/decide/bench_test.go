package decide_test

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/policygen"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

func loadSpec(tb testing.TB, spec policygen.Spec) (*decide.Table, policygen.Policy) {
	tb.Helper()
	gen := policygen.Generate(spec)
	res := compiler.Compile(compiler.Input{Files: gen.Files, Source: table.Source{PolicyPath: "gen"}})
	if res.Table == nil {
		for _, d := range res.Diagnostics {
			tb.Log(d.Format(""))
		}
		tb.Fatal("generated policy does not compile")
	}
	rt, err := decide.Load(res.Table)
	if err != nil {
		tb.Fatal(err)
	}
	<-rt.Ready()
	return rt, gen
}

// BenchmarkDecide measures one decision on generated policies: 50 servers ×
// 35 tool rules (1,750), 200 × 50 (10,000), 500 × 50 (25,000) and 1,000 × 50
// (50,000), about 60% globs, deny, approval and allow mixed. In the spread
// rows requests cycle over every server and name, hits and misses alike, so
// each decision walks another server's automata: the cache-cold case. One
// request in four names one of the server's exact rules, as calls of tools
// a policy names do. The one-server rows ask one server only, as a gateway
// in front of a few busy servers mostly does. The named row is spread and
// asks as a member of one of ten groups, whose global layer narrows every
// server: a principal lookup and two layers a decision. The claims row is
// the named row for a principal the policy does not name, in that group by
// its access token (a principal.Ref, as the gateway's HTTP front makes
// one). Each row has its
// own last name element, so that -bench can pick one row alone.
func BenchmarkDecide(b *testing.B) {
	for _, size := range []struct {
		servers, rules        int
		spread, named, claims bool
	}{{50, 35, true, false, false}, {200, 50, true, false, false}, {500, 50, true, false, false}, {1000, 50, true, false, false}, {50, 35, false, false, false}, {200, 50, false, false, false}, {1000, 50, false, false, false}, {50, 35, true, true, false}, {50, 35, true, false, true}} {
		name := fmt.Sprintf("rules=%d/spread", size.servers*size.rules)
		spec := policygen.Spec{Servers: size.servers, RulesPerServer: size.rules, Seed: 1}
		switch {
		case !size.spread:
			name = fmt.Sprintf("rules=%d/one-server", size.servers*size.rules)
		case size.named:
			name = fmt.Sprintf("rules=%d/named", size.servers*size.rules)
			spec.Groups = 10
		case size.claims:
			// As the named row, for a principal the policy does not name,
			// in the same group by its access token: the gateway's
			// principal reference of an identity provider's client.
			name = fmt.Sprintf("rules=%d/claims", size.servers*size.rules)
			spec.Groups = 10
		}
		type req struct{ server, name string }
		const nreqs = 4096 // a power of two: the loop picks requests by mask, not by division
		var (
			rt        *decide.Table
			principal string
			reqs      []req
		)
		b.Run(name, func(b *testing.B) {
			// Load on the row's first call only (the framework calls
			// again for each b.N), so that a row the -bench pattern
			// leaves out is never loaded, and collect the garbage of
			// building the automata, so that neither the build nor its
			// collection runs while decisions are timed.
			if rt == nil {
				var gen policygen.Policy
				rt, gen = loadSpec(b, spec)
				switch {
				case size.named:
					principal = gen.Members[7]
				case size.claims:
					// gen.Members[7] is in the fourth group, team003.
					principal = claimed("agent-7@example.com", "team003")
					if rt.ClassOf(principal) != rt.ClassOf(gen.Members[7]) {
						b.Fatal("the claimed group set does not decide as the listed member")
					}
				}
				exact := map[string][]string{} // each server's literal tool rules
				for _, server := range gen.Servers {
					srv := rt.Source().Servers[server]
					for _, r := range srv.Kind(table.Tool.String()).Rules {
						if !strings.ContainsAny(r.Pattern, `*?[\`) {
							exact[server] = append(exact[server], r.Pattern)
						}
					}
				}
				for i := 0; len(reqs) < nreqs; i++ {
					server := gen.Servers[0]
					if size.spread {
						server = gen.Servers[i%len(gen.Servers)]
					}
					name := gen.Names[(i*7)%len(gen.Names)]
					if lits := exact[server]; i%4 == 3 && len(lits) > 0 {
						name = lits[(i/4)%len(lits)]
					}
					reqs = append(reqs, req{server, name})
				}
				runtime.GC()
			}
			b.ReportAllocs()
			b.ResetTimer()
			var allowed int
			for i := 0; i < b.N; i++ {
				r := &reqs[i&(nreqs-1)]
				if rt.Decide(principal, r.server, table.Tool, r.name).Effect == table.Allow {
					allowed++
				}
			}
			if allowed == 0 {
				b.Fatal("no request was allowed: the generated policy is degenerate")
			}
		})
	}
}

// TestDecideAllocs pins the zero-allocation property of Decide, for named and
// anonymous principals, hits and misses.
func TestDecideAllocs(t *testing.T) {
	rt, gen := loadSpec(t, policygen.Spec{Servers: 5, RulesPerServer: 35, Groups: 2, Seed: 1})
	allocs := testing.AllocsPerRun(200, func() {
		for _, n := range gen.Names[:40] {
			rt.Decide("", gen.Servers[1], table.Tool, n)
			rt.Decide(gen.Members[1], gen.Servers[1], table.Tool, n) // a group narrows
			rt.Decide("nobody", "missing", table.Tool, n)
		}
	})
	if allocs != 0 {
		t.Fatalf("Decide allocates %.1f times per run; want 0", allocs)
	}
	// A resource URI in normal form is decided as written only.
	uris := []string{"file:///srv/projects/app/main.go", "repo://acme/widgets?ref=main", "ui://files/app.html", "mem:notes/today"}
	allocs = testing.AllocsPerRun(200, func() {
		for _, u := range uris {
			rt.Decide("", gen.Servers[1], table.Resource, u)
		}
	})
	if allocs != 0 {
		t.Fatalf("Decide allocates %.1f times per run on resource URIs in normal form; want 0", allocs)
	}
}

// TestGeneratedGroupsNarrow checks the generated groups the named benchmark
// relies on: the servers are the same with and without groups, every
// member's decisions on every server go through its group's layer, and that
// layer changes some of them.
func TestGeneratedGroupsNarrow(t *testing.T) {
	spec := policygen.Spec{Servers: 5, RulesPerServer: 35, Seed: 1}
	plain := policygen.Generate(spec)
	spec.Groups = 3
	rt, gen := loadSpec(t, spec)
	if len(gen.Members) != 6 {
		t.Fatalf("%d members; want 6", len(gen.Members))
	}
	if len(gen.Files) != len(plain.Files)+1 {
		t.Fatalf("%d files with groups, %d without; want one more", len(gen.Files), len(plain.Files))
	}
	for i, f := range plain.Files {
		if g := gen.Files[i]; g.Name != f.Name || string(g.Data) != string(f.Data) {
			t.Errorf("%s differs when groups are generated", f.Name)
		}
	}
	changed := 0
	for _, member := range gen.Members {
		for _, server := range gen.Servers {
			ex := rt.Explain(member, server, table.Tool, gen.Names[0])
			if !slices.ContainsFunc(ex.Scopes, func(s string) bool { return strings.HasPrefix(s, "group:") }) {
				t.Errorf("%s on %s: scopes %q; want the member's group among them", member, server, ex.Scopes)
			}
			for _, n := range gen.Names {
				if rt.Decide(member, server, table.Tool, n).Effect != rt.Decide("", server, table.Tool, n).Effect {
					changed++
				}
			}
		}
	}
	if changed == 0 {
		t.Fatal("no group changed a decision: the generated groups are degenerate")
	}
}

// BenchmarkLoadLargeGroup loads a table whose one group has 5,000 members,
// over 20 servers. Members of the same groups share one view, so the load
// builds two views (the group's and everyone else's), not 5,001:
//
//	go test ./runtime/decide -run '^$' -bench LoadLargeGroup -benchmem
func BenchmarkLoadLargeGroup(b *testing.B) {
	var src strings.Builder
	src.WriteString("package policy\n")
	for s := range 20 {
		fmt.Fprintf(&src, "mcp_servers: s%02d: access: tool: allow_list: [\"get_*\", \"list_*\"]\n", s)
	}
	src.WriteString("groups: eng: {\n\tmembers: [")
	for i := range 5000 {
		fmt.Fprintf(&src, "%q, ", fmt.Sprintf("u%04d", i))
	}
	src.WriteString("]\n\tglobal: access: tool: deny_list: [\"get_secret\"]\n}\n")
	benchLoad(b, src.String(), func(rt *decide.Table) {
		if rt.ClassOf("u0001") != rt.ClassOf("u4999") {
			b.Fatal("members of one group are of different classes")
		}
	})
}

// benchLoad compiles the policy src and loads its table b.N times,
// checking each with check.
func benchLoad(b *testing.B, src string, check func(*decide.Table)) {
	res := compiler.Compile(compiler.Input{Files: []compiler.File{{Name: "bench.cue", Data: []byte(src)}}, Source: table.Source{PolicyPath: "bench"}})
	if res.Table == nil {
		b.Fatalf("the benchmark policy does not compile: %v", res.Diagnostics)
	}
	b.ReportAllocs()
	for b.Loop() {
		rt, err := decide.Load(res.Table)
		if err != nil {
			b.Fatal(err)
		}
		<-rt.Ready()
		check(rt)
	}
}

// BenchmarkLoadManyPrincipals loads a table with 4,000 principals, each
// with a scope of its own. Each principal's scopes are found from the
// scopes' members, not by asking every scope about every principal:
//
//	go test ./runtime/decide -run '^$' -bench LoadManyPrincipals -benchmem
func BenchmarkLoadManyPrincipals(b *testing.B) {
	var src strings.Builder
	src.WriteString("package policy\nmcp_servers: s: access: tool: allow_list: [\"get_*\", \"run_*\"]\n")
	for i := range 4000 {
		fmt.Fprintf(&src, "principals: \"u%d@example.com\": mcp_servers: s: access: tool: deny_list: [\"run_%d_*\"]\n", i, i)
	}
	benchLoad(b, src.String(), func(rt *decide.Table) {
		if rt.ClassOf("u1@example.com") == rt.ClassOf("u2@example.com") {
			b.Fatal("principals with scopes of their own share a class")
		}
	})
}
