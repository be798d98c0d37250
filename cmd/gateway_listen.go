package cmd

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/policyc/policyc/runtime/gateway/config"
)

// keepAliveIdle is how long an HTTP listener keeps a connection open
// between requests. A stream the SDK holds open (an event stream) is a
// request in progress, not an idle connection.
var keepAliveIdle = 2 * time.Minute

// newHTTPServer serves h with bounds on connections that send nothing: a
// request's headers must arrive within 10 s, and a connection idle
// between requests is closed after keepAliveIdle, so connections left
// open (by a client that was answered 401, say) do not pile up.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: keepAliveIdle}
}

// busyAddress says why a listener could not take addr now, or "": it
// listens and closes at once. A port of 0 (or none) is any free port, and
// needs no check.
func busyAddress(key, addr string) string {
	if addr == "" {
		return ""
	}
	if _, port, err := net.SplitHostPort(addr); err == nil {
		if n, err := net.LookupPort("tcp", port); err == nil && n == 0 {
			return ""
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Sprintf("%s: %v: a start here fails until the address is free (a gateway serving there, the one this check may be for, must stop first)", key, err)
	}
	ln.Close()
	return ""
}

// busyListeners are --check's warnings about the listeners the
// configuration names that could not listen now. They are warnings, not
// refusals: a check run beside the gateway it is for, before a reload,
// finds that gateway's own addresses taken.
func busyListeners(s *config.Config) []string {
	var warns []string
	add := func(key, addr string) {
		if w := busyAddress(key, addr); w != "" {
			warns = append(warns, w)
		}
	}
	add("front.http.address", s.Address)
	if s.Approvals != nil {
		add("approvals.admin.address", s.AdminAddress)
	}
	add("observe.metrics_address", s.Observe.MetricsAddress)
	return warns
}
