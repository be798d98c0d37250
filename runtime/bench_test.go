package runtime_test

import (
	"fmt"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/policygen"
	"github.com/policyc/policyc/runtime"
	"github.com/policyc/policyc/runtime/table"
)

func loadGenerated(tb testing.TB, servers, rules int) (*runtime.Table, policygen.Policy) {
	tb.Helper()
	gen := policygen.Generate(policygen.Spec{Servers: servers, RulesPerServer: rules, Seed: 1})
	res := compiler.Compile(compiler.Input{Files: gen.Files, Source: table.Source{PolicyPath: "gen"}})
	if res.Table == nil {
		for _, d := range res.Diagnostics {
			tb.Log(d.Format(""))
		}
		tb.Fatal("generated policy does not compile")
	}
	rt, err := runtime.Load(res.Table)
	if err != nil {
		tb.Fatal(err)
	}
	<-rt.Ready()
	return rt, gen
}

// BenchmarkDecide measures one decision on generated policies: 50 servers ×
// 35 tool rules (1,750) and 200 × 50 (10,000), about 60% globs, deny,
// approval and allow mixed. Requests cycle over every server and name, hits
// and misses alike, so each decision walks another server's automaton: the
// cache-cold case. One request in four names one of the server's exact
// rules, as calls of tools a policy names do. The one-server variants ask
// one server only, as a gateway in front of a few busy servers mostly does.
func BenchmarkDecide(b *testing.B) {
	for _, size := range []struct {
		servers, rules int
		spread         bool
	}{{50, 35, true}, {200, 50, true}, {50, 35, false}, {200, 50, false}} {
		name := fmt.Sprintf("rules=%d", size.servers*size.rules)
		if !size.spread {
			name += "/one-server"
		}
		// Load once per size, outside the timed function (which the
		// framework calls again for each b.N), and collect the garbage
		// of building the automata, so that neither the build nor its
		// collection runs while decisions are timed.
		rt, gen := loadGenerated(b, size.servers, size.rules)
		exact := map[string][]string{} // each server's literal tool rules
		for _, server := range gen.Servers {
			srv := rt.Source().Servers[server]
			for _, r := range srv.Kind(table.KindTool).Rules {
				if !strings.ContainsAny(r.Pattern, `*?[\`) {
					exact[server] = append(exact[server], r.Pattern)
				}
			}
		}
		type req struct{ server, name string }
		const nreqs = 4096 // a power of two: the loop picks requests by mask, not by division
		reqs := make([]req, 0, nreqs)
		for i := 0; len(reqs) < cap(reqs); i++ {
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
		goruntime.GC()
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			var allowed int
			for i := 0; i < b.N; i++ {
				r := &reqs[i&(nreqs-1)]
				if rt.Decide("", r.server, runtime.Tool, r.name).Effect == runtime.Allow {
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
	rt, gen := loadGenerated(t, 5, 35)
	allocs := testing.AllocsPerRun(200, func() {
		for _, n := range gen.Names[:40] {
			rt.Decide("", gen.Servers[1], runtime.Tool, n)
			rt.Decide("nobody", "missing", runtime.Tool, n)
		}
	})
	if allocs != 0 {
		t.Fatalf("Decide allocates %.1f times per run; want 0", allocs)
	}
}
