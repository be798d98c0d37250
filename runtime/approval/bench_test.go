package approval

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/policyc/policyc/runtime/gateway"
)

// The benchmarks measure what the gate costs the calls it does not hold,
// and how soon an approval reaches the upstream. Run them with:
//
//	go test ./runtime/approval -run '^$' -bench . -benchtime=2000x -count 5
//
// Figures are in docs/performance.md.

// noApprovalPolicy is e2ePolicy without its approval rules: the gateway
// serves it without a gate.
var noApprovalPolicy = strings.Replace(e2ePolicy, `			approval_list: ["merge_pull_request", "delete_branch"]
			approval_timeout_seconds: 30
			approval_channel: "page"
`, "", 1)

// BenchmarkAllowPath is a tools/call of an allowed tool through the
// gateway over in-memory transports, with the gate configured (and the
// table holding other tools for approval) and without a gate at all. The
// two gateways are called alternately, one call each per iteration, so
// both see the same load on a shared machine; the metrics are the median
// latency of each and the gated median as a percentage of the other.
func BenchmarkAllowPath(b *testing.B) {
	if noApprovalPolicy == e2ePolicy {
		b.Fatal("the policy without approvals still has them")
	}
	gate := openGate(b, "", pageOnly)
	on := newStack(b, gate, e2ePolicy).client(b, "alice")
	off := newStack(b, nil, noApprovalPolicy).client(b, "alice")
	params := &mcp.CallToolParams{Name: "github__echo", Arguments: map[string]any{"title": "a benchmark issue", "labels": []any{"bug"}, "n": 3}}
	ctx := context.Background()
	call := func(cs *mcp.ClientSession) time.Duration {
		start := time.Now()
		res, err := cs.CallTool(ctx, params)
		d := time.Since(start)
		if err != nil || res.IsError {
			b.Fatalf("echo: %v %+v", err, res)
		}
		return d
	}
	for range 50 { // warm up both
		call(on)
		call(off)
	}
	onLat := make([]time.Duration, 0, b.N)
	offLat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			onLat = append(onLat, call(on))
			offLat = append(offLat, call(off))
		} else {
			offLat = append(offLat, call(off))
			onLat = append(onLat, call(on))
		}
	}
	b.StopTimer()
	if len(gate.List(Filter{})) != 0 {
		b.Fatal("an allowed call made an approval request")
	}
	slices.Sort(onLat)
	slices.Sort(offLat)
	mOn, mOff := onLat[len(onLat)/2], offLat[len(offLat)/2]
	b.ReportMetric(float64(mOff.Microseconds()), "µs-median-gate-off")
	b.ReportMetric(float64(mOn.Microseconds()), "µs-median-gate-on")
	b.ReportMetric(100*float64(mOn)/float64(mOff), "%-on/off")
}

// BenchmarkClickToDispatch measures, per held call, the time from the
// approver's click (the admin API's approve call, as the page's form post
// makes it) to the held call reaching the upstream. It reports the median,
// the 99th percentile and the worst case in ms.
func BenchmarkClickToDispatch(b *testing.B) {
	gate := openGate(b, "", pageOnly)
	srv := adminServer(b, gate)
	s := newStack(b, gate, e2ePolicy)
	var dispatched atomic.Pointer[chan time.Time]
	s.up.server.AddTool(&mcp.Tool{Name: "merge_pull_request", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if ch := dispatched.Load(); ch != nil {
			*ch <- time.Now()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "merged"}}}, nil
	})
	cs := s.client(b, "alice")
	client := &http.Client{}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ch := make(chan time.Time, 1)
		dispatched.Store(&ch)
		done := make(chan error, 1)
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: map[string]any{"number": i}})
			if err == nil && res.IsError {
				err = errors.New(resultText(res))
			}
			done <- err
		}()
		r := pendingFor(b, gate, "alice", "merge_pull_request", 1)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/requests/"+r.ID+"/approve", strings.NewReader(`{"for":"once"}`))
		req.Header.Set("Authorization", "Bearer "+carolToken)
		req.Header.Set("Content-Type", "application/json")
		b.StartTimer()
		click := time.Now()
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("approve: %v %v", err, resp)
		}
		resp.Body.Close()
		at := <-ch
		b.StopTimer()
		lat = append(lat, at.Sub(click))
		if err := <-done; err != nil {
			b.Fatalf("held call: %v", err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / 1e6 }
	b.ReportMetric(ms(0.5), "ms-p50")
	b.ReportMetric(ms(0.99), "ms-p99")
	b.ReportMetric(ms(1), "ms-max")
}

// BenchmarkClickToRetryDispatch measures the path of a call whose hold in
// place ended: the agent waits in the wait tool, the approver clicks, the
// wait tool answers approved, and the agent's retry reaches the upstream.
// It reports the median, the 99th percentile and the worst case, from the
// click to the retry's dispatch, in ms.
func BenchmarkClickToRetryDispatch(b *testing.B) {
	gate := openGate(b, "", pageOnly)
	srv := adminServer(b, gate)
	s := newStack(b, gate, e2ePolicy, func(c *gateway.Config) {
		c.Holds = gateway.HoldOptions{InPlace: time.Millisecond, Clients: map[string]time.Duration{"e2e-agent": time.Minute}}
	})
	var dispatched atomic.Pointer[chan time.Time]
	s.up.server.AddTool(&mcp.Tool{Name: "merge_pull_request", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if ch := dispatched.Load(); ch != nil {
			*ch <- time.Now()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "merged"}}}, nil
	})
	// The held call comes from a client held 1 ms; the wait, from one held
	// a minute (by its name).
	caller, waiter := s.namedClient(b, "alice", "impatient"), s.client(b, "alice")
	client := &http.Client{}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		args := map[string]any{"number": i}
		res, err := caller.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: args})
		if err != nil || !res.IsError {
			b.Fatalf("the held call: %v %+v", err, res)
		}
		r := pendingFor(b, gate, "alice", "merge_pull_request", 0)
		ch := make(chan time.Time, 1)
		dispatched.Store(&ch)
		done := make(chan error, 1)
		go func() {
			w, err := waiter.CallTool(context.Background(), &mcp.CallToolParams{Name: gateway.WaitToolName, Arguments: map[string]any{"request_id": r.ID}})
			if err == nil && w.IsError {
				err = errors.New(resultText(w))
			}
			if err == nil {
				var rr *mcp.CallToolResult
				rr, err = caller.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: args})
				if err == nil && rr.IsError {
					err = errors.New(resultText(rr))
				}
			}
			done <- err
		}()
		for gate.awaiting.Load() == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/requests/"+r.ID+"/approve", strings.NewReader(`{"for":"once"}`))
		req.Header.Set("Authorization", "Bearer "+carolToken)
		req.Header.Set("Content-Type", "application/json")
		b.StartTimer()
		click := time.Now()
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("approve: %v %v", err, resp)
		}
		resp.Body.Close()
		at := <-ch
		b.StopTimer()
		lat = append(lat, at.Sub(click))
		if err := <-done; err != nil {
			b.Fatalf("wait and retry: %v", err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / 1e6 }
	b.ReportMetric(ms(0.5), "ms-p50")
	b.ReportMetric(ms(0.99), "ms-p99")
	b.ReportMetric(ms(1), "ms-max")
}

// BenchmarkCompactStateFile measures the pause of the file store's
// rewrite of its state file, which the gate makes holding its lock once
// the file has doubled: 60,000 requests (a month of 2,000 a day), each with
// a preview of four fields, written and synced.
func BenchmarkCompactStateFile(b *testing.B) {
	const n = 60000
	now := time.Now()
	reqs := make([]*Request, n)
	for i := range reqs {
		reqs[i] = &Request{ID: fmt.Sprintf("apr-%016d", i), Kind: KindTool, Status: Denied, Principal: "alice", Server: "github",
			Tool: "merge_pull_request", Origin: "github.cue:12", Channel: "page", Created: now, Expires: now.Add(15 * time.Minute), Calls: 1,
			Preview: &Preview{Fields: []Field{{Key: "number", Value: "7"}, {Key: "repo", Value: `"acme/web"`},
				{Key: "title", Value: `"Fix the parser so that it accepts every input the grammar allows"`}, {Key: "draft", Value: "false"}}},
			Decision: &Decision{Verdict: VerdictDeny, By: "carol", From: "page 10.1.2.3:51234", At: now, Reason: "not today"}}
	}
	s, _, _, err := openStore(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.close()
	b.ResetTimer()
	for b.Loop() {
		if err := s.compact(reqs); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	fi, err := os.Stat(filepath.Join(s.dir, StateFile))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(fi.Size())/(1<<20), "MiB")
}
