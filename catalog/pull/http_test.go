package pull

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/catalog/pull/internal/fixture"
)

// A streamable HTTP upstream behind a bearer token gives the same snapshot
// as the in-process server; without the token the pull fails and says so.
func TestPullHTTP(t *testing.T) {
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		return fixture.Server(fixture.Options{PageSize: 2})
	}, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	defer srv.Close()

	r := pullOne(t, HTTP("github", srv.URL, http.Header{"Authorization": {"Bearer s3cret"}}), 10*time.Second)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	mem := pullOne(t, inMemory("github", fixture.Options{}), 10*time.Second)
	if !bytes.Equal(encode(t, r.Snapshot), encode(t, mem.Snapshot)) {
		t.Errorf("the HTTP pull differs from the in-process one")
	}

	r = pullOne(t, HTTP("github", srv.URL, nil), 10*time.Second)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "initializing") {
		t.Fatalf("without a token: %v", r.Err)
	}
}

// An HTTP upstream that never answers times out within the timeout.
func TestPullHTTPTimeout(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	r := pullOne(t, HTTP("slow", srv.URL, nil), 500*time.Millisecond)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "timed out after 500ms while initializing") {
		t.Fatalf("error: %v", r.Err)
	}
	if r.Duration > 5*time.Second {
		t.Errorf("took %s", r.Duration)
	}
}
