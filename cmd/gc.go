package cmd

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// gcPercent is the garbage collection target (GOGC) the gateway command
// runs with when GOGC is not set. The SDK allocates a 32 KiB buffer for
// every JSON value it decodes while a gateway's live heap stays small, so
// at the default of 100 the collector runs every few calls and takes a
// large share of each one on a small machine; a higher target trades a
// few megabytes of heap for it (docs/performance.md, "Gateway"). The
// gateway's benchmarks keep a copy of it (benchGCPercent in
// runtime/gateway/bench_test.go), so that they measure this policy.
const gcPercent = 400

// heapFloor is the gateway command's garbage collection policy for an
// HTTP front, unless GOGC is set: about this much garbage accumulates
// between two collections however small the live heap is. A gateway's
// live heap is a few megabytes while the SDK allocates 32 KiB for every
// JSON value it decodes, so gcPercent alone would collect every
// few dozen calls. GOMEMLIMIT, when set, still caps the heap
// (docs/performance.md, "Gateway").
const heapFloor = 64 << 20

// gcPercentFor is the collection target that lets about max(floor, base ×
// gcPercent/100) bytes of garbage accumulate, where base is what the
// runtime applies the target to: the live heap, goroutine stacks and
// globals. The runtime never collects below a minimum heap of 4 MiB ×
// target/100, so the target stays at most floor/4 MiB × 100: above that,
// a small live heap would get a larger allowance than the floor.
func gcPercentFor(base, floor uint64) int {
	const limit = 1 << 20 // a target the runtime holds (an int32)
	most := uint64(limit)
	if q := floor / (4 << 20); q < limit/100 {
		most = max(q*100, gcPercent)
	}
	if base == 0 || floor/base >= most/100 {
		return int(most)
	}
	// floor/base < most/100: the product stays small.
	return max(gcPercent, int(math.Ceil(float64(floor)*100/float64(base))))
}

// gcTuner keeps the collection target at gcPercentFor the live heap.
type gcTuner struct {
	floor   uint64
	current int // the target set last, -1 before the first
	samples []metrics.Sample
}

func newGCTuner(floor uint64) *gcTuner {
	return &gcTuner{floor: floor, current: -1, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}}
}

// adjust reads the live heap and changes the target when it is off by
// more than a tenth, or has reached either bound.
func (g *gcTuner) adjust() {
	metrics.Read(g.samples)
	var base uint64
	for _, s := range g.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			base += s.Value.Uint64()
		}
	}
	pct := gcPercentFor(base, g.floor)
	bound := pct == gcPercent || pct == gcPercentFor(0, g.floor)
	if g.current < 0 || (bound && pct != g.current) || math.Abs(float64(pct-g.current)) > float64(g.current)/10 {
		debug.SetGCPercent(pct)
		g.current = pct
	}
}

// tuneGC sets the collection target to gcPercent, raised while
// the live heap is small so that about floor bytes of garbage accumulate
// between collections, and adjusts it every period. stop ends the tuning
// and restores the target the process had.
func tuneGC(floor uint64, period time.Duration) (stop func()) {
	g := newGCTuner(floor)
	old := debug.SetGCPercent(gcPercent)
	g.adjust()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				g.adjust()
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
