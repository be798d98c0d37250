package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// memHTTP serves h over in-memory connections (net.Pipe) until the test
// ends and returns a client that reaches it. Unlike a real socket, such a
// server runs inside a testing/synctest bubble, where the idle clock and
// every timer follow the bubble's fake time.
func memHTTP(t *testing.T, h http.Handler) *http.Client {
	t.Helper()
	l := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{Handler: h}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(l)
	}()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return l.dial(ctx) }}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
		<-served
	})
	return &http.Client{Transport: tr}
}

// memURL is the address a memHTTP client is given; the dialer ignores it.
// The server's end of a connection says it is on a loopback address, as
// the gateway usually listens, so that the SDK's protection of such a
// listener (it refuses a Host that is not a loopback name) applies.
const memURL = "http://127.0.0.1/"

// loopbackConn is the server's end of an in-memory connection, on a
// loopback address.
type loopbackConn struct{ net.Conn }

func (loopbackConn) LocalAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }

// pipeListener hands the server end of each dialled net.Pipe to Accept.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- loopbackConn{server}:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// memFront serves tg's HTTP front with opts, its tokens set to alice's,
// over memHTTP, and returns a rawHTTP-style sender for it.
func memFront(t *testing.T, tg *testGateway, opts HTTPOptions) (*http.Client, func(method, token, session, version, body string) (*http.Response, string)) {
	t.Helper()
	opts.Tokens = map[string]string{tokenHash("alice-token"): "alice"}
	h, err := tg.HTTPHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	// After the server stops: a session no test closed would outlive the
	// bubble.
	t.Cleanup(func() {
		if s := tg.serverOf("alice"); s != nil {
			for ss := range s.Sessions() {
				ss.Close()
			}
		}
	})
	client := memHTTP(t, h)
	return client, rawHTTPWith(t, client, memURL)
}

// rawHTTPWith is rawHTTP through client.
func rawHTTPWith(t *testing.T, client *http.Client, url string) func(method, token, session, version, body string) (*http.Response, string) {
	return func(method, token, session, version, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set(sessionIDHeader, session)
		}
		if version != "" {
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		resp, err := client.Do(req)
		if err != nil {
			// Not Fatal: a call may be made from a goroutine of its own.
			t.Error(err)
			return &http.Response{Header: http.Header{}}, ""
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, strings.TrimSpace(string(b))
	}
}
