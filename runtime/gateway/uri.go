package gateway

import (
	"strings"
	"time"

	"github.com/policyc/policyc/runtime"
)

// A resource URI is decided as written, but an upstream may read it
// otherwise: a file server decodes percent-escapes, reads a backslash as a
// separator, cleans "." and ".." segments and repeated slashes, ignores the
// case of the scheme and host. So that a URI cannot reach, under another
// spelling, what the table denies, the gateway also decides the URI in
// that reading (normalURI) and allows it only when both are allowed.

// uriDecide is the decision on reading (or listing, or linking to) the
// resource uri: the table's decision on uri as written, turned into a deny
// with the reason URINotNormal when its normal form is denied. When the
// normal form ends in a slash that uri's path spelt as a slash, the form
// without it is decided too, and a deny rule matching it denies uri: a
// server may read "/a/.env/" as "/a/.env". (Only a rule counts there, not
// a default: "file:///srv/" names the directory a rule for "file:///srv/*"
// means.)
func uriDecide(t *runtime.Table, now time.Time, principal, server, uri string) runtime.Decision {
	d := tableDecideExact(t, now, principal, server, runtime.Resource, uri)
	if d.Effect != runtime.Allow {
		return d
	}
	n, ok := normalURI(uri)
	if !ok {
		return runtime.Decision{Effect: runtime.Deny, Reason: runtime.URINotNormal}
	}
	if n != uri {
		dn := tableDecideExact(t, now, principal, server, runtime.Resource, n)
		if dn.Effect != runtime.Allow {
			dn.Effect, dn.Reason = runtime.Deny, runtime.URINotNormal
			return dn
		}
		// A spelling of a ui:// resource needs what the ui:// resource
		// needs.
		if dn.Consent && !d.Consent {
			d.Consent, d.ConsentChannel = true, dn.ConsentChannel
		}
	}
	if trimmed, ok := strings.CutSuffix(n, "/"); ok && !strings.HasSuffix(trimmed, "/") {
		if dt := tableDecideExact(t, now, principal, server, runtime.Resource, trimmed); dt.Effect == runtime.Deny && dt.Reason == runtime.ByRule {
			dt.Reason = runtime.URINotNormal
			return dt
		}
	}
	return d
}

// normalURI is uri as a lenient upstream might read it: percent-escapes
// decoded (again, while any are left, as a server may decode twice),
// backslashes read as slashes, the scheme and the authority in lower case,
// and the path without empty, "." and ".." segments. It keeps a trailing
// slash that the path spelt as one; reading it again gives it back. ok is
// false when uri, or that reading of it, holds a control character (a NUL
// may end a name early), and when it is still escaped after three rounds
// of decoding or still changes after three readings.
func normalURI(uri string) (n string, ok bool) {
	// Cleaning can make a new form: "./A:" has no scheme, its cleaned
	// "A:" has one. Read again until the reading stays.
	n, ok = normalOnce(uri)
	for range 3 {
		if !ok {
			return "", false
		}
		again, ok2 := normalOnce(n)
		if ok2 && again == n {
			return n, true
		}
		n, ok = again, ok2
	}
	return "", false
}

func normalOnce(uri string) (n string, ok bool) {
	s, rounds := uri, 0
	for d := unescapeAll(s); d != s; d = unescapeAll(s) {
		if rounds++; rounds > 3 {
			return "", false // escaped over and over: no honest URI is
		}
		s = d
	}
	if hasControl(uri) || hasControl(s) {
		return "", false
	}
	s = strings.ReplaceAll(s, `\`, "/")
	var b strings.Builder
	rest := s
	if i := strings.IndexByte(s, ':'); i > 0 && !strings.ContainsAny(s[:i], "/?#") {
		b.WriteString(strings.ToLower(s[:i+1]))
		rest = s[i+1:]
	}
	if after, ok := strings.CutPrefix(rest, "//"); ok {
		j := strings.IndexAny(after, "/?#")
		if j < 0 {
			j = len(after)
		}
		b.WriteString("//")
		b.WriteString(strings.ToLower(after[:j]))
		rest = after[j:]
	}
	k := strings.IndexAny(rest, "?#")
	if k < 0 {
		k = len(rest)
	}
	b.WriteString(cleanPath(rest[:k]))
	b.WriteString(rest[k:])
	return b.String(), true
}

// cleanPath removes empty, "." and ".." segments from p (".." above the
// root goes nowhere), keeping a leading slash, and a trailing one when the
// last segment of p is empty.
func cleanPath(p string) string {
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

// unescapeAll decodes every well-formed percent-escape of s; a "%" that
// does not start one stays as it is.
func unescapeAll(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

func isHex(c byte) bool {
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

func hasControl(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}
