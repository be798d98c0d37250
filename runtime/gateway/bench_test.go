package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/runtime/gateway/internal/testupstream"
)

// The benchmarks compare a tools/call through the gateway with the same
// call made directly to the same upstream over the same transport, side by
// side in one run. Run them with, for example:
//
//	go test ./runtime/gateway -run '^$' -bench . -benchtime=2000x
//
// Figures are in docs/performance.md.

// benchPolicy allows the one tool the benchmarks call.
const benchPolicy = `package policy

defaults: {tool: "deny", prompt: "deny", resource: "deny"}
mcp_servers: github: access: tool: allow_list: ["echo"]
`

var benchArgs = map[string]any{"title": "a benchmark issue", "labels": []any{"bug", "p2"}, "n": 3}

// benchSetup is an upstream, a gateway in front of it, and how to reach
// each over one transport.
type benchSetup struct {
	g *Gateway
	// direct and gateway open a client session to the upstream itself and
	// to the gateway.
	direct, gateway func(tb testing.TB) *mcp.ClientSession
	close           func()
}

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

// pooled is an HTTP client that keeps enough idle connections for 32
// concurrent clients.
func pooled() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: t}
}

func connectClient(tb testing.TB, t mcp.Transport) *mcp.ClientSession {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(), t, &mcp.ClientSessionOptions{ProtocolVersion: legacyVersion})
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

// benchGC runs a benchmark with the garbage collection policy the gateway
// command runs with, unless GOGC is set: benchGCPercent, with the command's
// heap floor (benchHeapFloor) for an HTTP front. Direct calls share the
// process and the policy.
func benchGC(b *testing.B, transport string) {
	if os.Getenv("GOGC") != "" {
		return
	}
	if transport == "http" {
		b.Cleanup(benchHeapFloor())
		return
	}
	old := debug.SetGCPercent(benchGCPercent)
	b.Cleanup(func() { debug.SetGCPercent(old) })
}

// benchHeapFloor applies the heap floor of the gateway command (cmd/gc.go)
// to a benchmark's process, so that its HTTP benchmarks collect garbage
// as the command does: every second the target is set to let about 64 MiB
// of garbage accumulate over the live heap, stacks and globals, between
// benchGCPercent and 1600 (the floor over the runtime's 4 MiB minimum heap).
// It is the command's rule without its hysteresis; stop restores the
// target the process had.
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

func newBench(tb testing.TB, transport string) *benchSetup {
	up := testupstream.New(testupstream.Options{Name: "github"})
	cfg := Config{
		Tables:      fixed(loadTable(tb, benchPolicy, 1)),
		Log:         NewJSONLog(decisionFile(tb)),
		CallTimeout: 30 * time.Second,
	}
	s := &benchSetup{}
	closers := []func(){func() {}}
	switch transport {
	case "inmemory":
		dial := func(ctx context.Context) (mcp.Transport, error) {
			st, ct := mcp.NewInMemoryTransports()
			if _, err := up.Server.Connect(ctx, st, nil); err != nil {
				return nil, err
			}
			return ct, nil
		}
		cfg.Upstreams = []Upstream{{Name: "github", Dial: dial}}
		s.direct = func(tb testing.TB) *mcp.ClientSession {
			t, err := dial(context.Background())
			if err != nil {
				tb.Fatal(err)
			}
			return connectClient(tb, t)
		}
		s.gateway = func(tb testing.TB) *mcp.ClientSession {
			st, ct := mcp.NewInMemoryTransports()
			if _, err := s.g.Connect(context.Background(), "alice", st); err != nil {
				tb.Fatal(err)
			}
			return connectClient(tb, ct)
		}
	case "http":
		upSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.Server }, nil))
		closers = append(closers, upSrv.Close)
		cfg.Upstreams = []Upstream{{Name: "github", URL: upSrv.URL}}
		client := pooled()
		s.direct = func(tb testing.TB) *mcp.ClientSession {
			return connectClient(tb, &mcp.StreamableClientTransport{Endpoint: upSrv.URL, HTTPClient: client})
		}
		var gwURL string
		s.gateway = func(tb testing.TB) *mcp.ClientSession {
			return connectClient(tb, &mcp.StreamableClientTransport{Endpoint: gwURL, HTTPClient: &http.Client{Transport: bearer{"bench-token", client.Transport}}})
		}
		defer func() {
			h, err := s.g.HTTPHandler(HTTPOptions{Tokens: map[string]string{tokenHash("bench-token"): "alice"}, MaxSessions: 100000}) // BenchmarkIdleSession opens b.N
			if err != nil {
				tb.Fatal(err)
			}
			gwSrv := httptest.NewServer(h)
			gwURL = gwSrv.URL
			closers[0] = gwSrv.Close
		}()
	default:
		tb.Fatalf("unknown transport %s", transport)
	}
	g, err := New(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	s.g = g
	s.close = func() {
		// The gateway's front first, then the gateway (which ends its
		// session with the upstream), then the upstream.
		closers[0]()
		g.Close()
		for _, c := range closers[1:] {
			c()
		}
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

// policyWork is the gateway's own work on a tools/call, outside the SDK:
// split the name, decide, write the decision record, check the catalogue,
// build the forwarded _meta. It is timed on its own so that its share of
// the added latency can be reported.
func policyWork(g *Gateway, n int) time.Duration {
	var meta mcp.Meta // the calls measured carry no _meta
	start := time.Now()
	for range n {
		if _, err := g.authorizeCall("alice", "github__echo"); err != nil {
			panic(err)
		}
		_, done := g.forwardMeta(meta, nil, nil)
		done()
	}
	return time.Since(start) / time.Duration(n)
}

// BenchmarkToolCall times tools/call directly and through the gateway,
// alternating, and reports the medians, their ratio, and the share of the
// added latency spent in the gateway's policy work.
func BenchmarkToolCall(b *testing.B) {
	for _, transport := range []string{"inmemory", "http"} {
		b.Run(transport, func(b *testing.B) {
			benchGC(b, transport)
			s := newBench(b, transport)
			defer s.close()
			direct, gw := s.direct(b), s.gateway(b)
			defer direct.Close()
			defer gw.Close()
			for range 50 { // warm up connections and caches
				call(b, direct, "echo")
				call(b, gw, "github__echo")
			}
			dd := make([]time.Duration, 0, b.N)
			gd := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				call(b, direct, "echo")
				t1 := time.Now()
				call(b, gw, "github__echo")
				dd, gd = append(dd, t1.Sub(t0)), append(gd, time.Since(t1))
			}
			b.StopTimer()
			dm, gm := median(dd), median(gd)
			policy := policyWork(s.g, 20000)
			b.ReportMetric(float64(dm.Microseconds()), "direct-p50-µs")
			b.ReportMetric(float64(gm.Microseconds()), "gateway-p50-µs")
			b.ReportMetric(float64(gm)/float64(dm), "ratio")
			b.ReportMetric(float64(policy.Nanoseconds()), "policy-ns")
			if added := gm - dm; added > 0 {
				b.ReportMetric(100*float64(policy)/float64(added), "policy-%-of-added")
			}
		})
	}
}

// BenchmarkPolicyWork is the gateway's policy work on one tools/call, with
// the decision record written to a file.
func BenchmarkPolicyWork(b *testing.B) {
	benchGC(b, "inmemory")
	s := newBench(b, "inmemory")
	defer s.close()
	var meta mcp.Meta
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := s.g.authorizeCall("alice", "github__echo"); err != nil {
			b.Fatal(err)
		}
		_, done := s.g.forwardMeta(meta, nil, nil)
		done()
	}
}

// BenchmarkThroughputHTTP runs 32 concurrent clients over streamable HTTP,
// each with its own session, directly and through the gateway. The two
// alternate for five rounds of b.N calls each, so that drift in the
// machine's load or the heap's state falls on both alike; it reports the
// median calls per second of each and the median of the rounds' ratios.
// (An op is all ten phases, 10·b.N calls: read the reported metrics, not
// ns/op.)
func BenchmarkThroughputHTTP(b *testing.B) {
	benchGC(b, "http")
	const rounds = 5
	s := newBench(b, "http")
	defer s.close()
	direct, gw := openClients(b, s.direct, "echo"), openClients(b, s.gateway, "github__echo")
	defer func() { // before s.close: its servers wait for these clients
		for _, cs := range append(direct, gw...) {
			cs.Close()
		}
	}()
	var d, g, ratio []float64
	b.ResetTimer()
	for range rounds {
		dr, gr := callAll(b, direct, "echo"), callAll(b, gw, "github__echo")
		d, g, ratio = append(d, dr), append(g, gr), append(ratio, gr/dr)
	}
	b.StopTimer()
	b.ReportMetric(medianOf(d), "direct-calls/s")
	b.ReportMetric(medianOf(g), "gateway-calls/s")
	b.ReportMetric(medianOf(ratio), "ratio")
	b.ReportMetric(slices.Min(ratio), "ratio-min")
	b.ReportMetric(slices.Max(ratio), "ratio-max")
}

// benchClients is the number of concurrent clients of the throughput
// benchmarks.
const benchClients = 32

// openClients opens benchClients sessions with connect and makes a first
// call of name on each.
func openClients(b *testing.B, connect func(testing.TB) *mcp.ClientSession, name string) []*mcp.ClientSession {
	sessions := make([]*mcp.ClientSession, benchClients)
	for i := range sessions {
		sessions[i] = connect(b)
		call(b, sessions[i], name)
	}
	return sessions
}

// callAll makes b.N calls of name, spread over sessions calling
// concurrently, and returns the calls per second.
func callAll(b *testing.B, sessions []*mcp.ClientSession, name string) float64 {
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	start := time.Now()
	for _, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				call(b, cs, name)
			}
		}()
	}
	wg.Wait()
	return float64(b.N) / time.Since(start).Seconds()
}

// BenchmarkOnePathHTTP runs one path of BenchmarkThroughputHTTP alone,
// 32 clients over streamable HTTP, so that each can be profiled on its own:
//
//	go test ./runtime/gateway -run '^$' -bench OnePathHTTP/direct -benchtime=20000x -cpuprofile direct.out
//	go test ./runtime/gateway -run '^$' -bench OnePathHTTP/gateway -benchtime=20000x -cpuprofile gateway.out
//
// CPU per call is the profile's total samples over b.N.
func BenchmarkOnePathHTTP(b *testing.B) {
	for _, path := range []string{"direct", "gateway"} {
		b.Run(path, func(b *testing.B) {
			benchGC(b, "http")
			s := newBench(b, "http")
			defer s.close()
			connect, name := s.direct, "echo"
			if path == "gateway" {
				connect, name = s.gateway, "github__echo"
			}
			sessions := openClients(b, connect, name)
			defer func() { // before s.close: its servers wait for these clients
				for _, cs := range sessions {
					cs.Close()
				}
			}()
			b.ResetTimer()
			callAll(b, sessions, name)
		})
	}
}

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkIdleSession reports the heap each idle client session costs,
// client and server side together, directly and through the gateway (whose
// sessions share one upstream session): b.N sessions of each kind are
// opened and kept open while the heap is measured.
func BenchmarkIdleSession(b *testing.B) {
	for _, transport := range []string{"inmemory", "http"} {
		b.Run(transport, func(b *testing.B) {
			benchGC(b, transport)
			s := newBench(b, transport)
			defer s.close()
			// Heap and goroutine stacks (the SDK runs goroutines per
			// session), per session.
			measure := func(connect func(testing.TB) *mcp.ClientSession) (heap, stack float64) {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				sessions := make([]*mcp.ClientSession, b.N)
				for i := range sessions {
					sessions[i] = connect(b)
				}
				time.Sleep(50 * time.Millisecond) // let standalone streams settle
				runtime.GC()
				runtime.ReadMemStats(&after)
				for _, cs := range sessions {
					cs.Close()
				}
				return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(b.N),
					float64(int64(after.StackInuse)-int64(before.StackInuse)) / float64(b.N)
			}
			direct, directStack := measure(s.direct)
			gw, gwStack := measure(s.gateway)
			b.ReportMetric(direct, "direct-B/session")
			b.ReportMetric(gw, "gateway-B/session")
			b.ReportMetric(directStack, "direct-stack-B/session")
			b.ReportMetric(gwStack, "gateway-stack-B/session")
		})
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

// BenchmarkListTools times tools/list of an upstream with 500 more tools,
// directly and through the gateway (which decides and records each), over
// in-memory transports.
// listingBench is an upstream with benchListed more tools, reached in
// memory by dial, and a gateway in front of it serving listPolicy.
func listingBench(b *testing.B, policy string) (g *Gateway, dial func(context.Context) (mcp.Transport, error)) {
	benchGC(b, "inmemory")
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
