package runtime

import "strings"

// A resource URI is decided as written, but an upstream may read it
// otherwise: a file server decodes percent-escapes, reads a backslash as a
// separator, cleans "." and ".." segments and repeated slashes, ignores the
// case of the scheme and host. So that a URI cannot reach, under another
// spelling, what the table denies, Decide also decides a resource URI in
// that reading (normalURI) and allows it only when both are allowed.

// decideURI is the decision on the resource uri: the decision on uri as
// written, turned into a deny with the reason URINotNormal when its normal
// form is denied. The normal form without its query and fragment, and
// without a trailing slash, is decided too, and a deny rule matching it
// denies uri: a server may ignore "?x" and read "/a/.env/" as "/a/.env".
// (Only a rule counts there, not a default: "file:///srv/" names the
// directory a rule for "file:///srv/*" means.)
func (t *Table) decideURI(principal, server, uri string) Decision {
	d := t.decide(principal, server, Resource, uri)
	if d.Effect != Allow || !mayNotBeNormal(uri) {
		return d
	}
	n, ok := normalURI(uri)
	if !ok {
		return Decision{Effect: Deny, Reason: URINotNormal}
	}
	if n != uri {
		dn := t.decide(principal, server, Resource, n)
		if dn.Effect != Allow {
			dn.Effect, dn.Reason = Deny, URINotNormal
			return dn
		}
		// A spelling of a ui:// resource needs what the ui:// resource
		// needs.
		if dn.Consent && !d.Consent {
			d.Consent, d.ConsentChannel = true, dn.ConsentChannel
		}
	}
	// A server may ignore a query or fragment, and read "/a/.env/" as
	// "/a/.env": a deny rule for the normal form without them denies too.
	base := n
	if k := strings.IndexAny(n, "?#"); k >= 0 {
		base = n[:k]
		if dt := t.decide(principal, server, Resource, base); dt.Effect == Deny && dt.Reason == ByRule {
			dt.Reason = URINotNormal
			return dt
		}
	}
	if trimmed, ok := strings.CutSuffix(base, "/"); ok && !strings.HasSuffix(trimmed, "/") {
		if dt := t.decide(principal, server, Resource, trimmed); dt.Effect == Deny && dt.Reason == ByRule {
			dt.Reason = URINotNormal
			return dt
		}
	}
	return d
}

// mayNotBeNormal reports, without allocating, whether uri could differ
// from its normal form (it reads uri as normalOnce does) or ends in a
// slash. It is false for the usual URI: scheme and host in lower case, no
// escapes, backslashes or control characters, and a path without empty,
// "." or ".." segments.
func mayNotBeNormal(uri string) bool {
	if strings.HasSuffix(uri, "/") || strings.HasPrefix(uri, "file:") && !strings.HasPrefix(uri, "file:///") {
		return true
	}
	for i := range len(uri) {
		// A query or fragment: the URI without it is decided too.
		if c := uri[i]; c == '%' || c == '\\' || c == '?' || c == '#' || c < 0x20 || c == 0x7f {
			return true
		}
	}
	rest := 0 // where what follows the scheme starts
	if i := strings.IndexByte(uri, ':'); i > 0 && !strings.ContainsAny(uri[:i], "/?#") {
		rest = i + 1
	}
	path := rest // where the path starts: the scheme and authority end
	if strings.HasPrefix(uri[rest:], "//") {
		path = len(uri)
		if j := strings.IndexAny(uri[rest+2:], "/?#"); j >= 0 {
			path = rest + 2 + j
		}
	}
	for i := range path {
		if c := uri[i]; 'A' <= c && c <= 'Z' || c == '@' {
			return true // upper case, or userinfo
		}
	}
	end := len(uri)
	if k := strings.IndexAny(uri[path:], "?#"); k >= 0 {
		end = path + k
	}
	return !pathIsClean(uri[path:end])
}

// pathIsClean reports, without allocating, whether cleanPath(p) is p: no
// "." or ".." segment, and no empty one but for a leading or trailing
// slash.
func pathIsClean(p string) bool {
	start := 0
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		seg := p[start:i]
		if seg == "." || seg == ".." || seg == "" && start != 0 && i != len(p) {
			return false
		}
		start = i + 1
	}
	return true
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
	if hasControl(uri) {
		return "", false
	}
	// The parts are found in uri as written, then decoded: an escaped "?"
	// or "#" is not a delimiter here, and a server that decodes first
	// would read one as such, so a decoded one is refused.
	var b strings.Builder
	rest, scheme := uri, ""
	if i := strings.IndexByte(uri, ':'); i > 0 && !strings.ContainsAny(uri[:i], "/?#") {
		scheme = asciiLower(uri[:i])
		b.WriteString(scheme)
		b.WriteByte(':')
		rest = uri[i+1:]
	}
	body, tail := rest, ""
	if k := strings.IndexAny(rest, "?#"); k >= 0 {
		body, tail = rest[:k], rest[k:]
	}
	after, hasAuthority := strings.CutPrefix(body, "//")
	if hasAuthority || scheme == "file" {
		// file:/x, file:///x and file://localhost/x name one file.
		auth := ""
		if hasAuthority {
			j := strings.IndexByte(after, '/')
			if j < 0 {
				j = len(after)
			}
			auth, body = after[:j], after[j:]
			if auth, ok = decodeAll(auth); !ok || strings.ContainsAny(auth, "/?#\\") {
				return "", false
			}
			if k := strings.LastIndexByte(auth, '@'); k >= 0 {
				auth = auth[k+1:] // userinfo names no other resource
			}
			auth = asciiLower(auth)
		}
		if scheme == "file" {
			if k := strings.LastIndexByte(auth, ':'); k >= 0 && !strings.Contains(auth[k:], "]") {
				auth = auth[:k] // a file has no port
			}
			if auth == "localhost" {
				auth = ""
			}
		}
		b.WriteString("//")
		b.WriteString(auth)
	}
	path, ok := decodeAll(body)
	if !ok || strings.ContainsAny(path, "?#") {
		return "", false
	}
	path = strings.ReplaceAll(path, `\`, "/")
	if (hasAuthority || scheme == "file") && path != "" && path[0] != '/' {
		path = "/" + path
	}
	b.WriteString(cleanPath(path))
	b.WriteString(tail)
	return b.String(), true
}

// decodeAll decodes the percent-escapes of s until none is left, as a
// server may decode twice; ok is false when some are left after three
// rounds, or the result holds a control character.
func decodeAll(s string) (string, bool) {
	rounds := 0
	for d := unescapeAll(s); d != s; d = unescapeAll(s) {
		if rounds++; rounds > 3 {
			return "", false // escaped over and over: no honest URI is
		}
		s = d
	}
	return s, !hasControl(s)
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

// asciiLower is s with A-Z in lower case, and every other byte as it is.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func hasControl(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}
