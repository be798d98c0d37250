package approval

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/internal/pgtest"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/gateway"
)

// 100 concurrent identical calls through three gateways sharing one state
// database, and one approval once decided on one of them: the upstream
// runs exactly once, and every other call is told it was identical to
// another.
func TestReplicasHundredCallsOneRun(t *testing.T) {
	dsn := pgtest.DB(t)
	up := newUpstream()
	var gates []*Gate
	var clients []*mcp.ClientSession
	for range 3 {
		g := openReplica(t, dsn, func(c *Config, _ *PostgresOptions) { pageOnly(c) })
		s := newStackOn(t, g, e2ePolicy, up)
		gates = append(gates, g)
		for range 2 {
			clients = append(clients, s.client(t, "alice"))
		}
	}
	type out struct {
		res *mcp.CallToolResult
		err error
	}
	const n = 100
	results := make(chan out, n)
	for i := range n {
		cs := clients[i%len(clients)]
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: map[string]any{"number": 7, "repo": "acme/web"}})
			results <- out{res, err}
		}()
	}
	r := pendingOn(t, gates[0], "alice", "merge_pull_request")
	waitingOn(t, r.ID, n, gates...)
	if up.count("merge_pull_request") != 0 {
		t.Fatal("a held call ran before the decision")
	}
	mustDecide(t, gates[2], r.ID, VerdictApprove, ForOnce)
	ran, refused := 0, 0
	for range n {
		o := <-results
		switch {
		case o.err != nil:
			t.Fatalf("protocol error: %v", o.err)
		case !o.res.IsError:
			ran++
		default:
			refused++
			if !strings.Contains(resultText(o.res), r.ID) || !strings.Contains(resultText(o.res), "identical to another call") {
				t.Fatalf("a folded call's answer does not name the request: %s", resultText(o.res))
			}
		}
	}
	if got := up.count("merge_pull_request"); got != 1 || ran != 1 || refused != n-1 {
		t.Fatalf("upstream ran %d times; %d results ran, %d refused", got, ran, refused)
	}
}

// newStackOn is newStack with the upstream up, which several stacks share.
func newStackOn(t testing.TB, g *Gate, policy string, up *upstream) *stack {
	t.Helper()
	s := &stack{gate: g, up: up, log: &decisions{}}
	s.table.Store(compileTable(t, policy, 1))
	cfg := gateway.Config{
		Upstreams:   []gateway.Upstream{{Name: "github", Dial: up.dial}},
		Tables:      func(func(*decide.Table) error) (*decide.Table, error) { return s.table.Load(), nil },
		Log:         s.log,
		CallTimeout: 10 * time.Second,
		Approvals:   g.Approvals(),
		Consent:     g.Consents(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gw, err := gateway.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	s.gw = gw
	return s
}

// BenchmarkReplicaClickToDispatch measures, per held call, the time from
// the approver's click on one replica (the admin API's approve call) to
// the call held on another replica reaching the upstream: the decision is
// recorded, notified, read by the holding replica, its use recorded, and
// the call dispatched. It reports the median, the 99th percentile and the
// worst case in ms.
func BenchmarkReplicaClickToDispatch(b *testing.B) {
	dsn := pgtest.DB(b)
	a := openReplica(b, dsn, func(c *Config, _ *PostgresOptions) { pageOnly(c) })
	d := openReplica(b, dsn, func(c *Config, _ *PostgresOptions) { pageOnly(c) })
	srv := adminServer(b, d)
	s := newStack(b, a, e2ePolicy)
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
		r := pendingFor(b, a, "alice", "merge_pull_request", 1)
		pendingOn(b, d, "alice", "merge_pull_request")
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

// BenchmarkAllowPathStores is a tools/call of an allowed tool through a
// gateway whose gate keeps its state in files and through one whose gate
// shares it in PostgreSQL, called alternately: an allowed or denied call
// never reaches the store, so the two cost the same. The metrics are each
// median latency and the shared one's as a percentage of the other.
func BenchmarkAllowPathStores(b *testing.B) {
	files := newStack(b, openGate(b, "", pageOnly), e2ePolicy).client(b, "alice")
	shared := newStack(b, openReplica(b, pgtest.DB(b), func(c *Config, _ *PostgresOptions) { pageOnly(c) }), e2ePolicy).client(b, "alice")
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
	for range 50 {
		call(files)
		call(shared)
	}
	fl := make([]time.Duration, 0, b.N)
	sl := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			fl = append(fl, call(files))
			sl = append(sl, call(shared))
		} else {
			sl = append(sl, call(shared))
			fl = append(fl, call(files))
		}
	}
	b.StopTimer()
	slices.Sort(fl)
	slices.Sort(sl)
	mf, ms := fl[len(fl)/2], sl[len(sl)/2]
	b.ReportMetric(float64(mf.Microseconds()), "µs-median-files")
	b.ReportMetric(float64(ms.Microseconds()), "µs-median-postgres")
	b.ReportMetric(100*float64(ms)/float64(mf), "%-postgres/files")
}

// A replica that stops while a call is held there tells the agent that the
// request stays pending and to repeat the call once, not that it must not
// retry: the retry on another replica joins the request and runs once it
// is approved.
func TestReplicaStopTellsAgentToRetry(t *testing.T) {
	dsn := pgtest.DB(t)
	up := newUpstream()
	a := openReplica(t, dsn, func(c *Config, _ *PostgresOptions) { pageOnly(c) })
	b := openReplica(t, dsn, func(c *Config, _ *PostgresOptions) { pageOnly(c) })
	sa, sb := newStackOn(t, a, e2ePolicy, up), newStackOn(t, b, e2ePolicy, up)
	args := map[string]any{"number": 3}
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := sa.client(t, "alice").CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: args})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	r := pendingFor(t, a, "alice", "merge_pull_request", 1)
	a.Close()
	res := <-done
	text := resultText(res)
	if !res.IsError || !strings.Contains(text, "the gateway stopped") || !strings.Contains(text, "repeat the call once") || strings.Contains(text, "Do not retry") {
		t.Fatalf("answer to a call held on a replica that stopped: %s", text)
	}
	retried := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := sb.client(t, "alice").CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: args})
		if err != nil {
			t.Error(err)
		}
		retried <- res
	}()
	waitingOn(t, r.ID, 1, b)
	mustDecide(t, b, r.ID, VerdictApprove, ForOnce)
	if res := <-retried; res.IsError || up.count("merge_pull_request") != 1 {
		t.Fatalf("the retry on another replica: %s, upstream ran %d times", resultText(res), up.count("merge_pull_request"))
	}
}

// With the state database down, a call that needs a new request is told
// that it may repeat the call later: the gateway reconnects by itself, so
// the refusal is not final, and the answer does not say never to retry.
func TestReplicaDatabaseDownTellsAgentLater(t *testing.T) {
	dsn := pgtest.DB(t)
	p := newProxy(t, "127.0.0.1:5432")
	log := &syncLog{}
	g := openReplica(t, strings.Replace(dsn, "127.0.0.1:5432", p.ln.Addr().String(), 1), func(c *Config, o *PostgresOptions) {
		pageOnly(c)
		o.Logger, o.Timeout = slogTo(log), 2*time.Second
	})
	cs := newStackOn(t, g, e2ePolicy, newUpstream()).client(t, "alice")
	p.setDown(true)
	log.waitFor(t, "lost the connection to the state database")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: map[string]any{"number": 3}})
	if err != nil {
		t.Fatal(err)
	}
	text := resultText(res)
	if !res.IsError || !strings.Contains(text, "reconnects by itself") || !strings.Contains(text, "You may repeat it later") || strings.Contains(text, "Do not retry") {
		t.Fatalf("answer to a held call with the state database down: %s", text)
	}
}
