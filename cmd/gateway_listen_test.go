package cmd

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// A listener closes a connection left idle after a request, rather than
// keep it for ever: one answered 401 and kept open, say.
func TestHTTPServerClosesIdleConnections(t *testing.T) {
	defer func(d time.Duration) { keepAliveIdle = d }(keepAliveIdle)
	keepAliveIdle = 100 * time.Millisecond
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Close {
		t.Fatalf("answered %s (close %v), want 401 on a connection kept alive", resp.Status, resp.Close)
	}
	// The bound is generous: the server closes the connection at 100 ms.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("reading the idle connection: %v, want EOF (closed by the server)", err)
	}
}
