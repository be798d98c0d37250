package config

import (
	"fmt"
	"net/url"
)

// Observe is what the configuration's observe block asks for: metrics and
// traces. The zero value is neither.
type Observe struct {
	// Metrics serves Prometheus metrics at /metrics: on the approvals
	// admin listener when there is one, and on MetricsAddress when set.
	Metrics        bool
	MetricsAddress string
	// Tracing, when set, exports a span per MCP request over OTLP/HTTP.
	Tracing *Tracing
}

// Tracing configures the export of traces.
type Tracing struct {
	// Endpoint is the OTLP/HTTP receiver's URL, traces posted to its
	// /v1/traces unless the URL names a path of its own.
	Endpoint string
	// SampleRatio is the share of traces begun at the gateway that are
	// sampled; a client's sampled trace context is followed whatever it
	// is. Default 1.
	SampleRatio float64
	// ServiceName is the service.name of the spans. Default
	// "policyc-gateway".
	ServiceName string
}

type observeFile struct {
	Metrics        *bool  `json:"metrics"`
	MetricsAddress string `json:"metrics_address"`
	Tracing        *struct {
		Endpoint    string   `json:"endpoint"`
		SampleRatio *float64 `json:"sample_ratio"`
		ServiceName string   `json:"service_name"`
	} `json:"tracing"`
}

// observe reads the observe block.
func (r *reader) observe() {
	o := r.file.Observe
	if o == nil {
		return
	}
	c := r.c
	c.Observe.Metrics = o.Metrics != nil && *o.Metrics || o.MetricsAddress != ""
	if a := o.MetricsAddress; a != "" {
		switch err := checkListenAddress(a); {
		case err != nil:
			r.bad("observe.metrics_address", fmt.Sprintf("%q is not host:port (%v)", a, err), `for example "127.0.0.1:9464"`)
		case sameListener(a, c.Address):
			r.bad("observe.metrics_address", fmt.Sprintf("%q is also where front.http.address (%q) listens: metrics need an address of their own", a, c.Address),
				"give it a port of its own, on an internal address, or leave it out to serve /metrics on the approvals admin listener")
		case sameListener(a, c.AdminAddress):
			r.bad("observe.metrics_address", fmt.Sprintf("%q is also where approvals.admin.address listens, which serves /metrics already", a),
				"leave metrics_address out, or give it a port of its own")
		}
		c.Observe.MetricsAddress = a
	}
	if c.Observe.Metrics && c.AdminAddress == "" && o.MetricsAddress == "" && !r.broken("observe.metrics") {
		r.badShape("observe.metrics", "metrics are asked for, but there is no listener to serve them on: no approvals.admin.address and no observe.metrics_address",
			`add metrics_address: "127.0.0.1:9464" (an internal address), or set approvals.admin.address`)
	}
	if t := o.Tracing; t != nil {
		tr := &Tracing{Endpoint: t.Endpoint, SampleRatio: 1, ServiceName: t.ServiceName}
		if t.SampleRatio != nil {
			tr.SampleRatio = *t.SampleRatio
		}
		if tr.ServiceName == "" {
			tr.ServiceName = "policyc-gateway"
		}
		if u, err := url.Parse(t.Endpoint); err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
			r.bad("observe.tracing.endpoint", fmt.Sprintf("%q is not an http or https URL with a host", t.Endpoint),
				`give the OTLP/HTTP receiver's URL, for example "http://127.0.0.1:4318" (traces go to its /v1/traces)`)
		}
		c.Observe.Tracing = tr
	}
}
