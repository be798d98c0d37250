package gateway

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/policyc/policyc/runtime/gateway/internal/testupstream"
	"github.com/policyc/policyc/runtime/table"
)

// BenchmarkObserveToolCall times tools/call through two gateways in front
// of one in-memory upstream, in this process: one with metrics and
// tracing off, one with metrics, tracing or both on (NewMetrics; an SDK
// tracer provider that samples every trace, with a SpanBatcher and an
// exporter that drops what it is given, so that no receiver's cost is
// counted), or, in the row "none", off as well: that row is the method's
// own error, what it reports for two identical gateways. Every call's
// _meta carries a sampled traceparent, as a traced client's does. Blocks
// of hopBlock calls alternate between the two, and direct calls to the
// upstream, which goes first alternating too; an op is one call through
// each. It reports each one's median latency and CPU time per call (the
// whole process's, read around each block), and what metrics and tracing
// add: to the median latency of the call through the gateway
// (p50-overhead-%), to its CPU time (cpu-overhead-%), and to the
// gateway's hop, its CPU time less the direct call's (hop-cpu-overhead-%).
func BenchmarkObserveToolCall(b *testing.B) {
	for _, row := range []string{"none", "metrics", "tracing", "both"} {
		b.Run(row, func(b *testing.B) {
			benchObserve(b, row == "metrics" || row == "both", row == "tracing" || row == "both")
		})
	}
}

func benchObserve(b *testing.B, metrics, tracing bool) {
	benchGC(b)
	up := testupstream.New(testupstream.Options{Name: "github"})
	dial := func(ctx context.Context) (mcp.Transport, error) {
		st, ct := mcp.NewInMemoryTransports()
		if _, err := up.Server.Connect(ctx, st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(NewSpanBatcher(tracetest.NewNoopExporter(), 0, 0, 0)))
	defer tp.Shutdown(context.Background())
	gateway := func(on bool) *mcp.ClientSession {
		cfg := Config{
			Tables:      fixed(loadTable(b, benchPolicy, 1)),
			Log:         NewJSONLog(decisionFile(b)),
			CallTimeout: 30 * time.Second,
			Upstreams:   []Upstream{{Name: "github", Dial: dial}},
		}
		if on && metrics {
			cfg.Metrics = NewMetrics(MetricsOptions{})
		}
		if on && tracing {
			cfg.Tracer = tp
		}
		g, err := New(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { g.Close() })
		st, ct := mcp.NewInMemoryTransports()
		if _, err := g.Connect(context.Background(), "alice", st); err != nil {
			b.Fatal(err)
		}
		cs := connectClient(b, ct)
		b.Cleanup(func() { cs.Close() })
		return cs
	}
	t, err := dial(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	dcs := connectClient(b, t)
	defer dcs.Close()
	self := func() time.Duration { return cpuTime(os.Getpid()) }
	traced := mcp.Meta{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	off := &obsEnd{hopEnd: hopEnd{cs: gateway(false), tool: "github__echo", cpu: self}, meta: traced}
	on := &obsEnd{hopEnd: hopEnd{cs: gateway(true), tool: "github__echo", cpu: self}, meta: traced}
	direct := &obsEnd{hopEnd: hopEnd{cs: dcs, tool: "echo", cpu: self}}
	ends := []*obsEnd{off, on, direct}
	for _, e := range ends { // warm up connections and caches
		e.run(b, 100)
		e.hopEnd = hopEnd{cs: e.cs, tool: e.tool, cpu: e.cpu}
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
	om, nm, dm := median(off.lat), median(on.lat), median(direct.lat)
	b.ReportMetric(float64(om.Nanoseconds())/1e3, "off-p50-µs")
	b.ReportMetric(float64(nm.Nanoseconds())/1e3, "on-p50-µs")
	b.ReportMetric(float64(dm.Nanoseconds())/1e3, "direct-p50-µs")
	b.ReportMetric(100*(float64(nm)/float64(om)-1), "p50-overhead-%")
	oc, nc, dc := off.cpuPerCall(), on.cpuPerCall(), direct.cpuPerCall()
	b.ReportMetric(oc, "off-cpu-µs/call")
	b.ReportMetric(nc, "on-cpu-µs/call")
	b.ReportMetric(dc, "direct-cpu-µs/call")
	b.ReportMetric(100*(nc/oc-1), "cpu-overhead-%")
	b.ReportMetric(100*((nc-dc)/(oc-dc)-1), "hop-cpu-overhead-%")
}

// obsEnd is a hopEnd whose calls carry meta as their _meta.
type obsEnd struct {
	hopEnd
	meta mcp.Meta
}

// run makes n calls and adds their latencies and CPU time.
func (e *obsEnd) run(b *testing.B, n int) {
	c0 := e.cpu()
	for range n {
		t0 := time.Now()
		res, err := e.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: e.tool, Arguments: benchArgs, Meta: e.meta})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %s", e.tool, err, text(res))
		}
		e.lat = append(e.lat, time.Since(t0))
	}
	e.spent += e.cpu() - c0
	e.calls += n
}

// BenchmarkObserveWork is what metrics, tracing or both add to the
// gateway's work on one tools/call, timed on its own, back to back:
// tracing is the request's span (its trace context read from _meta,
// started, given the decision, injected into the forwarded _meta, ended
// into a SpanBatcher whose exporter drops the spans); metrics
// are the decision's counter and the call's counter and latency
// histogram; tracing-unsampled is tracing of a request whose trace
// context is not sampled (a span that records nothing, the context still
// passed on). Its ns/op set beside BenchmarkObserveToolCall's
// off-cpu-µs/call less direct-cpu-µs/call (the gateway's hop) is the
// share of the hop they cost.
func BenchmarkObserveWork(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(NewSpanBatcher(tracetest.NewNoopExporter(), 0, 0, 0)))
	defer tp.Shutdown(context.Background())
	tg := startGateway(b, func(c *Config) {
		c.Metrics = NewMetrics(MetricsOptions{})
		c.Tracer = tp
		c.Log = NewJSONLog(io.Discard)
	})
	g := tg.Gateway
	t := g.table.Load()
	d := tableDecide(t, g.now(), "alice", "github", table.Tool, "echo")
	counted := func() {
		g.obs.decided("github", table.Tool, OpCall, d.Effect, 1)
		g.obs.called("github", time.Microsecond, "ok")
	}
	traced := g.traceMiddleware(func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		traceDecision(ctx, t, "github", "echo", d)
		g.traceForward(ctx, req.GetParams().GetMeta())
		g.traceUpstream(ctx, nil)
		return nil, nil
	})
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "github__echo",
		Meta: mcp.Meta{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}
	unsampled := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "github__echo",
		Meta: mcp.Meta{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}}}
	for _, row := range []string{"metrics", "tracing", "both", "tracing-unsampled"} {
		b.Run(row, func(b *testing.B) {
			b.ReportAllocs()
			c0 := cpuTime(os.Getpid())
			defer func() {
				// The process's CPU time, the span processor's goroutine
				// and the collector's included.
				b.ReportMetric(float64((cpuTime(os.Getpid())-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			}()
			for b.Loop() {
				switch row {
				case "metrics":
					counted()
				case "tracing":
					traced(context.Background(), methodCallTool, req)
				case "both":
					counted()
					traced(context.Background(), methodCallTool, req)
				default:
					traced(context.Background(), methodCallTool, unsampled)
				}
			}
		})
	}
}
