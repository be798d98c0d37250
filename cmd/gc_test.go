package cmd

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
		{0, heapFloor, 1600},          // before the first collection: the floor
		{1 * mib, heapFloor, 1600},    // the runtime's minimum heap makes up the rest
		{4 * mib, heapFloor, 1600},    // 4 MiB live + 64 MiB
		{5 * mib, heapFloor, 1280},    // 5 MiB live + 64 MiB
		{8 * mib, heapFloor, 800},     // 8 + 64
		{16 * mib, heapFloor, 400},    // 16 + 64 = 5 × 16
		{100 * mib, heapFloor, 400},   // beyond: gcPercent
		{3 * mib, 0, gcPercent},       // no floor
		{3 * mib, 8 * mib, gcPercent}, // a floor below 4 MiB × 4
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

// The tuner follows the live heap: the target falls to gcPercent while a
// large live heap is kept and rises again when it is released. Each step
// is one adjustment after a collection, with no clock involved.
func TestGCTunerFollowsLiveHeap(t *testing.T) {
	// The live heap the tuner reads is the last collection's: collect
	// now, so that what earlier tests left is not counted. Twice: buffers
	// that pools hold outlive one collection.
	runtime.GC()
	runtime.GC()
	old := debug.SetGCPercent(150)
	defer debug.SetGCPercent(old)
	g := newGCTuner(heapFloor)
	g.adjust()
	if got := gogc(); got <= gcPercent {
		t.Errorf("with a live heap under 16 MiB, the target is %d, want above %d", got, gcPercent)
	}
	live := make([][]byte, 48)
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	runtime.GC()
	g.adjust()
	if got := gogc(); got != gcPercent {
		t.Errorf("with 48 MiB live, the target is %d, want %d", got, gcPercent)
	}
	runtime.KeepAlive(live)
	live = nil
	runtime.GC()
	runtime.GC()
	g.adjust()
	if got := gogc(); got <= gcPercent {
		t.Errorf("once the heap is released, the target is %d, want above %d", got, gcPercent)
	}
}

// tuneGC sets a target at once, and its stop restores the one the process
// had, however often it is called.
func TestTuneGCStopRestores(t *testing.T) {
	old := debug.SetGCPercent(150)
	defer debug.SetGCPercent(old)
	stop := tuneGC(heapFloor, time.Hour)
	if got := gogc(); got < gcPercent {
		t.Errorf("while tuning, the target is %d, want at least %d", got, gcPercent)
	}
	stop()
	stop() // a second stop does nothing
	if got := gogc(); got != 150 {
		t.Errorf("after stop the target is %d, want the 150 it was", got)
	}
}
