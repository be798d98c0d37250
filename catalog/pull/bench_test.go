package pull

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/policyc/policyc/catalog/pull/internal/fixture"
)

// BenchmarkPull20 pulls 20 in-process servers whose listings each take
// 25 ms: about 100 ms per server (tools, prompts, resources, templates).
// Pulled one after the other that is 2 s; concurrently the wall time per
// pull should stay close to the slowest server's. "serial-ms" is the sum of
// the servers' own durations, "speedup" that sum over the wall time.
func BenchmarkPull20(b *testing.B) {
	ups := make([]Upstream, 20)
	for i := range ups {
		ups[i] = inMemory(fmt.Sprintf("s%02d", i), fixture.Options{ListDelay: 25 * time.Millisecond})
	}
	var wall, sum, slowest time.Duration
	for b.Loop() {
		start := time.Now()
		results := Pull(context.Background(), ups, Options{Timeout: 10 * time.Second})
		wall += time.Since(start)
		for _, r := range results {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
			sum += r.Duration
			slowest = max(slowest, r.Duration)
		}
	}
	n := time.Duration(b.N)
	b.ReportMetric(float64((sum / n).Milliseconds()), "serial-ms")
	b.ReportMetric(float64(slowest.Milliseconds()), "slowest-ms")
	b.ReportMetric(float64(sum)/float64(wall), "speedup")
}
