package httpheader

import (
	"net/http"
	"net/http/httptest"
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
