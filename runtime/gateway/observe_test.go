package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/policyc/policyc/internal/policytest"
	"github.com/policyc/policyc/runtime/decide"
)

// scrape reads the metrics as Prometheus would, from Handler, and returns
// each sample's value by its line's name and labels as written
// (name{a="x",b="y"}).
func scrape(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	res, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("content type %q", ct)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sample is the value of the sample name{labels}, labels in the order
// written (Prometheus sorts them by name); ok is false when there is none.
func sample(s map[string]float64, name string, labels ...string) (float64, bool) {
	key := name
	if len(labels) > 0 {
		var b strings.Builder
		for i := 0; i < len(labels); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=%q", labels[i], labels[i+1])
		}
		key += "{" + b.String() + "}"
	}
	v, ok := s[key]
	return v, ok
}

// The metrics after known traffic: each counter says what happened, the
// gauges say what is, and no sample names a tool or a principal.
func TestMetricsAfterTraffic(t *testing.T) {
	m := NewMetrics(MetricsOptions{Pending: func() int { return 3 }})
	log := &memLog{}
	serial := uint64(5)
	var tables sync.Mutex
	tg := startGateway(t, func(c *Config) {
		c.Metrics = m
		c.Log = log
		c.Tables = func(accept func(*decide.Table) error) (*decide.Table, error) {
			tables.Lock()
			defer tables.Unlock()
			rt := loadTable(t, testPolicy, serial)
			if err := accept(rt); err != nil {
				return nil, err
			}
			return rt, nil
		}
	})
	ctx := context.Background()
	cs := tg.client(t, "alice", legacyVersion, nil)
	bob := tg.client(t, "bob", legacyVersion, nil)

	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "github__echo", Arguments: map[string]any{"x": 1}}); err != nil || res.IsError {
			t.Fatalf("echo: %v %v", err, res)
		}
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "linear__echo"}); err != nil || res.IsError {
		t.Fatalf("linear echo: %v %v", err, res)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "github__delete_repo"}); err == nil {
		t.Fatal("a denied tool was called")
	}
	if _, err := bob.CallTool(ctx, &mcp.CallToolParams{Name: "nosuch__tool"}); err == nil {
		t.Fatal("a tool of no upstream was called")
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "github__summarize", Arguments: map[string]string{"topic": "x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///srv/projects/app/.env"}); err == nil {
		t.Fatal("a denied resource was read")
	}
	// Reloads: the same table, an older one, a newer one.
	reload := func(s uint64) error {
		tables.Lock()
		serial = s
		tables.Unlock()
		return tg.Reload()
	}
	if err := reload(5); err != nil {
		t.Fatal(err)
	}
	if err := reload(4); err == nil {
		t.Fatal("an older table was loaded")
	}
	if err := reload(6); err != nil {
		t.Fatal(err)
	}
	// The log fails once: the call is refused, and counted.
	log.mu.Lock()
	log.fail = errors.New("disk full")
	log.mu.Unlock()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "github__echo"}); err == nil || !strings.Contains(err.Error(), "decision log cannot be written") {
		t.Fatalf("a call with a failing log: %v", err)
	}
	s := scrape(t, m)
	if v, _ := sample(s, "policyc_gateway_decision_log_up"); v != 0 {
		t.Errorf("decision_log_up %v while the log fails", v)
	}
	log.mu.Lock()
	log.fail = nil
	log.mu.Unlock()

	// What the log recorded is what the metrics count.
	type key struct {
		server, kind, op, decision string
	}
	want := map[key]float64{}
	for _, r := range log.all() {
		server := r.Server
		if tg.byName[server] == nil {
			server = noServer
		}
		want[key{server, r.Kind.String(), r.Op.String(), r.Decision.Effect.String()}]++
	}
	s = scrape(t, m)
	for k, n := range want {
		if v, _ := sample(s, "policyc_gateway_decisions_total", "decision", k.decision, "kind", k.kind, "op", k.op, "server", k.server); v != n {
			t.Errorf("decisions_total %v = %v, the log has %v", k, v, n)
		}
	}
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"policyc_gateway_decisions_total", []string{"decision", "allow", "kind", "tool", "op", "call", "server", "github"}, 2},
		{"policyc_gateway_decisions_total", []string{"decision", "deny", "kind", "tool", "op", "call", "server", "github"}, 1},
		{"policyc_gateway_decisions_total", []string{"decision", "deny", "kind", "tool", "op", "call", "server", noServer}, 1},
		{"policyc_gateway_decisions_total", []string{"decision", "allow", "kind", "prompt", "op", "get", "server", "github"}, 1},
		{"policyc_gateway_decisions_total", []string{"decision", "deny", "kind", "resource", "op", "read", "server", "github"}, 1},
		{"policyc_gateway_decisions_total", []string{"decision", "deny", "kind", "tool", "op", "list", "server", "github"}, 2},
		{"policyc_gateway_tool_calls_total", []string{"result", "ok", "upstream", "github"}, 2},
		{"policyc_gateway_tool_calls_total", []string{"result", "ok", "upstream", "linear"}, 1},
		{"policyc_gateway_tool_calls_total", []string{"result", "error", "upstream", "github"}, 0},
		{"policyc_gateway_tool_call_duration_seconds_count", []string{"upstream", "github"}, 2},
		{"policyc_gateway_tool_call_duration_seconds_bucket", []string{"upstream", "github", "le", "+Inf"}, 2},
		{"policyc_gateway_upstream_up", []string{"upstream", "github"}, 1},
		{"policyc_gateway_upstream_up", []string{"upstream", "linear"}, 1},
		{"policyc_gateway_upstream_restarts_total", []string{"upstream", "github"}, 0},
		{"policyc_gateway_reloads_total", []string{"result", "unchanged"}, 1},
		{"policyc_gateway_reloads_total", []string{"result", "refused"}, 1},
		{"policyc_gateway_reloads_total", []string{"result", "loaded"}, 1},
		{"policyc_gateway_table_serial", []string{"table_digest", tg.Table().Digest()}, 6},
		{"policyc_gateway_sessions_open", nil, 2},
		{"policyc_gateway_approval_requests_pending", nil, 3},
		{"policyc_gateway_held_calls", nil, 0},
		{"policyc_gateway_decision_log_errors_total", nil, 1},
		{"policyc_gateway_decision_log_up", nil, 0}, // until a write succeeds
	}
	for _, c := range checks {
		if v, ok := sample(s, c.name, c.labels...); !ok || v != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	if v, ok := sample(s, "policyc_gateway_table_age_seconds"); !ok || v < 0 {
		t.Errorf("table_age_seconds %v %v", v, ok)
	}
	for line := range s {
		for _, leak := range []string{"alice", "bob", "echo", "delete_repo", "nosuch", "summarize", ".env"} {
			if strings.Contains(line, leak) {
				t.Errorf("a sample names %q: %s", leak, line)
			}
		}
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "github__echo"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := sample(scrape(t, m), "policyc_gateway_decision_log_up"); v != 1 {
		t.Errorf("decision_log_up %v once the log writes again", v)
	}
	// A Metrics serves one gateway.
	if _, err := New(ctx, Config{Tables: fixed(loadTable(t, testPolicy, 1)), Log: &memLog{}, Metrics: m,
		Upstreams: []Upstream{{Name: "github", Dial: tg.github.dial}}}); err == nil {
		t.Error("a second gateway took the first one's metrics")
	}
}

// A held call is counted while it is held, and its wait by verdict once
// the gate answers.
func TestMetricsHeldCalls(t *testing.T) {
	m := NewMetrics(MetricsOptions{})
	held, release := make(chan struct{}), make(chan struct{})
	tg := startGateway(t, func(c *Config) {
		c.Metrics = m
		c.Tables = fixed(loadTable(t, approvalPolicy, 1))
		c.Approvals = gateFunc(func(ctx context.Context, req *HoldRequest) (Verdict, error) {
			held <- struct{}{}
			<-release
			return Verdict{Outcome: OutcomeDenied, By: "carol"}, nil
		})
	})
	cs := tg.client(t, "alice", legacyVersion, nil)
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request"})
		done <- err
	}()
	<-held
	if v, _ := sample(scrape(t, m), "policyc_gateway_held_calls"); v != 1 {
		t.Errorf("held_calls %v while one call is held", v)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s := scrape(t, m)
	if v, _ := sample(s, "policyc_gateway_held_calls"); v != 0 {
		t.Errorf("held_calls %v once the call is answered", v)
	}
	if v, _ := sample(s, "policyc_gateway_approval_wait_seconds_count", "verdict", "denied"); v != 1 {
		t.Errorf("approval_wait_seconds_count{denied} %v", v)
	}
	if v, _ := sample(s, "policyc_gateway_decisions_total", "decision", "approve", "kind", "tool", "op", "call", "server", "github"); v != 1 {
		t.Errorf("decisions_total{approve, call} %v", v)
	}
}

// A held call's span carries the approval verdict beside the decision.
func TestTraceHeldCall(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tg := startGateway(t, func(c *Config) {
		c.Tracer = tp
		c.Tables = fixed(loadTable(t, approvalPolicy, 1))
		c.Approvals = gateFunc(func(ctx context.Context, req *HoldRequest) (Verdict, error) {
			return Verdict{Outcome: OutcomeDenied, By: "carol"}, nil
		})
	})
	cs := tg.client(t, "alice", legacyVersion, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request"})
	if err != nil || !res.IsError {
		t.Fatalf("a refused held call: %v %+v", err, res)
	}
	var got map[string]string
	for _, s := range exp.GetSpans() {
		if s.Name != "tools/call" {
			continue
		}
		got = map[string]string{}
		for _, kv := range s.Attributes {
			got[string(kv.Key)] = kv.Value.String()
		}
	}
	if got["policyc.decision"] != "approve" || got["policyc.approval.verdict"] != "denied" {
		t.Fatalf("held call span attributes %v, want decision approve and verdict denied", got)
	}
}

// A tools/call is traced as a server span, the child of the trace context
// the client put in _meta, with the decision, the deciding rule's origin
// and the table's digest; the upstream receives the span's trace context
// in the forwarded _meta, so that its spans are the gateway span's
// children.
func TestTraceToolCall(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tg := startGateway(t, func(c *Config) { c.Tracer = tp })
	var upMeta sync.Map // tool name → the _meta the upstream received
	tg.github.Server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if r, ok := req.(*mcp.CallToolRequest); ok {
				upMeta.Store(r.Params.Name, r.Params.Meta)
			}
			return next(ctx, method, req)
		}
	})
	cs := tg.client(t, "alice", legacyVersion, nil)
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__echo", Arguments: map[string]any{"x": 1},
		Meta: mcp.Meta{"traceparent": parent, "tracestate": "vendor=1"}})
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %v", err, res)
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__delete_repo"}); err == nil {
		t.Fatal("a denied tool was called")
	}
	spans := exp.GetSpans()
	var server, denied *tracetest.SpanStub
	for i := range spans {
		s := &spans[i]
		switch {
		case s.Name == "tools/call" && s.SpanKind == trace.SpanKindServer && s.Parent.IsValid():
			server = s
		case s.Name == "tools/call" && s.SpanKind == trace.SpanKindServer:
			denied = s
		}
	}
	calls := 0
	for _, s := range spans {
		if s.Name == "tools/call" {
			calls++
		}
		if strings.HasPrefix(s.Name, "notifications/") {
			t.Errorf("a span for the notification %s", s.Name)
		}
	}
	if calls != 2 || server == nil || denied == nil {
		t.Fatalf("spans: %+v", spans)
	}
	if got := server.SpanContext.TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("server span in trace %s, not the client's", got)
	}
	if got := server.Parent.SpanID().String(); got != "00f067aa0ba902b7" || !server.Parent.IsRemote() {
		t.Errorf("server span's parent %s (remote %v), not the client's span", got, server.Parent.IsRemote())
	}
	if server.SpanContext.TraceState().Get("vendor") != "1" {
		t.Errorf("tracestate not carried: %q", server.SpanContext.TraceState().String())
	}
	attrs := func(s *tracetest.SpanStub) map[string]string {
		m := map[string]string{}
		for _, kv := range s.Attributes {
			m[string(kv.Key)] = kv.Value.String()
		}
		return m
	}
	a := attrs(server)
	if len(server.Attributes) != 8 {
		// traceDecision: at 9 the SDK allocates a map table at the end.
		t.Errorf("an allowed call's span without a session has %d attributes, want 8: %v", len(server.Attributes), a)
	}
	digest := tg.Table().Digest()
	for k, want := range map[string]string{"mcp.method.name": "tools/call", "policyc.server": "github", "policyc.name": "echo",
		"policyc.decision": "allow", "policyc.decision.reason": "rule", "policyc.table.digest": digest, "policyc.table.serial": "1"} {
		if a[k] != want {
			t.Errorf("server span %s = %q, want %q", k, a[k], want)
		}
	}
	if o := a["policyc.decision.origin"]; !strings.Contains(o, ":") {
		t.Errorf("server span's origin %q is not a file:line", o)
	}
	if d := attrs(denied); d["policyc.decision"] != "deny" || d["policyc.name"] != "delete_repo" || d["policyc.table.digest"] != digest {
		t.Errorf("denied call's span: %v", d)
	}
	v, ok := upMeta.Load("echo")
	if !ok {
		t.Fatal("the upstream saw no call")
	}
	meta := v.(mcp.Meta)
	wantParent := "00-" + server.SpanContext.TraceID().String() + "-" + server.SpanContext.SpanID().String() + "-01"
	if meta["traceparent"] != wantParent {
		t.Errorf("upstream received traceparent %v, want %s", meta["traceparent"], wantParent)
	}
	if meta["tracestate"] != "vendor=1" {
		t.Errorf("upstream received tracestate %v", meta["tracestate"])
	}
}

// Without a trace context from the client, a request still gets a span
// (a root), and the listing's span counts its decisions.
func TestTraceListing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tg := startGateway(t, func(c *Config) { c.Tracer = tp })
	cs := tg.client(t, "alice", legacyVersion, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var span *tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "tools/list" {
			span = &s
		}
	}
	if span == nil || span.Parent.IsValid() {
		t.Fatalf("no root tools/list span: %+v", exp.GetSpans())
	}
	got := map[string]int64{}
	for _, kv := range span.Attributes {
		if kv.Value.Type().String() == "INT64" {
			got[string(kv.Key)] = kv.Value.AsInt64()
		}
	}
	if got["policyc.listing.allow"]+got["policyc.listing.approve"] != int64(len(res.Tools)) || got["policyc.listing.deny"] == 0 {
		t.Errorf("listing span counts %v for %d tools listed", got, len(res.Tools))
	}
}

// A listing of 90,000 tools writes one short line to the decision log,
// whose digest is that of the tools it hid.
func TestLargeListingOneLine(t *testing.T) {
	const n = 90000
	big := newMemUpstream("github")
	tools := make([]*mcp.Tool, n)
	var hidden []string
	for i := range tools {
		tools[i] = &mcp.Tool{Name: fmt.Sprintf("list_%05d", i), InputSchema: map[string]any{"type": "object"}}
		if i%2 == 1 {
			hidden = append(hidden, tools[i].Name)
		}
	}
	big.Server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == methodListTools {
				return &mcp.ListToolsResult{Tools: tools}, nil
			}
			return next(ctx, method, req)
		}
	})
	w := &writeCounter{}
	policy := strings.Replace(testPolicy, `"list_*"`, `"list_*[02468]"`, 1)
	tg := startGateway(t, func(c *Config) {
		c.Log = NewJSONLog(w)
		c.Tables = fixed(loadTable(t, policy, 1))
		c.Upstreams = []Upstream{{Name: "github", Dial: big.dial}}
		c.ConnectTimeout = time.Minute
	})
	cs := tg.client(t, "alice", legacyVersion, nil)
	before := len(w.all())
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != n/2 {
		t.Fatalf("listed %d tools, want %d", len(res.Tools), n/2)
	}
	writes := w.all()[before:]
	if len(writes) != 1 || strings.Count(writes[0], "\n") != 1 || len(writes[0]) > 1024 {
		t.Fatalf("%d writes, %d bytes: want one line of under 1 KiB", len(writes), len(strings.Join(writes, "")))
	}
	var line listingLine
	if err := json.Unmarshal([]byte(writes[0]), &line); err != nil {
		t.Fatal(err)
	}
	if line.Allow != n/2 || line.Deny != n/2 || line.Hidden != n/2 || len(line.Servers) != 1 || line.Servers[0].HiddenDigest != HiddenDigestOf(hidden) {
		t.Errorf("line %s", writes[0])
	}
	t.Logf("the decision log line of a %d-tool listing: %d bytes", n, len(writes[0]))
}

// The decision log file is rotated (renamed, then Reopen) again and again
// while decisions are written from many goroutines: every line is in one
// of the files, whole, and none twice.
func TestLogFileRotationLosesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "decisions.jsonl")
	f, err := OpenLogFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := NewJSONLog(f)
	const writers, each, rotations = 8, 2000, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	start := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			<-start
			for i := range each {
				if err := l.Log(&Record{Principal: "alice", Server: "github", Name: fmt.Sprintf("w%d-%d", w, i), Op: OpCall}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Go(func() {
		<-start
		for i := range rotations {
			if err := os.Rename(path, fmt.Sprintf("%s.%d", path, i)); err != nil {
				errs <- err
				return
			}
			if err := f.Reopen(); err != nil {
				errs <- err
				return
			}
		}
	})
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	files, _ := filepath.Glob(path + "*")
	if len(files) != rotations+1 {
		t.Errorf("%d files, want %d", len(files), rotations+1)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			var r struct{ Name string }
			if err := json.Unmarshal([]byte(line), &r); err != nil || !strings.HasSuffix(line, "\n") {
				t.Fatalf("%s: line %q: %v", name, line, err)
			}
			if seen[r.Name] {
				t.Errorf("%s twice", r.Name)
			}
			seen[r.Name] = true
		}
	}
	if len(seen) != writers*each {
		t.Errorf("%d lines in the files, %d written", len(seen), writers*each)
	}
}

// A LogFile whose path cannot be opened again keeps writing to the file
// it has, and says why; once closed, writes fail (and the gateway refuses
// what they would record).
func TestLogFileReopenFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "decisions.jsonl")
	if err := os.Mkdir(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := OpenLogFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Dir(path), filepath.Join(dir, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := f.Reopen(); err == nil || !strings.Contains(err.Error(), "still go to the file open before") {
		t.Fatalf("Reopen: %v", err)
	}
	if _, err := io.WriteString(f, "line\n"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "moved", "decisions.jsonl")); string(b) != "line\n" {
		t.Errorf("the old file holds %q", b)
	}
	f.Close()
	if _, err := io.WriteString(f, "line\n"); err == nil {
		t.Error("a write after Close succeeded")
	}
}

// With metrics on, the gateway's own work on a tools/call (decide, count,
// write the decision line) still allocates nothing.
func TestPolicyWorkWithMetricsAllocatesNothing(t *testing.T) {
	m := NewMetrics(MetricsOptions{})
	tg := startGateway(t, func(c *Config) { c.Metrics = m; c.Log = NewJSONLog(io.Discard) })
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := tg.authorizeCall("alice", "github__echo"); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("policy work with metrics allocates %.1f times per call; want 0", allocs)
	}
	if v, _ := sample(scrape(t, m), "policyc_gateway_decisions_total", "decision", "allow", "kind", "tool", "op", "call", "server", "github"); v < 200 {
		t.Errorf("decisions counted: %v", v)
	}
}

// A request to the HTTP front with a token the gateway does not know is
// refused, and counted by reason.
func TestMetricsTokenRefusals(t *testing.T) {
	m := NewMetrics(MetricsOptions{})
	tg := startGateway(t, func(c *Config) { c.Metrics = m })
	do := rawHTTP(t, aliceFront(t, tg).URL)
	for range 2 {
		if res, _ := do(http.MethodPost, "not-a-token", "", legacyVersion, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("an unknown token: status %d", res.StatusCode)
		}
	}
	rawHTTPSession(t, do, legacyVersion) // alice's token is not refused
	s := scrape(t, m)
	if v, ok := sample(s, "policyc_gateway_token_refusals_total", "reason", "unknown_token"); !ok || v != 2 {
		t.Errorf("token_refusals_total{reason=unknown_token} = %v (present %v), want 2", v, ok)
	}
	for line := range s {
		if strings.Contains(line, "not-a-token") {
			t.Errorf("a sample names the token: %s", line)
		}
	}
}

// The table's gauges: when it began to serve, its policy's commit time,
// its age (from the commit, else from when it began to serve) and its
// expiry, each only when the table has it.
func TestMetricsTableTimes(t *testing.T) {
	since := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	now := since.Add(90 * time.Second)
	collect := func(commit, expires string) map[string]float64 {
		src := policytest.Compile(t, testPolicy, 3)
		src.Source.CommitTime, src.Expires = commit, expires
		rt, err := decide.Load(src)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		collectTable(func(d *prometheus.Desc, v float64, _ ...string) {
			name := d.String()
			name = name[strings.Index(name, `"`)+1:]
			got[name[:strings.Index(name, `"`)]] = v
		}, rt, since, now)
		return got
	}
	got := collect("2026-12-01T09:00:00Z", "2026-12-08T00:00:00Z")
	for name, want := range map[string]float64{
		"policyc_gateway_table_serial":                   3,
		"policyc_gateway_table_loaded_timestamp_seconds": float64(since.Unix()),
		"policyc_gateway_table_commit_timestamp_seconds": float64(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC).Unix()),
		"policyc_gateway_table_age_seconds":              3690,
		"policyc_gateway_table_expiry_timestamp_seconds": float64(time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC).Unix()),
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	got = collect("", "")
	if v := got["policyc_gateway_table_age_seconds"]; v != 90 {
		t.Errorf("with no commit time, table_age_seconds = %v, want 90 (since it began to serve)", v)
	}
	for _, name := range []string{"policyc_gateway_table_commit_timestamp_seconds", "policyc_gateway_table_expiry_timestamp_seconds"} {
		if _, ok := got[name]; ok {
			t.Errorf("%s reported for a table without one", name)
		}
	}
}
