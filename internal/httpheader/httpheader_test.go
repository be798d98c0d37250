package httpheader

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestClientSendsHeader(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
	}))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := Client(http.Header{"Authorization": {"Bearer t0ken"}}, nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := <-got; h != "Bearer t0ken" {
		t.Fatalf("Authorization = %q", h)
	}
	if req.Header.Get("Authorization") != "" {
		t.Fatal("the caller's request was modified")
	}
}

// A response body that is not an event stream may be MaxBody bytes, and
// reading a byte more fails; an event stream is not bounded here (the SDK
// bounds each event).
func TestClientBoundsBodies(t *testing.T) {
	for _, tc := range []struct {
		contentType string
		size        int
		fails       bool
	}{
		{"application/json", MaxBody, false},
		{"application/json", MaxBody + 1, true},
		{"", MaxBody + 1, true},
		{"text/plain; charset=utf-8", MaxBody + 1, true},
		{"text/event-stream", MaxBody + 1, false},
		{"text/event-stream; charset=utf-8", 2 * MaxBody, false},
		{"Text/Event-Stream", MaxBody + 1, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tc.contentType != "" {
				w.Header().Set("Content-Type", tc.contentType)
			} else {
				w.Header()["Content-Type"] = nil
			}
			w.Write(bytes.Repeat([]byte("x"), tc.size))
		}))
		resp, err := Client(nil, nil).Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		srv.Close()
		if tc.fails != (err != nil) || !tc.fails && n != int64(tc.size) {
			t.Errorf("%q, %d bytes: read %d, error %v; want failure %v", tc.contentType, tc.size, n, err, tc.fails)
		}
		if tc.fails && (n != MaxBody || !strings.Contains(err.Error(), "the upstream's response is over 16 MiB")) {
			t.Errorf("%q, %d bytes: read %d before %v; want %d and the limit named", tc.contentType, tc.size, n, err, MaxBody)
		}
	}
}
