package cmd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/approval"
	"github.com/policyc/policyc/runtime/gateway"
	"github.com/policyc/policyc/runtime/gateway/config"
)

// observer is what the gateway command runs for the observe block: the
// metrics, the trace exporter and the decision log's reopening.
type observer struct {
	metrics *gateway.Metrics
	tp      *sdktrace.TracerProvider
	stops   []func()
}

// newObserver sets up what o asks for in the gateway's configuration:
// metrics (counting pending requests through gate, when there is one) and
// traces. Nothing listens yet.
func newObserver(o config.Observe, gate func() *approval.Gate) (*observer, error) {
	ob := &observer{}
	if o.Metrics {
		ob.metrics = gateway.NewMetrics(gateway.MetricsOptions{Pending: func() int {
			if g := gate(); g != nil {
				return len(g.List(approval.Filter{Status: approval.Pending}))
			}
			return 0
		}})
	}
	if t := o.Tracing; t != nil {
		endpoint, err := url.Parse(t.Endpoint)
		if err != nil {
			return nil, fmt.Errorf("observe.tracing.endpoint: %v", err)
		}
		if endpoint.Path == "" || endpoint.Path == "/" {
			endpoint.Path = "/v1/traces"
		}
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpoint.String()))
		if err != nil {
			return nil, fmt.Errorf("observe.tracing: %v", err)
		}
		res := resource.NewSchemaless(semconv.ServiceName(t.ServiceName), semconv.ServiceVersion(compiler.Version))
		ob.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(gateway.NewSpanBatcher(exp, 0, 0, 0)), sdktrace.WithResource(res),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(t.SampleRatio))))
		ob.stops = append(ob.stops, func() {
			// The spans still queued are sent, for as long as a stop can wait.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			ob.tp.Shutdown(ctx)
		})
	}
	return ob, nil
}

// configure sets the gateway's metrics and tracer.
func (ob *observer) configure(c *gateway.Config) {
	c.Metrics = ob.metrics
	if ob.tp != nil {
		c.Tracer = ob.tp
	}
}

// withMetrics is h, the approval gate's admin handler, with the metrics at
// /metrics, when there are any; a decision taken through h (the admin API
// or the approvals page) is timed from its request's creation.
func (ob *observer) withMetrics(h http.Handler, gate *approval.Gate) http.Handler {
	if ob.metrics == nil {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", ob.metrics.Handler())
	mux.Handle("/", h)
	decide := func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		// Decided during this request: no decision is timed twice, and a
		// refused one (already decided, not an approver) not at all.
		if req, ok := gate.Get(r.PathValue("id")); ok && req.Decision != nil && !req.Decision.At.Before(start) {
			ob.metrics.ApprovalDecided(req.Decision.Verdict, req.Decision.At.Sub(req.Created))
		}
	}
	for _, p := range []string{approval.APIPrefix + "/requests/{id}/approve", approval.APIPrefix + "/requests/{id}/deny", "/approvals/{id}"} {
		mux.HandleFunc("POST "+p, decide)
	}
	return mux
}

// serveMetrics serves /metrics on address, until stop.
func (ob *observer) serveMetrics(address string, logger *slog.Logger) error {
	if ob.metrics == nil || address == "" {
		return nil
	}
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return failuref("observe.metrics_address: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", ob.metrics.Handler())
	srv := newHTTPServer(mux)
	go srv.Serve(ln)
	logger.Info("serving metrics", "address", ln.Addr().String(), "path", "/metrics")
	ob.stops = append(ob.stops, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return nil
}

// reopenOnSIGUSR1 reopens the decision log file f, and the approval
// gate's audit log file when gate keeps one, on every SIGUSR1, for
// rotation: the files are renamed, then the gateway told to reopen them.
// A reopen that fails is logged (the decision log's counted), and the
// lines go on to the file open before. With neither file (the log is
// standard error, no gate or one on a shared store) the signal is caught
// all the same, and logged: its default action would end the gateway.
func (ob *observer) reopenOnSIGUSR1(f *gateway.LogFile, gate *approval.Gate, logger *slog.Logger) {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-usr1:
				audit := ""
				if gate != nil {
					var err error
					if audit, err = gate.ReopenAudit(); err != nil {
						logger.Error("approval audit log not reopened", "path", audit, "error", err.Error())
					} else if audit != "" {
						logger.Info("approval audit log reopened", "path", audit)
					}
				}
				if f == nil {
					if audit == "" {
						logger.Warn("SIGUSR1: the decision log is standard error, so there is no file to reopen")
					}
					continue
				}
				err := f.Reopen()
				ob.metrics.LogReopened(err)
				if err != nil {
					logger.Error("decision log not reopened", "path", f.Path(), "error", err.Error())
				} else {
					logger.Info("decision log reopened", "path", f.Path())
				}
			case <-done:
				return
			}
		}
	}()
	ob.stops = append(ob.stops, func() { signal.Stop(usr1); close(done) })
}

// stop ends what the observer started, the last started first.
func (ob *observer) stop() {
	for i := len(ob.stops) - 1; i >= 0; i-- {
		ob.stops[i]()
	}
	ob.stops = nil
}
