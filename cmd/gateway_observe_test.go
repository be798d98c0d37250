package cmd

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
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
