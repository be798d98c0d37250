// Package httpheader is the HTTP client of streamable HTTP upstreams, for
// the gateway and catalog pull: it adds fixed headers, such as an
// upstream's bearer token, to every request, and bounds what one response
// may make the SDK hold.
package httpheader

import (
	"fmt"
	"io"
	"net/http"
	"strings"
)

// MaxBody is the most bytes of a response body that is not an event
// stream. The SDK reads such a body (one JSON-RPC message) whole, with no
// bound of its own; its event streams are bounded per event, at 16 MiB
// (mcp.DefaultMaxEventSize), and a stdio upstream per line at the same.
const MaxBody = 16 << 20

// Client returns an HTTP client that sends header with every request,
// through base (http.DefaultTransport when nil). Reading more than
// MaxBody bytes of a response body that is not an event stream fails,
// as the SDK fails a stdio message over its line limit.
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
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	// The media type without its parameters, compared without allocating:
	// this runs on every response.
	if mt, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";"); !strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: MaxBody}
	}
	return resp, nil
}

// limitedBody fails a read past its limit, rather than end the body early:
// a message cut short must not pass for a whole one.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// At the limit: the body must end here.
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			err = fmt.Errorf("the upstream's response is over %d MiB, the most one message may be", MaxBody>>20)
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
