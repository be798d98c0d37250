package cmd

import (
	"net/http"
	"time"
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
