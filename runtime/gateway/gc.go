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
// until the live heap passes 16 MiB, and at five times the live heap beyond
// (docs/gateway.md, "Performance"). GOMEMLIMIT, when set, still caps it.
const HeapFloor = 64 << 20

// gcPercentFor is the collection target that lets max(floor, live heap ×
// GCPercent/100) bytes of garbage accumulate over a live heap of live
// bytes. The runtime never collects below a minimum heap of 4 MiB ×
// target/100, so the target stays at most floor/4 MiB × 100: above that,
// a small live heap would get a larger allowance than the floor.
func gcPercentFor(live, floor uint64) int {
	most := max(GCPercent, int(min(floor/(4<<20)*100, 1<<20)))
	if live == 0 {
		return most
	}
	return min(most, max(GCPercent, int((floor*100+live-1)/live)))
}

// TuneGC sets the collection target of a gateway process to GCPercent,
// raised while the live heap is small so that at least floor bytes of
// garbage accumulate between collections. It looks at the live heap every
// period and changes the target when it is off by more than a tenth. stop
// ends the tuning and restores the target the process had.
func TuneGC(floor uint64, period time.Duration) (stop func()) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	current := -1
	adjust := func() {
		metrics.Read(sample)
		var live uint64
		if sample[0].Value.Kind() == metrics.KindUint64 {
			live = sample[0].Value.Uint64()
		}
		pct := gcPercentFor(live, floor)
		if current < 0 || math.Abs(float64(pct-current)) > float64(current)/10 {
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
