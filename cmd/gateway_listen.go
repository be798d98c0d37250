package cmd

import (
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

// checkFree tells whether a listener could take addr now: it listens and
// closes at once. A port of 0 (or none) is any free port, and needs no
// check.
func checkFree(key, addr string) error {
	if addr == "" {
		return nil
	}
	if _, port, err := net.SplitHostPort(addr); err == nil {
		if n, err := net.LookupPort("tcp", port); err == nil && n == 0 {
			return nil
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return failuref("%s: %v (a start would fail the same way; a gateway already serving there must stop first)", key, err)
	}
	return ln.Close()
}

// checkListeners tells whether every listener the configuration names
// could listen now, for --check.
func checkListeners(s *config.Config) error {
	if err := checkFree("front.http.address", s.Address); err != nil {
		return err
	}
	if s.Approvals != nil {
		if err := checkFree("approvals.admin.address", s.AdminAddress); err != nil {
			return err
		}
	}
	return checkFree("observe.metrics_address", s.Observe.MetricsAddress)
}
