package cmd

import "testing"

// sameListener agrees with what Go's net.Listen does on Linux: "", "::"
// and 0.0.0.0 all listen on every address of both families, so each
// clashes with any address on the same port, IPv6 ones included.
func TestSameListener(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"127.0.0.1:8080", "127.0.0.1:8080", true},
		{"127.0.0.1:8080", "127.0.0.1:8443", false},
		{"127.0.0.1:0", "127.0.0.1:0", false}, // each picks a free port
		{":8080", "127.0.0.1:8080", true},
		{"[::]:8080", "127.0.0.1:8080", true},
		{"0.0.0.0:8080", "10.1.2.3:8080", true},
		{"0.0.0.0:8080", "[::1]:8080", true},
		{"[::1]:8080", "0.0.0.0:8080", true},
		{"127.0.0.1:8080", "127.0.0.2:8080", false},
		{"[::1]:8080", "[0:0:0:0:0:0:0:1]:8080", true},
		{"127.0.0.1:8080", "[::ffff:127.0.0.1]:8080", true},
		{"127.0.0.1:http", "127.0.0.1:80", true},
		{"gateway.internal:8080", "gateway.internal:8080", true},
		{"gateway.internal:8080", "admin.internal:8080", false},
		{"127.0.0.1", "127.0.0.1:8080", false}, // not host:port
	} {
		if got := sameListener(tc.a, tc.b); got != tc.same {
			t.Errorf("sameListener(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
