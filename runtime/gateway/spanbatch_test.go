package gateway

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// A SpanBatcher exports the spans ended once its interval passes, at once
// when a batch is full, every span still queued on Shutdown, none that is
// not sampled, and drops (and counts) the spans past its queue's bound.
func TestSpanBatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		exp := tracetest.NewInMemoryExporter()
		b := NewSpanBatcher(exp, time.Second, 4, 6)
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
		tr := tp.Tracer("test")
		end := func(n int, name string) {
			for i := range n {
				_, s := tr.Start(context.Background(), fmt.Sprintf("%s-%d", name, i))
				s.End()
			}
		}
		end(2, "a")
		// Not sampled: a remote parent that is not.
		parent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}}))
		_, s := tr.Start(parent, "unsampled")
		s.End()
		synctest.Wait()
		if n := len(exp.GetSpans()); n != 0 {
			t.Fatalf("%d spans exported before the interval", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := len(exp.GetSpans()); n != 2 {
			t.Fatalf("%d spans exported after the interval, want 2", n)
		}
		end(4, "full") // a full batch goes at once
		synctest.Wait()
		if n := len(exp.GetSpans()); n != 6 {
			t.Fatalf("%d spans exported after a full batch, want 6", n)
		}
		exp.Reset()
		// The exporter is not reached in between: a queue of 6 holds 6.
		b.exportMu.Lock()
		end(8, "over")
		b.exportMu.Unlock()
		synctest.Wait()
		if err := b.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := len(exp.GetSpans())
		if got != 6 || b.Dropped() != 2 {
			t.Errorf("%d exported and %d dropped of 8 ended past a queue of 6", got, b.Dropped())
		}
		end(1, "queued")
		var last []string
		exp2 := &recordingExporter{InMemoryExporter: exp, names: &last}
		b.exp = exp2
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(last) != 1 || last[0] != "queued-0" {
			t.Errorf("Shutdown exported %q, want the span still queued", last)
		}
		late := tracetest.SpanStub{Name: "late", SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{2}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})}
		b.OnEnd(late.Snapshot())
		if b.Dropped() != 3 {
			t.Errorf("a span ended after Shutdown is not counted dropped: %d", b.Dropped())
		}
	})
}

// recordingExporter notes the names of the spans it exports.
type recordingExporter struct {
	*tracetest.InMemoryExporter
	names *[]string
}

func (e *recordingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	for _, s := range spans {
		*e.names = append(*e.names, s.Name())
	}
	return e.InMemoryExporter.ExportSpans(ctx, spans)
}
