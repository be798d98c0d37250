package cmd

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/policyc/policyc/runtime/approval"
	"github.com/policyc/policyc/runtime/gateway/config"
)

// The observer's tracer exports over OTLP/HTTP to the configured endpoint,
// at /v1/traces when the URL names no path, with the configured service
// name; the spans still queued go out when it stops.
func TestObserverExportsOTLP(t *testing.T) {
	var mu sync.Mutex
	var got []*coltracepb.ExportTraceServiceRequest
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, &req)
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Write(out)
	}))
	defer srv.Close()
	ob, err := newObserver(config.Observe{Tracing: &config.Tracing{Endpoint: srv.URL, SampleRatio: 1, ServiceName: "gw-test"}},
		func() *approval.Gate { return nil })
	if err != nil {
		t.Fatal(err)
	}
	_, span := ob.tp.Tracer("test").Start(context.Background(), "tools/call")
	span.End()
	ob.stop()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || paths[0] != "/v1/traces" {
		t.Fatalf("%d exports at %q", len(got), paths)
	}
	rs := got[0].ResourceSpans
	if len(rs) != 1 || len(rs[0].ScopeSpans) != 1 || len(rs[0].ScopeSpans[0].Spans) != 1 || rs[0].ScopeSpans[0].Spans[0].Name != "tools/call" {
		t.Fatalf("export: %v", got[0])
	}
	service := ""
	for _, kv := range rs[0].Resource.Attributes {
		if kv.Key == "service.name" {
			service = kv.Value.GetStringValue()
		}
	}
	if service != "gw-test" {
		t.Errorf("service.name %q", service)
	}
}

// A decision taken on the admin listener is timed from its request's
// creation, once: a second decision of the same request is refused and
// not timed. /metrics is served beside the admin API, without a token.
func TestObserverTimesApprovalDecisions(t *testing.T) {
	g, err := approval.Open(approval.Config{StateDir: t.TempDir(), PageServed: true, PageURL: "http://admin.test"})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	h, err := g.AdminHandler(approval.AdminOptions{Approvers: map[string]string{sha256Hex("carol-token"): "carol"}})
	if err != nil {
		t.Fatal(err)
	}
	ob, err := newObserver(config.Observe{Metrics: true}, func() *approval.Gate { return g })
	if err != nil {
		t.Fatal(err)
	}
	defer ob.stop()
	srv := httptest.NewServer(ob.withMetrics(h, g))
	defer srv.Close()
	held := holdCall(g, "merge_pull_request", `{"number":7}`)
	r := waitPending(t, g, "merge_pull_request")
	post := func(verdict string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+approval.APIPrefix+"/requests/"+r.ID+"/"+verdict, strings.NewReader(`{"for":"once"}`))
		req.Header.Set("Authorization", "Bearer carol-token")
		req.Header.Set("Content-Type", "application/json")
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	scrape := func() string {
		res, err := srv.Client().Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("/metrics: %s %s", res.Status, b)
		}
		return string(b)
	}
	if !strings.Contains(scrape(), "\npolicyc_gateway_approval_requests_pending 1\n") {
		t.Errorf("one request pending, the metrics say otherwise")
	}
	if code := post("approve"); code != http.StatusOK {
		t.Fatalf("approve: %d", code)
	}
	<-held
	if code := post("deny"); code == http.StatusOK {
		t.Fatalf("a decided request was decided again")
	}
	m := scrape()
	if !strings.Contains(m, "\npolicyc_gateway_approval_decision_seconds_count{verdict=\"approve\"} 1\n") || strings.Contains(m, `approval_decision_seconds_count{verdict="deny"}`) {
		t.Errorf("decision latency samples:\n%s", grepLines(m, "approval_decision_seconds_count"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
