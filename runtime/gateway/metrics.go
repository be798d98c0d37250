package gateway

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// Metrics are the gateway's Prometheus metrics, served by Handler. Their
// labels are bounded: a configured upstream's name (noServer for a name
// that routes to none), a kind, an op, a decision or a fixed word; never
// a tool, prompt or resource name and never a principal. One Metrics
// serves one gateway (Config.Metrics).
type Metrics struct {
	reg *prometheus.Registry
	// pending counts the approval requests pending, read at each scrape;
	// nil reports none.
	pending func() int

	decisions   *prometheus.CounterVec
	calls       *prometheus.CounterVec
	callSeconds *prometheus.HistogramVec
	restarts    *prometheus.CounterVec
	approval    *prometheus.HistogramVec
	decidedIn   *prometheus.HistogramVec
	held        prometheus.Gauge
	reloads     *prometheus.CounterVec
	refusals    *prometheus.CounterVec
	logErrors   prometheus.Counter
	logOK       atomic.Bool
	reopens     *prometheus.CounterVec

	mu sync.Mutex
	g  *Gateway
	// byServer holds the counters a decision about a configured upstream
	// (or noServer) adds to, resolved once so that a decision costs one
	// atomic add and no label lookup.
	byServer map[string]*serverCounters
	// tableSince is when the serving table began to serve (Unix ns).
	tableSince atomic.Int64
}

// MetricsOptions configure NewMetrics.
type MetricsOptions struct {
	// Pending, when set, counts the approval requests pending now; it is
	// called at each scrape.
	Pending func() int
}

// noServer is the server label of a decision about a name that routes to
// no configured upstream.
const noServer = "(none)"

// serverCounters are one server's decision counters by kind, op and
// decision, and its tools/call counters.
type serverCounters struct {
	decisions [table.NumKinds][len(opNames)][3]prometheus.Counter
	callOK    prometheus.Counter
	callError prometheus.Counter
	callFail  prometheus.Counter
	seconds   prometheus.Observer
	restarts  prometheus.Counter
}

// Buckets of call and approval latencies, in seconds.
var (
	callBuckets     = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	approvalBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 14400, 86400}
)

// NewMetrics returns the gateway's metrics, in a registry of their own
// with the Go runtime's and the process's.
func NewMetrics(o MetricsOptions) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), pending: o.Pending, byServer: map[string]*serverCounters{}}
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "policyc_gateway_decisions_total",
		Help: "Decisions made, by server, kind, op (list, call, get, read, link, approval) and decision (allow, approve, deny)."},
		[]string{"server", "kind", "op", "decision"})
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "policyc_gateway_tool_calls_total",
		Help: "tools/call forwarded to an upstream, by upstream and result: ok, error (the tool's execution error or the upstream's JSON-RPC error), failed (no answer: the connection failed or the call timed out)."},
		[]string{"upstream", "result"})
	m.callSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "policyc_gateway_tool_call_duration_seconds",
		Help: "Time an upstream took to answer a forwarded tools/call, by upstream.", Buckets: callBuckets},
		[]string{"upstream"})
	m.restarts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "policyc_gateway_upstream_restarts_total",
		Help: "Times an upstream's connection ended, or an attempt to connect failed, and the gateway reconnects it with backoff."},
		[]string{"upstream"})
	m.approval = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "policyc_gateway_approval_wait_seconds",
		Help: "Time a call held for approval waited for the gate's answer, by verdict (approved, denied, timeout, pending, cancelled, ended, refused, duplicate, not_run, error).", Buckets: approvalBuckets},
		[]string{"verdict"})
	m.decidedIn = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "policyc_gateway_approval_decision_seconds",
		Help: "Time from an approval request's creation to an approver's decision on this gateway's admin listener, by verdict (approve, deny).", Buckets: approvalBuckets},
		[]string{"verdict"})
	m.held = prometheus.NewGauge(prometheus.GaugeOpts{Name: "policyc_gateway_held_calls",
		Help: "Tool calls held for approval now."})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "policyc_gateway_reloads_total",
		Help: "Table reloads (SIGHUP), by result: loaded, unchanged, refused."},
		[]string{"result"})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "policyc_gateway_token_refusals_total",
		Help: "Requests to the HTTP front refused for their bearer token, by reason."},
		[]string{"reason"})
	m.logErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "policyc_gateway_decision_log_errors_total",
		Help: "Decision log writes that failed; each refused the request it recorded."})
	m.reopens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "policyc_gateway_decision_log_reopens_total",
		Help: "Times the decision log file was reopened (SIGUSR1, for rotation), by result: ok, failed (the lines go on to the file open before)."},
		[]string{"result"})
	m.logOK.Store(true)
	m.reg.MustRegister(m.decisions, m.calls, m.callSeconds, m.restarts, m.approval, m.decidedIn, m.held, m.reloads, m.refusals, m.logErrors, m.reopens,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), (*gatewayCollector)(m))
	for _, r := range []string{"loaded", "unchanged", "refused"} {
		m.reloads.WithLabelValues(r)
	}
	m.reopens.WithLabelValues("ok")
	m.reopens.WithLabelValues("failed")
	return m
}

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: nil})
}

// Registry is the registry the metrics are in, for a caller that adds its own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// attach makes m the metrics of g, with the counters of g's upstreams.
func (m *Metrics) attach(g *Gateway) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.g != nil {
		return errors.New("the metrics already serve another gateway: give each gateway its own Metrics")
	}
	m.g = g
	for _, u := range g.cfg.Upstreams {
		m.byServer[u.Name] = m.newServerCounters(u.Name, true)
	}
	m.byServer[noServer] = m.newServerCounters(noServer, false)
	return nil
}

func (m *Metrics) newServerCounters(server string, upstream bool) *serverCounters {
	sc := &serverCounters{}
	for k := range table.NumKinds {
		for op := range opNames {
			for e := table.Deny; e <= table.Allow; e++ {
				sc.decisions[k][op][e] = m.decisions.WithLabelValues(server, k.String(), opNames[op], e.String())
			}
		}
	}
	if upstream {
		sc.callOK = m.calls.WithLabelValues(server, "ok")
		sc.callError = m.calls.WithLabelValues(server, "error")
		sc.callFail = m.calls.WithLabelValues(server, "failed")
		sc.seconds = m.callSeconds.WithLabelValues(server)
		sc.restarts = m.restarts.WithLabelValues(server)
	}
	return sc
}

// server returns the counters of server, noServer's for a server that is
// not configured. The map is written only by attach, before any decision.
func (m *Metrics) server(server string) *serverCounters {
	if sc := m.byServer[server]; sc != nil {
		return sc
	}
	return m.byServer[noServer]
}

// decided counts n decisions d of op.
func (m *Metrics) decided(server string, kind table.Kind, op Op, e table.Effect, n int) {
	if m == nil || n == 0 || kind >= table.NumKinds || int(op) >= len(opNames) || e > table.Allow {
		return
	}
	m.server(server).decisions[kind][op][e].Add(float64(n))
}

// called counts a forwarded tools/call and its latency.
func (m *Metrics) called(server string, took time.Duration, result string) {
	if m == nil {
		return
	}
	sc := m.server(server)
	if sc.seconds == nil {
		return
	}
	sc.seconds.Observe(took.Seconds())
	switch result {
	case "ok":
		sc.callOK.Inc()
	case "error":
		sc.callError.Inc()
	default:
		sc.callFail.Inc()
	}
}

// restarted counts a reconnection of server.
func (m *Metrics) restarted(server string) {
	if m == nil {
		return
	}
	if sc := m.server(server); sc.restarts != nil {
		sc.restarts.Inc()
	}
}

// holding counts a call held for approval until the returned func is
// called with its verdict.
func (m *Metrics) holding() func(verdict string) {
	if m == nil {
		return func(string) {}
	}
	m.held.Inc()
	start := time.Now()
	return func(verdict string) {
		m.held.Dec()
		m.approval.WithLabelValues(verdict).Observe(time.Since(start).Seconds())
	}
}

// reloaded counts a reload by its result.
func (m *Metrics) reloaded(result string) {
	if m != nil {
		m.reloads.WithLabelValues(result).Inc()
	}
}

// tokenRefused counts a refused bearer token.
func (m *Metrics) tokenRefused(reason string) {
	if m != nil {
		m.refusals.WithLabelValues(reason).Inc()
	}
}

// logWritten records whether a decision log write succeeded.
func (m *Metrics) logWritten(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.logErrors.Inc()
		m.logOK.Store(false)
		return
	}
	if !m.logOK.Load() {
		m.logOK.Store(true)
	}
}

// ApprovalDecided records an approver's decision (verdict "approve" or
// "deny") took after the request was made. It does nothing on nil
// Metrics.
func (m *Metrics) ApprovalDecided(verdict string, took time.Duration) {
	if m != nil && (verdict == "approve" || verdict == "deny") {
		m.decidedIn.WithLabelValues(verdict).Observe(took.Seconds())
	}
}

// LogReopened counts a reopening of the decision log file, failed when
// err is set. It does nothing on nil Metrics.
func (m *Metrics) LogReopened(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.reopens.WithLabelValues("failed").Inc()
		return
	}
	m.reopens.WithLabelValues("ok").Inc()
}

// serving records that t began to serve at now.
func (m *Metrics) serving(now time.Time) {
	if m != nil {
		m.tableSince.Store(now.UnixNano())
	}
}

// gatewayCollector reports, at each scrape, what the gateway's state says
// now: the table, the upstreams, the sessions, the pending requests, the
// decision log.
type gatewayCollector Metrics

var (
	descTableSerial  = prometheus.NewDesc("policyc_gateway_table_serial", "Serial of the serving table.", []string{"table_digest"}, nil)
	descTableLoaded  = prometheus.NewDesc("policyc_gateway_table_loaded_timestamp_seconds", "When the serving table began to serve (Unix time).", nil, nil)
	descTableCommit  = prometheus.NewDesc("policyc_gateway_table_commit_timestamp_seconds", "Commit time of the serving table's policy (Unix time), when the table names one.", nil, nil)
	descTableAge     = prometheus.NewDesc("policyc_gateway_table_age_seconds", "Seconds since the serving table's policy was committed (since it began to serve, when the table names no commit time).", nil, nil)
	descTableExpires = prometheus.NewDesc("policyc_gateway_table_expiry_timestamp_seconds", "When the serving table expires (Unix time), when it does.", nil, nil)
	descUpstreamUp   = prometheus.NewDesc("policyc_gateway_upstream_up", "1 while the upstream is connected, else 0.", []string{"upstream"}, nil)
	descSessions     = prometheus.NewDesc("policyc_gateway_sessions_open", "Client sessions open.", nil, nil)
	descPending      = prometheus.NewDesc("policyc_gateway_approval_requests_pending", "Approval requests pending.", nil, nil)
	descLogUp        = prometheus.NewDesc("policyc_gateway_decision_log_up", "1 while the last decision log write succeeded, else 0 (every request is then refused).", nil, nil)
)

func (c *gatewayCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTableSerial, descTableLoaded, descTableCommit, descTableAge, descTableExpires, descUpstreamUp, descSessions, descPending, descLogUp} {
		ch <- d
	}
}

func (c *gatewayCollector) Collect(ch chan<- prometheus.Metric) {
	m := (*Metrics)(c)
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	up := 0.0
	if m.logOK.Load() {
		up = 1
	}
	gauge(descLogUp, up)
	if m.pending != nil {
		gauge(descPending, float64(m.pending()))
	}
	m.mu.Lock()
	g := m.g
	m.mu.Unlock()
	if g == nil {
		return
	}
	if t := g.table.Load(); t != nil {
		collectTable(gauge, t, time.Unix(0, m.tableSince.Load()), g.now())
	}
	for _, u := range g.ups {
		v := 0.0
		if st := u.snapshot(); st != nil && st.session != nil {
			v = 1
		}
		gauge(descUpstreamUp, v, u.name)
	}
	gauge(descSessions, float64(g.openSessions()))
}

func collectTable(gauge func(*prometheus.Desc, float64, ...string), t *decide.Table, since, now time.Time) {
	gauge(descTableSerial, float64(t.Serial()), t.Digest())
	gauge(descTableLoaded, float64(since.UnixNano())/1e9)
	age := now.Sub(since)
	if ct, err := time.Parse(time.RFC3339, t.Source().Source.CommitTime); err == nil {
		gauge(descTableCommit, float64(ct.Unix()))
		age = now.Sub(ct)
	}
	gauge(descTableAge, age.Seconds())
	if at, ok := t.Expires(); ok {
		gauge(descTableExpires, float64(at.UnixNano())/1e9)
	}
}

// openSessions counts the client sessions open, over every principal.
func (g *Gateway) openSessions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, ps := range g.servers {
		for range ps.s.Sessions() {
			n++
		}
	}
	return n
}
