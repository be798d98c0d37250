package authlimit

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// Behind believes X-Forwarded-For only from a trusted proxy, and of it
// only the rightmost entry that is not a trusted proxy's: what is to its
// left the client wrote.
func TestBehind(t *testing.T) {
	var trusted []netip.Prefix
	for _, s := range []string{"10.0.0.0/8", "fd00::7", "192.0.2.1"} {
		p, err := ParseProxy(s)
		if err != nil {
			t.Fatal(err)
		}
		trusted = append(trusted, p)
	}
	var got string
	h := Behind(trusted, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.RemoteAddr }))
	for _, tc := range []struct {
		peer string
		xff  []string
		want string
	}{
		{"10.1.2.3:4000", nil, "10.1.2.3:4000"},                                               // no header: the proxy itself
		{"10.1.2.3:4000", []string{"203.0.113.9"}, "203.0.113.9:0"},                           // the client, as the proxy says
		{"10.1.2.3:4000", []string{"198.51.100.1, 203.0.113.9"}, "203.0.113.9:0"},             // the left entry is the client's own claim
		{"10.1.2.3:4000", []string{"198.51.100.1", "203.0.113.9, 10.9.9.9"}, "203.0.113.9:0"}, // two headers, a second proxy
		{"[fd00::7]:443", []string{"2001:db8::1"}, "[2001:db8::1]:0"},
		{"[::ffff:192.0.2.1]:443", []string{"203.0.113.9"}, "203.0.113.9:0"}, // IPv4-mapped peer
		{"10.1.2.3:4000", []string{"10.4.4.4"}, "10.1.2.3:4000"},             // every entry a proxy's
		{"10.1.2.3:4000", []string{"not an address"}, "10.1.2.3:4000"},
		{"203.0.113.50:5000", []string{"198.51.100.1"}, "203.0.113.50:5000"}, // not a trusted proxy: believed not
		{"[2001:db8::9]:5000", []string{"198.51.100.1"}, "[2001:db8::9]:5000"},
		{"10.1.2.3:4000", []string{"203.0.113.9%a"}, "10.1.2.3:4000"}, // not an address: the proxy's
		{"10.1.2.3:4000", []string{"::ffff:203.0.113.9"}, "203.0.113.9:0"},
		{"10.1.2.3:4000", []string{"[2001:db8::1]:8080"}, "[2001:db8::1]:0"},
		{"10.1.2.3:4000", []string{"203.0.113.9:8080"}, "203.0.113.9:0"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		if got != tc.want {
			t.Errorf("from %s, X-Forwarded-For %q: RemoteAddr %s, want %s", tc.peer, tc.xff, got, tc.want)
		}
		if r.RemoteAddr != tc.peer {
			t.Errorf("the caller's request was changed: %s", r.RemoteAddr)
		}
	}
	// Source then names the client: each has its own bucket.
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1.2.3:4000"
	r.Header.Set("X-Forwarded-For", "2001:db8:1:2:3:4:5:6")
	h = Behind(trusted, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = Source(r) }))
	h.ServeHTTP(httptest.NewRecorder(), r)
	if got != "2001:db8:1:2::/64" {
		t.Errorf("source %s", got)
	}
	// No proxy trusted: X-Forwarded-For is believed from no one.
	h = Behind(nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.RemoteAddr }))
	h.ServeHTTP(httptest.NewRecorder(), r)
	if got != "10.1.2.3:4000" {
		t.Errorf("with no proxy trusted, RemoteAddr %s", got)
	}
}

func TestParseProxy(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.7": "10.0.0.7/32", "10.1.2.3/8": "10.0.0.0/8", "fd00::7": "fd00::7/128",
		"2001:db8::/32": "2001:db8::/32", "::ffff:10.0.0.7": "10.0.0.7/32",
		"::ffff:10.0.0.0/104": "10.0.0.0/8", "::ffff:0.0.0.0/96": "0.0.0.0/0",
	} {
		p, err := ParseProxy(in)
		if err != nil || p.String() != want {
			t.Errorf("ParseProxy(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, in := range []string{"", "10.0.0.0/33", "proxy.internal", "10.0.0", "fe80::1%eth0", "10.0.0.7:80", "::ffff:0.0.0.0/95"} {
		if _, err := ParseProxy(in); err == nil {
			t.Errorf("ParseProxy(%q) accepted", in)
		}
	}
}
