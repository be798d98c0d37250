// Package urinorm holds the parts of a resource URI's normal form that
// the gateway reads a URI by (runtime/decide) and the linter predicts
// that reading with (compiler): one copy, so the two cannot drift apart.
package urinorm

import (
	"strconv"
	"strings"
)

// HostScheme reports whether a URI of scheme always has a host: a URL
// parser reads "https:host/x", "https:/host/x" and "https:///host/x" as
// "https://host/x", and the ui allowlist names ui://server/... URIs.
func HostScheme(scheme string) bool {
	switch scheme {
	case "http", "https", "ws", "wss", "ftp", "ui":
		return true
	}
	return false
}

// NumericHost reports whether a URL parser reads host as an IPv4 address:
// its last label is a number ("2130706433", "127.1", "0x7f.0.0.1").
func NumericHost(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if hex, ok := strings.CutPrefix(last, "0x"); ok {
		for i := range len(hex) {
			if c := hex[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := range len(last) {
		if c := last[i]; c < '0' || c > '9' {
			return false
		}
	}
	return last != ""
}

// CanonicalIPv4 reports whether host is a dotted quad as a URL parser
// writes one: four decimal numbers up to 255, without leading zeros.
func CanonicalIPv4(host string) bool {
	parts := strings.Split(host, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n > 255 || strconv.Itoa(n) != p {
			return false
		}
	}
	return true
}

// CleanPath removes empty, "." and ".." segments from p (".." above the
// root goes nowhere), keeping a leading slash, and a trailing one when the
// last segment of p is empty.
func CleanPath(p string) string {
	if p == "" {
		return ""
	}
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	for _, seg := range segs {
		switch seg {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, seg)
		}
	}
	r := strings.Join(out, "/")
	if p[0] == '/' {
		r = "/" + r
	}
	if segs[len(segs)-1] == "" && len(out) > 0 {
		r += "/"
	}
	return r
}

// Unescape decodes every well-formed percent-escape of s; a "%" that
// does not start one stays as it is.
func Unescape(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && IsHex(s[i+1]) && IsHex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

// IsHex reports whether c is a hexadecimal digit.
func IsHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// ASCIILower is s with A-Z in lower case, and every other byte as it is.
func ASCIILower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// SchemeEnd returns the index of the colon that ends uri's scheme, or -1
// when uri does not start with a lower-case scheme (ALPHA *(ALPHA / DIGIT
// / "+" / "-" / ".") followed by ":").
func SchemeEnd(uri string) int {
	for i := range len(uri) {
		switch c := uri[i]; {
		case 'a' <= c && c <= 'z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return i
		default:
			return -1
		}
	}
	return -1
}

// ReadPath is path p decoded, with backslashes as slashes and cleaned. A
// path after a host starts with a slash. strict refuses a control
// character and escapes left after three rounds (the path as split where
// written); a NUL is refused anyway. A decoded path that starts with "//"
// where no host was written is refused (a server that decodes first reads
// a host there): a path without a host, or of a file: URI written without
// "//" (fileNoHost).
func ReadPath(p string, afterHost, fileNoHost, strict bool) (string, bool) {
	p, ok := DecodeAll(p)
	if strings.ContainsRune(p, 0) || strict && !ok {
		return "", false
	}
	p = strings.ReplaceAll(p, `\`, "/")
	if (!afterHost || fileNoHost) && strings.HasPrefix(p, "//") {
		return "", false
	}
	if afterHost && p != "" && p[0] != '/' {
		p = "/" + p
	}
	return CleanPath(p), true
}

// DecodeAll decodes the percent-escapes of s until none is left, as a
// server may decode twice; ok is false when some are left after three
// rounds (s is then as far as it got), or the result holds a control
// character.
func DecodeAll(s string) (string, bool) {
	rounds := 0
	for d := Unescape(s); d != s; d = Unescape(s) {
		if rounds++; rounds > 3 {
			return s, false // escaped over and over: no honest URI is
		}
		s = d
	}
	return s, !HasControl(s)
}

// HasControl reports whether s holds an ASCII control character.
func HasControl(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}
