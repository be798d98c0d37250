package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// SpanBatcher is a span processor that keeps ended spans in memory and
// hands them to an exporter in batches: every interval, once maxBatch are
// waiting, on ForceFlush and on Shutdown. Unlike the SDK's batch span
// processor, which wakes its goroutine for every span it is given, ending
// a span here is an append under a lock; the goroutine wakes once per
// interval or full batch. Past maxQueue spans waiting (an exporter that
// cannot keep up), new spans are dropped and counted.
type SpanBatcher struct {
	exp      sdktrace.SpanExporter
	maxBatch int
	maxQueue int

	mu      sync.Mutex
	queue   []sdktrace.ReadOnlySpan
	dropped int64
	closed  bool

	full     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	exportMu sync.Mutex // one export at a time, in order
}

// NewSpanBatcher returns a SpanBatcher exporting to exp every interval
// (default 5s), in batches of at most maxBatch spans (default 512), with
// at most maxQueue spans waiting (default 8192).
func NewSpanBatcher(exp sdktrace.SpanExporter, interval time.Duration, maxBatch, maxQueue int) *SpanBatcher {
	if interval <= 0 {
		interval = 5 * time.Second
	}
	if maxBatch <= 0 {
		maxBatch = 512
	}
	if maxQueue < maxBatch {
		maxQueue = max(8192, maxBatch)
	}
	b := &SpanBatcher{exp: exp, maxBatch: maxBatch, maxQueue: maxQueue,
		full: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go b.run(interval)
	return b
}

func (b *SpanBatcher) run(interval time.Duration) {
	defer close(b.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-b.full:
		case <-b.stop:
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), interval)
		b.export(ctx)
		cancel()
	}
}

// OnStart does nothing: spans are taken once they end.
func (b *SpanBatcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s for export.
func (b *SpanBatcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	b.mu.Lock()
	if b.closed || len(b.queue) >= b.maxQueue {
		b.dropped++
		b.mu.Unlock()
		return
	}
	b.queue = append(b.queue, s)
	n := len(b.queue)
	b.mu.Unlock()
	if n == b.maxBatch {
		select {
		case b.full <- struct{}{}:
		default:
		}
	}
}

// Dropped counts the spans dropped because the queue was full or the
// batcher shut down.
func (b *SpanBatcher) Dropped() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}

// export hands every span queued to the exporter, a batch at a time.
func (b *SpanBatcher) export(ctx context.Context) error {
	b.exportMu.Lock()
	defer b.exportMu.Unlock()
	for {
		b.mu.Lock()
		n := min(len(b.queue), b.maxBatch)
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		if len(b.queue) == 0 {
			b.queue = nil // start afresh rather than creep along one array
		}
		b.mu.Unlock()
		if n == 0 {
			return nil
		}
		if err := b.exp.ExportSpans(ctx, batch); err != nil {
			return err
		}
	}
}

// ForceFlush exports every span queued.
func (b *SpanBatcher) ForceFlush(ctx context.Context) error { return b.export(ctx) }

// Shutdown exports every span queued and shuts the exporter down; spans
// ended after it are dropped.
func (b *SpanBatcher) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	<-b.done
	return errors.Join(b.export(ctx), b.exp.Shutdown(ctx))
}
