package gateway

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/policyc/policyc/runtime/table"
)

// discardSpans is a span processor that keeps nothing: what a span costs
// the SDK itself, before any export.
type discardSpans struct{}

func (discardSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discardSpans) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discardSpans) Shutdown(context.Context) error                  { return nil }
func (discardSpans) ForceFlush(context.Context) error                { return nil }

// BenchmarkOTelSpan is the OpenTelemetry SDK's own cost of the span the
// gateway makes for a tools/call, with none of the gateway's code: the
// client's sampled traceparent read from a map carrier, a server span
// started as its child, the gateway's attributes set as it sets them (8
// for an allowed call in two calls, 9 for a held one in three, or the 8 in
// one call), the span ended into a processor that keeps nothing. It uses
// only the SDK (go.opentelemetry.io/otel and otel/sdk, versions in go.mod),
// so its figures are the floor under BenchmarkObserveWork's tracing row,
// and a reproduction of that cost for the SDK's maintainers: a span of 9
// attributes allocates a map table at its end that one of 8 does not.
func BenchmarkOTelSpan(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discardSpans{}))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("bench")
	carrier := metaCarrier{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	digest := "sha256:4bf92f3577b34da6a3ce929d0e0e47364bf92f3577b34da6a3ce929d0e0e4736"
	method := attrMethod.String("tools/call")
	decision := []attribute.KeyValue{attrServer.String("github"), attrName.String("echo"),
		attrDecision.String("approve"), attrReason.String("rule"), attrOrigin.String("policy.cue:12:3"),
		attrTableDigest.String(digest), attrTableSerial.Int64(41)}
	verdict := attrVerdict.String("approved")
	all := append([]attribute.KeyValue{method}, decision...)
	// Each row: whether the span has the client's parent, and the
	// attributes set, one SetAttributes call a batch.
	rows := []struct {
		name    string
		parent  bool
		batches [][]attribute.KeyValue
	}{
		{"bare", false, nil},
		{"parent", true, nil},
		{"parent+8-attributes", true, [][]attribute.KeyValue{{method}, decision}},
		{"parent+8-attributes-one-call", true, [][]attribute.KeyValue{all}},
		{"parent+9-attributes", true, [][]attribute.KeyValue{{method}, decision, {verdict}}},
	}
	for _, row := range rows {
		b.Run(row.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx := context.Background()
				if row.parent {
					ctx = traceContext.Extract(ctx, carrier)
				}
				_, s := tr.Start(ctx, "tools/call", serverSpan)
				for _, kv := range row.batches {
					s.SetAttributes(kv...)
				}
				s.End()
			}
		})
	}
}

// TestOTelSpanAttributeMap pins the SDK behaviour that traceDecision works
// around: a recording span of 9 attributes allocates more at its end than
// one of 8 (the deduplicating map outgrows one group). When this fails,
// the SDK (go.opentelemetry.io/otel/sdk, v1.47.0 when written) no longer
// does, and policyc.kind may return to the request's span.
func TestOTelSpanAttributeMap(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discardSpans{}))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("test")
	attrs := make([]attribute.KeyValue, 9)
	for i := range attrs {
		attrs[i] = attribute.String(string(rune('a'+i)), "v")
	}
	allocs := func(n int) float64 {
		return testing.AllocsPerRun(200, func() {
			_, s := tr.Start(context.Background(), "tools/call", serverSpan)
			s.SetAttributes(attrs[:n]...)
			s.End()
		})
	}
	eight, nine := allocs(8), allocs(9)
	t.Logf("allocations per span: %v with 8 attributes, %v with 9", eight, nine)
	if nine <= eight {
		t.Errorf("a span of 9 attributes allocates %v times, of 8 %v: the SDK (or Go's maps) no longer pays for the ninth; see traceDecision", nine, eight)
	}
}

// TestTraceAttributesNotAllocated checks that the attributes the gateway
// sets on a request's span (methodAttr, traceDecision) cost no allocation
// beyond what the SDK makes of the same attributes handed over in slices
// built beforehand: their slices come from methodAttrs and decisionAttrs,
// not from each request.
func TestTraceAttributesNotAllocated(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discardSpans{}))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("test")
	tbl := loadTable(t, benchPolicy, 1)
	d := tbl.Decide("alice", "github", table.Tool, "echo")
	method := []attribute.KeyValue{attrMethod.String(methodCallTool)}
	decision := []attribute.KeyValue{attrServer.String("github"), attrName.String("echo"),
		attrDecision.String(d.Effect.String()), attrReason.String(d.Reason.String()), attrOrigin.String(d.Origin),
		attrTableDigest.String(tbl.Digest()), attrTableSerial.Int64(int64(tbl.Serial()))}
	sdk := testing.AllocsPerRun(500, func() {
		_, s := tr.Start(context.Background(), methodCallTool, serverSpan)
		s.SetAttributes(method...)
		s.SetAttributes(decision...)
		s.End()
	})
	ours := testing.AllocsPerRun(500, func() {
		ctx, s := tr.Start(context.Background(), methodCallTool, serverSpan)
		s.SetAttributes(methodAttr(methodCallTool)...)
		traceDecision(ctx, tbl, "github", "echo", d)
		s.End()
	})
	if ours > sdk {
		t.Errorf("a traced decision allocates %v times, the SDK alone %v: the attribute slices are allocated per request", ours, sdk)
	}
}
