package gateway

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// HeapFloor is how much garbage the gateway command, serving HTTP, lets
// accumulate between two collections however small its live heap is. A
// gateway's live heap is a few megabytes while the SDK allocates 32 KiB for
// every JSON value it decodes, so GCPercent alone collects every few dozen
// calls. With the floor the heap peaks at about the live heap plus 64 MiB
// until the live heap passes 16 MiB, and at about five times the live heap
// beyond (docs/gateway.md, "Performance"). GOMEMLIMIT, when set, still
// caps it.
const HeapFloor = 64 << 20

// gcPercentFor is the collection target that lets about max(floor, base ×
// GCPercent/100) bytes of garbage accumulate, where base is what the
// runtime applies the target to: the live heap, goroutine stacks and
// globals. The runtime never collects below a minimum heap of 4 MiB ×
// target/100, so the target stays at most floor/4 MiB × 100: above that,
// a small live heap would get a larger allowance than the floor.
func gcPercentFor(base, floor uint64) int {
	const limit = 1 << 20 // a target the runtime holds (an int32)
	most := uint64(limit)
	if q := floor / (4 << 20); q < limit/100 {
		most = max(q*100, GCPercent)
	}
	if base == 0 || floor/base >= most/100 {
		return int(most)
	}
	// floor/base < most/100: the product stays small.
	return max(GCPercent, int(math.Ceil(float64(floor)*100/float64(base))))
}

// TuneGC sets the collection target of a gateway process to GCPercent,
// raised while the live heap is small so that about floor bytes of garbage
// accumulate between collections. It looks at the live heap every period
// and changes the target when it is off by more than a tenth, or has
// reached either bound. stop ends the tuning and restores the target the
// process had.
func TuneGC(floor uint64, period time.Duration) (stop func()) {
	samples := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}
	current := -1
	adjust := func() {
		metrics.Read(samples)
		var base uint64
		for _, s := range samples {
			if s.Value.Kind() == metrics.KindUint64 {
				base += s.Value.Uint64()
			}
		}
		pct := gcPercentFor(base, floor)
		bound := pct == GCPercent || pct == gcPercentFor(0, floor)
		if current < 0 || (bound && pct != current) || math.Abs(float64(pct-current)) > float64(current)/10 {
			debug.SetGCPercent(pct)
			current = pct
		}
	}
	old := debug.SetGCPercent(GCPercent)
	adjust()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				adjust()
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
