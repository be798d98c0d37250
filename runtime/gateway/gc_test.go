package gateway

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		base, floor uint64
		want        int
	}{
		{0, HeapFloor, 1600},          // before the first collection: the floor
		{1 * mib, HeapFloor, 1600},    // the runtime's minimum heap makes up the rest
		{4 * mib, HeapFloor, 1600},    // 4 MiB live + 64 MiB
		{5 * mib, HeapFloor, 1280},    // 5 MiB live + 64 MiB
		{8 * mib, HeapFloor, 800},     // 8 + 64
		{16 * mib, HeapFloor, 400},    // 16 + 64 = 5 × 16
		{100 * mib, HeapFloor, 400},   // beyond: GCPercent
		{3 * mib, 0, GCPercent},       // no floor
		{3 * mib, 8 * mib, GCPercent}, // a floor below 4 MiB × 4
		{1, 1 << 50, 1 << 20},         // a target the runtime can hold
		{1, 1 << 57, 1 << 20},         // no overflow on the way
		{1 << 50, 1 << 57, 12800},     // 128 × 100
	} {
		if got := gcPercentFor(c.base, c.floor); got != c.want {
			t.Errorf("gcPercentFor(%d bytes, floor %d) = %d, want %d", c.base, c.floor, got, c.want)
		}
	}
}

func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// TestTuneGC follows the live heap: the target falls to GCPercent while a
// large live heap is kept, rises again when it is released, and the old
// target is back after stop.
func TestTuneGC(t *testing.T) {
	// The live heap the tuning reads is the last collection's: collect
	// now, so that what earlier tests left is not counted. Twice: the
	// buffers encoding/json pools (32 MiB after a 16 MiB tool result)
	// outlive one collection.
	runtime.GC()
	runtime.GC()
	old := debug.SetGCPercent(150)
	defer debug.SetGCPercent(old)
	stop := TuneGC(HeapFloor, 5*time.Millisecond)
	t.Cleanup(stop) // also when the test fails early
	if got := gogc(); got <= GCPercent {
		t.Errorf("at start, with a live heap under 16 MiB, the target is %d, want above %d", got, GCPercent)
	}
	live := make([][]byte, 48)
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	runtime.GC()
	eventually(t, 5*time.Second, "the target to fall to GCPercent with 48 MiB live", func() bool { return gogc() == GCPercent })
	runtime.KeepAlive(live)
	live = nil
	runtime.GC()
	eventually(t, 5*time.Second, "the target to rise once the heap is released", func() bool { return gogc() > GCPercent })
	stop()
	stop() // a second stop does nothing
	if got := gogc(); got != 150 {
		t.Errorf("after stop the target is %d, want the 150 it was", got)
	}
}
