package gateway

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/runtime/gateway/internal/testupstream"
	"github.com/policyc/policyc/runtime/table"
)

// The benchmarks compare the gateway with a bare pass-through proxy on the
// same SDK (bareProxy), side by side in one run, over the same transports.
// Run them with, for example:
//
//	go test ./runtime/gateway -run '^$' -bench 'ToolCall|PolicyWork|IdleSession' -benchtime=2000x -count=3
//
// Figures are in docs/performance.md.

// benchPolicy allows the one tool the benchmarks call.
const benchPolicy = `package policy

defaults: {tool: "deny", prompt: "deny", resource: "deny"}
mcp_servers: github: access: tool: allow_list: ["echo"]
`

var benchArgs = map[string]any{"title": "a benchmark issue", "labels": []any{"bug", "p2"}, "n": 3}

// decisionFile is a real file for the decision log: the benchmarks pay for
// the write the gateway makes on every decision.
func decisionFile(tb testing.TB) *os.File {
	f, err := os.OpenFile(filepath.Join(tb.TempDir(), "decisions.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

// connectClient connects a benchmark client over t at 2025-11-25.
func connectClient(tb testing.TB, t mcp.Transport) *mcp.ClientSession {
	return connectAt(tb, t, legacyVersion, nil)
}

// connectAt connects a benchmark client over t asking for version.
func connectAt(tb testing.TB, t mcp.Transport, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, opts).Connect(context.Background(), t, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		tb.Fatal(err)
	}
	return cs
}

// benchGCPercent is the gateway command's collection target when GOGC is
// not set (gcPercent in cmd/gc.go, the command's garbage collection
// policy), copied here so that the benchmarks measure the gateway as the
// command runs it.
const benchGCPercent = 400

// benchGC runs an in-process benchmark with the collection target of the
// gateway command's stdio front, benchGCPercent, unless GOGC is set. Every
// party in the process shares it.
func benchGC(b *testing.B) {
	if os.Getenv("GOGC") != "" {
		return
	}
	old := debug.SetGCPercent(benchGCPercent)
	b.Cleanup(func() { debug.SetGCPercent(old) })
}

// benchHeapFloor applies the heap floor of the gateway command's HTTP
// front (cmd/gc.go) to a benchmark process: every second the target is set
// to let about 64 MiB of garbage accumulate over the live heap, stacks and
// globals, between benchGCPercent and 1600 (the floor over the runtime's
// 4 MiB minimum heap). It is the command's rule without its hysteresis;
// stop restores the target the process had.
func benchHeapFloor() (stop func()) {
	const floor = 64 << 20
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	set := func() {
		metrics.Read(samples)
		var base uint64
		for _, s := range samples {
			if s.Value.Kind() == metrics.KindUint64 {
				base += s.Value.Uint64()
			}
		}
		pct := floor / (4 << 20) * 100
		if base > 0 {
			pct = min(pct, max(benchGCPercent, int((floor*100+base-1)/base)))
		}
		debug.SetGCPercent(pct)
	}
	old := debug.SetGCPercent(benchGCPercent)
	set()
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				set()
			case <-done:
				return
			}
		}
	}()
	return sync.OnceFunc(func() {
		close(done)
		<-finished
		debug.SetGCPercent(old)
	})
}

// benchSetup is an upstream and, in front of it, a gateway and a bare
// proxy, all in process over in-memory transports.
type benchSetup struct {
	g *Gateway
	// direct, gateway and proxy open a client session to the upstream
	// itself, to the gateway and to the proxy.
	direct, gateway, proxy func(tb testing.TB) *mcp.ClientSession
	close                  func()
}

// newBench builds a benchSetup; transport must be "inmemory" (the other
// transports put each party in a process of its own: bench_process_test.go).
func newBench(tb testing.TB, transport string) *benchSetup {
	if transport != "inmemory" {
		tb.Fatalf("newBench: transport %s: only inmemory runs in process", transport)
	}
	up := testupstream.New(testupstream.Options{Name: "github"})
	dial := func(ctx context.Context) (mcp.Transport, error) {
		st, ct := mcp.NewInMemoryTransports()
		if _, err := up.Server.Connect(ctx, st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}
	g, err := New(context.Background(), Config{
		Tables:      fixed(loadTable(tb, benchPolicy, 1)),
		Log:         NewJSONLog(decisionFile(tb)),
		CallTimeout: 30 * time.Second,
		Upstreams:   []Upstream{{Name: "github", Dial: dial}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	t, err := dial(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	p, err := newBareProxy(context.Background(), map[string]mcp.Transport{"github": t})
	if err != nil {
		tb.Fatal(err)
	}
	s := &benchSetup{g: g}
	s.direct = func(tb testing.TB) *mcp.ClientSession {
		t, err := dial(context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		return connectClient(tb, t)
	}
	s.gateway = func(tb testing.TB) *mcp.ClientSession {
		st, ct := mcp.NewInMemoryTransports()
		if _, err := g.Connect(context.Background(), "alice", st); err != nil {
			tb.Fatal(err)
		}
		return connectClient(tb, ct)
	}
	s.proxy = func(tb testing.TB) *mcp.ClientSession {
		st, ct := mcp.NewInMemoryTransports()
		if _, err := p.server.Connect(context.Background(), st, nil); err != nil {
			tb.Fatal(err)
		}
		return connectClient(tb, ct)
	}
	s.close = func() {
		p.Close()
		g.Close()
	}
	return s
}

func call(tb testing.TB, cs *mcp.ClientSession, name string) {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: benchArgs})
	if err != nil || res.IsError {
		tb.Fatalf("%s: %v %s", name, err, text(res))
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// newVersionMeta is the _meta a Go SDK client at 2026-07-28 puts on each
// request: the version, its identity and its capabilities.
var newVersionMeta = mcp.Meta{
	"io.modelcontextprotocol/protocolVersion":    newVersion,
	"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "bench", "version": "1"},
	"io.modelcontextprotocol/clientCapabilities": map[string]any{},
}

// policyWork is the gateway's own work on a tools/call, outside the SDK:
// split the name, decide, write the decision record, check the catalogue,
// build the forwarded _meta from the client's meta. It is timed on its own,
// n times back to back, so that its share of the hop can be reported.
func policyWork(g *Gateway, n int, meta mcp.Meta) time.Duration {
	start := time.Now()
	for range n {
		policyCall(g, meta)
	}
	return time.Since(start) / time.Duration(n)
}

func policyCall(g *Gateway, meta mcp.Meta) {
	if _, err := g.authorizeCall("alice", "github__echo"); err != nil {
		panic(err)
	}
	_, done := g.forwardMeta(meta, nil, nil)
	done()
}

// policyPause is how long the caller sleeps before each call of
// pausedPolicyWork: about what a gateway serving one call at a time waits
// between two calls, while the client and the upstream run.
const policyPause = 200 * time.Microsecond

// pausedPolicyWork is policyWork with each call made after policyPause
// asleep and timed on its own: as in a gateway between calls, the caches,
// the decision table's among them, and the kernel's path for the decision
// log's write are cold.
func pausedPolicyWork(g *Gateway, n int, meta mcp.Meta) time.Duration {
	var total time.Duration
	for range n {
		time.Sleep(policyPause)
		t0 := time.Now()
		policyCall(g, meta)
		total += time.Since(t0)
	}
	return total / time.Duration(n)
}

// hopEnd is one way the benchmark makes its call: a client session, the
// name it calls, and the CPU time its figure counts.
type hopEnd struct {
	cs    *mcp.ClientSession
	tool  string
	cpu   func() time.Duration
	lat   []time.Duration
	spent time.Duration // CPU time over the calls timed
	calls int
}

// run makes n calls and adds their latencies and CPU time.
func (e *hopEnd) run(b *testing.B, n int) {
	c0 := e.cpu()
	for range n {
		t0 := time.Now()
		call(b, e.cs, e.tool)
		e.lat = append(e.lat, time.Since(t0))
	}
	e.spent += e.cpu() - c0
	e.calls += n
}

// cpuPerCall is the CPU time per call, in µs.
func (e *hopEnd) cpuPerCall() float64 {
	return float64(e.spent.Nanoseconds()) / 1e3 / float64(e.calls)
}

// hopBlock is the number of calls made through one end before the next
// takes its turn: the CPU time of a party is read once per block.
const hopBlock = 50

// BenchmarkToolCall times tools/call through the gateway and through the
// bare proxy (bareProxy) over each transport, alternating blocks of
// hopBlock calls (which goes first alternates too), one call at a time. It
// reports each one's median latency and CPU time per call, and their
// ratios:
//
//   - inmemory: everything in this process, the upstream, both middle
//     parties and the clients, at 2025-11-25; the CPU time is the whole
//     process's, so direct calls to the upstream alternate too, and the
//     hop's CPU time (hop-cpu) is each one's less the direct calls'.
//   - stdio: the gateway and the proxy each in a process of their own,
//     each with its own upstream process over stdio, at 2025-11-25; the
//     CPU time is the middle party's process alone.
//   - http-2025-11-25, http-2026-07-28: the gateway and the proxy each in
//     a process of their own, in front of one upstream process over
//     streamable HTTP; the clients in this process, with a session
//     (2025-11-25) or without (2026-07-28). The CPU time is the middle
//     party's process alone.
//
// Both middle parties run with the gateway command's collection policy
// unless GOGC is set. policy-ns is the gateway's policy work on one call
// (policyWork), timed in this process back to back, and policy-%-of-hop
// its share of the gateway's hop CPU time; paused-policy-ns and its share
// are the same work after a pause (pausedPolicyWork), as the hop does it.
// An op is one call through each end. POLICYC_BENCH_CPUPROFILE=PREFIX
// writes each middle party process's CPU profile to PREFIX.ROW.ROLE
// (bench_process_test.go).
func BenchmarkToolCall(b *testing.B) {
	for _, row := range []string{"inmemory", "stdio", "http-2025-11-25", "http-2026-07-28"} {
		b.Run(row, func(b *testing.B) {
			benchGC(b)
			s := newBench(b, "inmemory") // for inmemory, and for the policy work
			defer s.close()
			self := func() time.Duration { return cpuTime(os.Getpid()) }
			var gw, px, direct *hopEnd
			meta := mcp.Meta(nil)
			switch row {
			case "inmemory":
				gw = &hopEnd{cs: s.gateway(b), tool: "github__echo", cpu: self}
				px = &hopEnd{cs: s.proxy(b), tool: "github__echo", cpu: self}
				direct = &hopEnd{cs: s.direct(b), tool: "echo", cpu: self}
				defer gw.cs.Close()
				defer px.cs.Close()
				defer direct.cs.Close()
			case "stdio":
				gcs, gpid := stdioRole(b, "gateway-stdio", legacyVersion, profileEnv(row)...)
				pcs, ppid := stdioRole(b, "proxy-stdio", legacyVersion, profileEnv(row)...)
				gw = &hopEnd{cs: gcs, tool: "github__echo", cpu: func() time.Duration { return cpuTime(gpid) }}
				px = &hopEnd{cs: pcs, tool: "github__echo", cpu: func() time.Duration { return cpuTime(ppid) }}
			default:
				version := legacyVersion
				if row == "http-2026-07-28" {
					version, meta = newVersion, newVersionMeta
				}
				up := startRole(b, "upstream-http")
				env := append(profileEnv(row), benchUpstreamEnv+"="+up.url)
				g := startRole(b, "gateway-http", env...)
				p := startRole(b, "proxy-http", env...)
				client := &http.Client{Transport: bearer{"bench-token", http.DefaultTransport.(*http.Transport).Clone()}}
				gcs := connectAt(b, &mcp.StreamableClientTransport{Endpoint: g.url, HTTPClient: client}, version, nil)
				pcs := connectAt(b, &mcp.StreamableClientTransport{Endpoint: p.url, HTTPClient: client}, version, nil)
				b.Cleanup(func() { gcs.Close(); pcs.Close() })
				gw = &hopEnd{cs: gcs, tool: "github__echo", cpu: func() time.Duration { return cpuTime(g.pid) }}
				px = &hopEnd{cs: pcs, tool: "github__echo", cpu: func() time.Duration { return cpuTime(p.pid) }}
			}
			if v := gw.cs.InitializeResult().ProtocolVersion; v != px.cs.InitializeResult().ProtocolVersion || (row == "http-2026-07-28") != (v == newVersion) {
				b.Fatalf("gateway at %s, proxy at %s", v, px.cs.InitializeResult().ProtocolVersion)
			}
			ends := []*hopEnd{gw, px}
			if direct != nil {
				ends = append(ends, direct)
			}
			for _, e := range ends { // warm up connections and caches
				e.run(b, 100)
				*e = hopEnd{cs: e.cs, tool: e.tool, cpu: e.cpu}
			}
			b.ResetTimer()
			for round, done := 0, 0; done < b.N; round++ {
				n := min(hopBlock, b.N-done)
				for i := range ends {
					if round%2 == 1 {
						i = len(ends) - 1 - i
					}
					ends[i].run(b, n)
				}
				done += n
			}
			b.StopTimer()
			gm, pm := median(gw.lat), median(px.lat)
			b.ReportMetric(float64(gm.Nanoseconds())/1e3, "gateway-p50-µs")
			b.ReportMetric(float64(pm.Nanoseconds())/1e3, "proxy-p50-µs")
			b.ReportMetric(float64(gm)/float64(pm), "p50-ratio")
			gc, pc := gw.cpuPerCall(), px.cpuPerCall()
			b.ReportMetric(gc, "gateway-cpu-µs/call")
			b.ReportMetric(pc, "proxy-cpu-µs/call")
			b.ReportMetric(gc/pc, "cpu-ratio")
			hop := gc
			if direct != nil {
				dc := direct.cpuPerCall()
				b.ReportMetric(float64(median(direct.lat).Nanoseconds())/1e3, "direct-p50-µs")
				b.ReportMetric(dc, "direct-cpu-µs/call")
				b.ReportMetric(gc-dc, "gateway-hop-cpu-µs/call")
				b.ReportMetric(pc-dc, "proxy-hop-cpu-µs/call")
				b.ReportMetric((gc-dc)/(pc-dc), "hop-cpu-ratio")
				hop = gc - dc
			}
			policy, paused := policyWork(s.g, 20000, meta), pausedPolicyWork(s.g, 500, meta)
			b.ReportMetric(float64(policy.Nanoseconds()), "policy-ns")
			b.ReportMetric(100*float64(policy.Nanoseconds())/1e3/hop, "policy-%-of-hop")
			b.ReportMetric(float64(paused.Nanoseconds()), "paused-policy-ns")
			b.ReportMetric(100*float64(paused.Nanoseconds())/1e3/hop, "paused-policy-%-of-hop")
		})
	}
}

// BenchmarkPolicyWork is the gateway's policy work on one tools/call, with
// the decision record written to a file: back to back, with no _meta
// (2025-11-25) and with the _meta a 2026-07-28 client sends; and paused,
// each call after policyPause asleep (pausedPolicyWork), whose ns/op is
// the work alone. The paused row also reports its two largest parts, each
// timed after a pause of its own: the decision (decide-ns) and the
// decision record's write (log-ns).
func BenchmarkPolicyWork(b *testing.B) {
	for _, row := range []struct {
		name string
		meta mcp.Meta
	}{{"2025-11-25", nil}, {"2026-07-28", newVersionMeta}, {"paused", nil}} {
		b.Run(row.name, func(b *testing.B) {
			benchGC(b)
			s := newBench(b, "inmemory")
			defer s.close()
			if row.name == "paused" {
				b.ReportMetric(float64(pausedPolicyWork(s.g, b.N, nil).Nanoseconds()), "ns/op")
				t := s.g.table.Load()
				var decided, logged time.Duration
				for range b.N {
					time.Sleep(policyPause)
					t0 := time.Now()
					d := tableDecide(t, t0, "alice", "github", table.Tool, "echo")
					decided += time.Since(t0)
					time.Sleep(policyPause)
					t1 := time.Now()
					if _, err := s.g.logDecision(t, t0, "alice", "github", table.Tool, "echo", OpCall, d); err != nil {
						b.Fatal(err)
					}
					logged += time.Since(t1)
				}
				b.ReportMetric(float64(decided.Nanoseconds())/float64(b.N), "decide-ns")
				b.ReportMetric(float64(logged.Nanoseconds())/float64(b.N), "log-ns")
				return
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				policyCall(s.g, row.meta)
			}
		})
	}
}

// idleClients is the number of idle clients BenchmarkIdleSession opens to
// each middle party at once.
const idleClients = 100

// BenchmarkIdleSession reports what idle clients cost the gateway and the
// bare proxy: idleClients are opened to each, one after the other, and the
// difference in live heap and goroutine stacks (after a collection) is
// divided by their number. An op is one such measurement of each.
//
//   - inmemory: 2025-11-25 sessions in this process; the figure is the
//     client's side and the server's together (both share one upstream
//     session).
//   - http-2025-11-25: each client with a connection of its own and a
//     session, which holds its standalone stream (a GET) open; the figure
//     is the middle party's process alone.
//   - http-2026-07-28: each client with a connection of its own, after
//     server/discover and no other request: there is no session, so what
//     the middle party holds is an idle connection.
//   - http-2026-07-28-listen: as http-2026-07-28, each client with a
//     subscriptions/listen stream open (it handles tools/list_changed).
//
// The middle parties run as in BenchmarkToolCall.
func BenchmarkIdleSession(b *testing.B) {
	b.Run("inmemory", func(b *testing.B) {
		benchGC(b)
		s := newBench(b, "inmemory")
		defer s.close()
		measure := func(connect func(testing.TB) *mcp.ClientSession) (heap, stack float64) {
			// Two collections each time: the first keeps what sync.Pools
			// held, the second frees it.
			var before, after runtime.MemStats
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&before)
			sessions := make([]*mcp.ClientSession, idleClients)
			for i := range sessions {
				sessions[i] = connect(b)
			}
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&after)
			for _, cs := range sessions {
				cs.Close()
			}
			return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / idleClients,
				float64(int64(after.StackInuse)-int64(before.StackInuse)) / idleClients
		}
		var gh, gs, ph, ps []float64
		for range b.N {
			h, st := measure(s.gateway)
			gh, gs = append(gh, h), append(gs, st)
			h, st = measure(s.proxy)
			ph, ps = append(ph, h), append(ps, st)
		}
		reportIdle(b, "gateway", gh, gs, nil)
		reportIdle(b, "proxy", ph, ps, nil)
	})
	for _, row := range []struct {
		name, version string
		listen        bool
	}{{"http-2025-11-25", legacyVersion, false}, {"http-2026-07-28", newVersion, false}, {"http-2026-07-28-listen", newVersion, true}} {
		b.Run(row.name, func(b *testing.B) {
			up := startRole(b, "upstream-http")
			parties := []*roleProcess{
				startRole(b, "gateway-http", benchUpstreamEnv+"="+up.url),
				startRole(b, "proxy-http", benchUpstreamEnv+"="+up.url),
			}
			var opts *mcp.ClientOptions
			if row.listen {
				opts = &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}}
			}
			// Requests each idle client keeps in flight: the standalone
			// stream of a session, or a listen.
			held := 0
			if row.version < newVersion || row.listen {
				held = 1
			}
			heap, stack, goroutines := make([][]float64, 2), make([][]float64, 2), make([][]float64, 2)
			for range b.N {
				for i, p := range parties {
					h0, s0, g0 := p.memory(b, 0)
					sessions := make([]*mcp.ClientSession, idleClients)
					transports := make([]*http.Transport, idleClients)
					for j := range sessions {
						transports[j] = http.DefaultTransport.(*http.Transport).Clone()
						client := &http.Client{Transport: bearer{"bench-token", transports[j]}}
						sessions[j] = connectAt(b, &mcp.StreamableClientTransport{Endpoint: p.url, HTTPClient: client}, row.version, opts)
					}
					h1, s1, g1 := p.memory(b, held*idleClients)
					for j, cs := range sessions {
						cs.Close()
						transports[j].CloseIdleConnections()
					}
					heap[i] = append(heap[i], (h1-h0)/idleClients)
					stack[i] = append(stack[i], (s1-s0)/idleClients)
					goroutines[i] = append(goroutines[i], (g1-g0)/idleClients)
				}
			}
			reportIdle(b, "gateway", heap[0], stack[0], goroutines[0])
			reportIdle(b, "proxy", heap[1], stack[1], goroutines[1])
		})
	}
}

// reportIdle reports the medians of an idle client's cost to party.
func reportIdle(b *testing.B, party string, heap, stack, goroutines []float64) {
	mid := func(xs []float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	b.ReportMetric(mid(heap), party+"-heap-B/client")
	b.ReportMetric(mid(stack), party+"-stack-B/client")
	if goroutines != nil {
		b.ReportMetric(mid(goroutines), party+"-goroutines/client")
	}
}

// listPolicy allows half of the listed tools, so that the gateway both
// shows and hides items, and records a decision for each.
const listPolicy = `package policy

defaults: {tool: "deny", prompt: "deny", resource: "deny"}
mcp_servers: github: access: tool: allow_list: ["echo", "tool_*[02468]"]
`

// benchListed is the number of tools the listing benchmarks' upstream adds to
// its own.
const benchListed = 500

// listingBench is an upstream with benchListed more tools, reached in
// memory by dial, and a gateway in front of it serving listPolicy.
func listingBench(b *testing.B, policy string) (g *Gateway, dial func(context.Context) (mcp.Transport, error)) {
	benchGC(b)
	up := testupstream.New(testupstream.Options{Name: "github"})
	for i := range benchListed {
		up.Server.AddTool(&mcp.Tool{Name: fmt.Sprintf("tool_%03d", i), InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	dial = func(ctx context.Context) (mcp.Transport, error) {
		st, ct := mcp.NewInMemoryTransports()
		if _, err := up.Server.Connect(ctx, st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}
	g, err := New(context.Background(), Config{
		Tables:      fixed(loadTable(b, policy, 1)),
		Log:         NewJSONLog(decisionFile(b)),
		CallTimeout: 30 * time.Second,
		Upstreams:   []Upstream{{Name: "github", Dial: dial}},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	return g, dial
}

// BenchmarkListTools times tools/list of an upstream with 500 more tools,
// directly and through the gateway (which decides and records each), over
// in-memory transports.
func BenchmarkListTools(b *testing.B) {
	g, dial := listingBench(b, listPolicy)
	list := func(b *testing.B, cs *mcp.ClientSession, want int) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Tools) != want {
				b.Fatalf("listed %d tools, want %d", len(res.Tools), want)
			}
		}
	}
	direct, err := dial(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	dcs := connectClient(b, direct)
	defer dcs.Close()
	all, err := dcs.ListTools(context.Background(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("direct", func(b *testing.B) { list(b, dcs, len(all.Tools)) })
	st, ct := mcp.NewInMemoryTransports()
	if _, err := g.Connect(context.Background(), "alice", st); err != nil {
		b.Fatal(err)
	}
	gcs := connectClient(b, ct)
	defer gcs.Close()
	b.Run("gateway", func(b *testing.B) { list(b, gcs, 1+benchListed/2) })
}

// BenchmarkListsChanged times what an upstream's tools/list_changed costs
// the gateway: for each class of principals with a session, a dry listing
// of the upstream's 500 extra tools and its digest; for each principal, the
// comparison. There are 100 principals: of one class (listPolicy gives none
// of them a scope), or each of a class of its own (a principal scope each).
func BenchmarkListsChanged(b *testing.B) {
	const principals = 100
	own := listPolicy
	for i := range principals {
		own += fmt.Sprintf("principals: p%03d: mcp_servers: github: access: tool: deny_list: [\"tool_%03d\"]\n", i, 2*i)
	}
	for _, bc := range []struct{ name, policy string }{{"one-class", listPolicy}, {"own-class", own}} {
		b.Run(bc.name, func(b *testing.B) {
			g, _ := listingBench(b, bc.policy)
			for i := range principals {
				st, ct := mcp.NewInMemoryTransports()
				if _, err := g.Connect(context.Background(), fmt.Sprintf("p%03d", i), st); err != nil {
					b.Fatal(err)
				}
				cs := connectClient(b, ct)
				defer cs.Close()
			}
			b.ReportAllocs()
			for b.Loop() {
				g.listsChanged(listTools)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/principals, "µs/principal")
		})
	}
}
