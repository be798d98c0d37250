// Package httpheader adds fixed headers, such as an upstream's bearer token,
// to every request an HTTP client sends. The gateway and catalog pull both
// reach streamable HTTP upstreams through it.
package httpheader

import "net/http"

// Client returns an HTTP client that sends header with every request,
// through base (http.DefaultTransport when nil).
func Client(header http.Header, base http.RoundTripper) *http.Client {
	if base == nil {
		base = http.DefaultTransport
	}
	return &http.Client{Transport: transport{header: header, base: base}}
}

type transport struct {
	header http.Header
	base   http.RoundTripper
}

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.header) > 0 {
		r = r.Clone(r.Context())
		for k, vs := range t.header {
			r.Header[k] = vs
		}
	}
	return t.base.RoundTrip(r)
}
