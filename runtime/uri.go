package runtime

import "strings"

// A resource URI is decided as written, but an upstream may read it
// otherwise: a file server decodes percent-escapes (before or after it
// splits the URI into its parts), reads a backslash as a separator, cleans
// "." and ".." segments and repeated slashes, ignores a query, a port, the
// host of a file: URI, the case of the scheme and host, spaces around the
// URI. So that a URI cannot reach, under another spelling, what the table
// denies, Decide also decides the URI in those readings (readURI), and a
// URI with no sound reading is denied.

// uriReadings are the readings of a resource URI that Decide decides
// besides the URI as written.
type uriReadings struct {
	// normal is the normal form: split into its parts as written, host and
	// path decoded, the path cleaned, scheme and host in lower case,
	// userinfo, an empty or default port dropped (for file:, any port and
	// the host localhost). It must be allowed.
	normal string
	// base is normal without its query and fragment, and flat is the URI
	// read with "?" and "#" as path characters, decoded and cleaned: a
	// server may ignore a query, or not split there. Both must be allowed.
	base, flat string
	// hostless is, for a file: URI with a host, the URI without it, and
	// trimmed is base without a trailing slash: a deny rule matching
	// either denies (a default does not: "file:///srv/" names the
	// directory a rule for "file:///srv/*" means).
	hostless, trimmed string
}

// decideURI is the decision on the resource uri: the decision on uri as
// written, turned into a deny with the reason URINotNormal when one of its
// readings (uriReadings) is denied, or when it has none.
func (t *Table) decideURI(principal, server, uri string) Decision {
	d := t.decide(principal, server, Resource, uri)
	if d.Effect != Allow || !mayNotBeNormal(uri) {
		return d
	}
	r, ok := readURI(uri)
	if !ok {
		return Decision{Effect: Deny, Reason: URINotNormal}
	}
	refused := func(name string, byRuleOnly bool) (Decision, bool) {
		if name == "" || name == uri {
			return Decision{}, false
		}
		dn := t.decide(principal, server, Resource, name)
		if dn.Effect == Allow || byRuleOnly && dn.Reason != ByRule {
			if dn.Consent && !d.Consent {
				// A spelling of a ui:// resource needs what the ui://
				// resource needs.
				d.Consent, d.ConsentChannel = true, dn.ConsentChannel
			}
			return Decision{}, false
		}
		dn.Effect, dn.Reason = Deny, URINotNormal
		return dn, true
	}
	for _, c := range []struct {
		name       string
		byRuleOnly bool
	}{{r.normal, false}, {r.base, false}, {r.flat, false}, {r.hostless, true}, {r.trimmed, true}} {
		if dn, denied := refused(c.name, c.byRuleOnly); denied {
			return dn
		}
	}
	return d
}

// mayNotBeNormal reports, without allocating, whether uri could have a
// reading other than itself (it reads uri as readURI does). It is false for
// the usual URI: a lower-case scheme followed by "//" and a non-empty
// lower-case host without userinfo or port (or "file:///"), no escapes,
// backslashes, spaces around it, control characters, query or fragment,
// and a path without empty, "." or ".." segments or a trailing slash.
func mayNotBeNormal(uri string) bool {
	if uri == "" || uri[0] == ' ' || uri[len(uri)-1] == ' ' || strings.HasSuffix(uri, "/") {
		return true
	}
	for i := range len(uri) {
		if c := uri[i]; c == '%' || c == '\\' || c == '?' || c == '#' || c < 0x20 || c == 0x7f {
			return true
		}
	}
	colon := validScheme(uri)
	if colon < 0 {
		return true // no scheme (or one in upper case): read it
	}
	rest := uri[colon+1:]
	if !strings.HasPrefix(rest, "//") {
		// No authority: fine but for the schemes that always have one.
		return specialScheme(uri[:colon]) || !pathIsClean(rest) || strings.HasPrefix(uri, "file:")
	}
	auth := rest[2:]
	path := ""
	if j := strings.IndexByte(auth, '/'); j >= 0 {
		auth, path = auth[:j], auth[j:]
	}
	if strings.HasPrefix(uri, "file:") {
		if auth != "" {
			return true
		}
	} else if auth == "" && specialScheme(uri[:colon]) {
		return true
	}
	for i := range len(auth) {
		if c := auth[i]; 'A' <= c && c <= 'Z' || c == '@' || c == ':' || c == ' ' {
			return true
		}
	}
	return !pathIsClean(path)
}

// validScheme returns the index of the colon that ends uri's scheme, or -1
// when uri does not start with a lower-case scheme (ALPHA *(ALPHA / DIGIT
// / "+" / "-" / ".") followed by ":").
func validScheme(uri string) int {
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

// specialScheme reports whether scheme always has a host: a URL parser
// reads "https:host/x", "https:/host/x" and "https:///host/x" as
// "https://host/x".
func specialScheme(scheme string) bool {
	switch scheme {
	case "http", "https", "ws", "wss", "ftp":
		return true
	}
	return false
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

// normalURI is the normal form of uri (see uriReadings), read again until
// it stays (cleaning can make a new form: "x:/./A:" reads otherwise once
// cleaned); ok is false when uri has none.
func normalURI(uri string) (n string, ok bool) {
	r, ok := readURI(uri)
	return r.normal, ok
}

// readURI returns the readings of uri. ok is false when it has no sound
// one: it has spaces around it, a control character (a NUL may end a name
// early, "%00" included), a scheme made by decoding, an escaped "?" or "#" in its path
// (a server that decodes before it splits would cut the path there), a
// separator in its decoded host, a decoded path that starts with "//" where
// no host was written (a server that decodes first would read a host
// there), no host where its scheme always has one, escapes left after three
// rounds of decoding, or a normal form that still changes after three
// readings.
func readURI(uri string) (r uriReadings, ok bool) {
	n := uri
	for range 4 {
		r, ok = readOnce(n)
		if !ok {
			return uriReadings{}, false
		}
		if r.normal == n {
			return r, true
		}
		if n != uri {
			// The readings of the first pass stand; only the normal
			// form is read again.
			r0, _ := readOnce(uri)
			r0.normal = r.normal
			r = r0
		}
		n = r.normal
	}
	return uriReadings{}, false
}

func readOnce(uri string) (r uriReadings, ok bool) {
	if uri == "" || hasControl(uri) || uri[0] == ' ' || uri[len(uri)-1] == ' ' {
		return r, false
	}
	scheme, rest := "", uri
	if colon := validScheme(asciiLower(uri)); colon >= 0 {
		scheme, rest = asciiLower(uri[:colon]), uri[colon+1:]
	} else if d, ok := decodeAll(uri); !ok || validScheme(asciiLower(d)) >= 0 {
		// A scheme made by decoding ("%75i://", "repo%3A//"): a server
		// that decodes first reads one.
		return r, false
	}
	body, tail := rest, ""
	if k := strings.IndexAny(rest, "?#"); k >= 0 {
		body, tail = rest[:k], rest[k:]
	}
	auth, hasAuth := "", false
	if after, found := strings.CutPrefix(body, "//"); found {
		hasAuth = true
		j := strings.IndexByte(after, '/')
		if j < 0 {
			j = len(after)
		}
		auth, body = after[:j], after[j:]
		if auth, ok = decodeAll(auth); !ok || strings.ContainsAny(auth, "/?#\\ ") {
			return uriReadings{}, false
		}
		auth = normalHost(scheme, auth)
	}
	if specialScheme(scheme) && (!hasAuth || auth == "") {
		return uriReadings{}, false
	}
	host := auth
	if scheme == "file" {
		hasAuth = true
		if host == "localhost" {
			host = ""
		}
	}
	prefix := ""
	if scheme != "" {
		prefix = scheme + ":"
	}
	if hasAuth {
		prefix += "//" + host
	}
	path, ok := readPath(body, hasAuth, true)
	if !ok {
		return uriReadings{}, false
	}
	flat, ok := readPath(body+tail, hasAuth, false)
	if !ok {
		return uriReadings{}, false
	}
	r.base = prefix + path
	r.normal = r.base + tail
	r.flat = prefix + flat
	if scheme == "file" && host != "" {
		r.hostless = "file://" + path
	}
	if trimmed, found := strings.CutSuffix(r.base, "/"); found && !strings.HasSuffix(trimmed, "/") {
		r.trimmed = trimmed
	}
	return r, true
}

// readPath is path p decoded, with backslashes as slashes and cleaned. A
// path after a host starts with a slash; a decoded path that starts with
// "//" where no host was written is refused (a server that decodes first
// reads a host there), and so is one with "?" or "#" when noDelims is set.
func readPath(p string, afterHost, noDelims bool) (string, bool) {
	p, ok := decodeAll(p)
	if !ok || noDelims && strings.ContainsAny(p, "?#") {
		return "", false
	}
	p = strings.ReplaceAll(p, `\`, "/")
	if !afterHost && strings.HasPrefix(p, "//") {
		return "", false
	}
	if afterHost && p != "" && p[0] != '/' {
		p = "/" + p
	}
	return cleanPath(p), true
}

// normalHost is a decoded host of a URI of scheme: in lower case, without
// userinfo, without an empty or default port (for file:, without any).
func normalHost(scheme, auth string) string {
	if k := strings.LastIndexByte(auth, '@'); k >= 0 {
		auth = auth[k+1:] // userinfo names no other resource
	}
	auth = asciiLower(auth)
	if k := strings.LastIndexByte(auth, ':'); k >= 0 && !strings.Contains(auth[k:], "]") {
		switch port := auth[k+1:]; {
		case port == "", scheme == "file",
			port == "80" && (scheme == "http" || scheme == "ws"),
			port == "443" && (scheme == "https" || scheme == "wss"),
			port == "21" && scheme == "ftp":
			auth = auth[:k]
		}
	}
	return auth
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
