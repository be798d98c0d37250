package decide

import (
	"github.com/policyc/policyc/internal/urinorm"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/policyc/policyc/runtime/table"
)

// A resource URI is decided as written, but an upstream may read it
// otherwise: a server may decode percent-escapes before or after it splits
// the URI at "?" and "#" (or at only one of them, or not at all), read a
// backslash as a separator, clean "." and ".." segments and repeated
// slashes, ignore a query, a trailing slash, a port, the host of a file:
// URI, the case of the scheme and host. So that a URI cannot reach, under
// another spelling, what the table denies, Decide also decides the URI in
// each of those readings (readURI), and a URI with no sound reading is
// denied.

// reading is one reading of a resource URI. It must be allowed; when
// ruleOnly is set, only a deny rule matching it denies (a default does
// not: "file:///srv/" names the directory a rule for "file:///srv/*"
// means, and "file://host/x" what a rule for "file://host/*" means).
type reading struct {
	name     string
	ruleOnly bool
}

// decideURI is the decision on the resource uri: the decision on uri as
// written, turned into a deny with the reason URINotNormal when one of its
// readings is denied, or when it has none.
func (t *Table) decideURI(principal, server, uri string) Decision {
	d := t.decide(principal, server, table.Resource, uri)
	if d.Effect != table.Allow || !mayNotBeNormal(uri) {
		return d
	}
	_, readings, ok := readURI(uri)
	if !ok {
		return Decision{Effect: table.Deny, Reason: URINotNormal}
	}
	for _, r := range readings {
		if r.name == uri {
			continue
		}
		dn := t.decide(principal, server, table.Resource, r.name)
		if dn.Effect == table.Allow || r.ruleOnly && dn.Reason != ByRule {
			if dn.Consent && !d.Consent {
				// A spelling of a ui:// resource needs what the ui://
				// resource needs.
				d.Consent, d.ConsentChannel = true, dn.ConsentChannel
			}
			continue
		}
		dn.Effect, dn.Reason = table.Deny, URINotNormal
		return dn
	}
	return d
}

// mayNotBeNormal reports, without allocating, whether uri could have a
// reading other than itself (it reads uri as readURI does). It is false for
// the usual URI: a lower-case scheme followed by "//" and a lower-case
// ASCII host without userinfo, port or trailing dot (or "file:///"), no
// escapes, backslashes, spaces around it, control characters, query or
// fragment, and a path that starts with "/", without empty, "." or ".."
// segments or a trailing slash.
func mayNotBeNormal(uri string) bool {
	if uri == "" || strings.HasSuffix(uri, "/") {
		return true
	}
	for i := range len(uri) {
		if c := uri[i]; c == '%' || c == '\\' || c == '?' || c == '#' || c <= ' ' || c >= 0x7f {
			return true // also any space, and non-ASCII (perhaps Unicode space)
		}
	}
	colon := urinorm.SchemeEnd(uri)
	if colon < 0 {
		return true // no scheme (or one in upper case): read it
	}
	rest := uri[colon+1:]
	if !strings.HasPrefix(rest, "//") {
		return true
	}
	auth, path := rest[2:], ""
	if j := strings.IndexByte(auth, '/'); j >= 0 {
		auth, path = auth[:j], auth[j:]
	}
	if path == "" || auth == "" && uri[:colon] != "file" || auth != "" && uri[:colon] == "file" || strings.HasSuffix(auth, ".") {
		return true
	}
	for i := range len(auth) {
		if c := auth[i]; 'A' <= c && c <= 'Z' || c == '@' || c == ':' {
			return true // upper case, userinfo, a port
		}
	}
	return !pathIsClean(path) || urinorm.NumericHost(auth)
}

// defaultPorts are the ports a URL parser drops.
var defaultPorts = map[string]string{"http": "80", "ws": "80", "https": "443", "wss": "443", "ftp": "21"}

// pathIsClean reports, without allocating, whether urinorm.CleanPath(p) is p: no
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

// normalURI is the normal form of uri (see readURI); ok is false when uri
// has no sound reading.
func normalURI(uri string) (n string, ok bool) {
	n, _, ok = readURI(uri)
	return n, ok
}

// readURI returns the normal form of uri and the readings Decide decides
// besides uri itself. The normal form is uri split into scheme, host, path,
// query and fragment as written; the host and path decoded (up to three
// rounds, as a server may decode twice); backslashes in the path read as
// slashes, empty, "." and ".." segments removed; scheme and host in lower
// case, without userinfo, a trailing dot, an empty or default port (for
// file:, any port, and the host localhost); a host scheme's empty path as
// "/"; query and fragment as written. The readings are, each without a
// query or fragment: the path after none to three rounds of decoding,
// split at "?" and "#", at "?" only, at "#" only or not at all, and
// cleaned before the rest is decoded (as written, or as a URL parser does)
// or after; and, for a deny rule only, each without a trailing slash, and
// for a file: URI with a host, each without the host.
//
// ok is false when uri has no sound reading: spaces around it (Unicode
// ones too); a control character (a NUL may end a name early: "%00"
// anywhere, other escaped ones in the path); a scheme made by decoding;
// where the scheme has hosts, a "/", "\", "?", "#", space or non-ASCII
// character in its decoded host, a port left in it, or a last label that
// is a number a URL parser reads as another IPv4 address; a path that
// starts with "//" once decoded where no host was written; no host where
// the scheme always has one; or escapes left after three rounds of
// decoding in the path.
func readURI(uri string) (normal string, readings []reading, ok bool) {
	if uri == "" || urinorm.HasControl(uri) {
		return "", nil, false
	}
	if r, _ := utf8.DecodeRuneInString(uri); unicode.IsSpace(r) {
		return "", nil, false
	}
	if r, _ := utf8.DecodeLastRuneInString(uri); unicode.IsSpace(r) {
		return "", nil, false
	}
	scheme, rest := "", uri
	if colon := urinorm.SchemeEnd(urinorm.ASCIILower(uri)); colon >= 0 {
		scheme, rest = urinorm.ASCIILower(uri[:colon]), uri[colon+1:]
	} else if d, ok := urinorm.DecodeAll(uri); !ok || urinorm.SchemeEnd(urinorm.ASCIILower(d)) >= 0 {
		// A scheme made by decoding ("%75i://", "repo%3A//"): a server
		// that decodes first reads one.
		return "", nil, false
	}
	host, hasHost := "", false
	if after, found := strings.CutPrefix(rest, "//"); found {
		hasHost = true
		j := strings.IndexAny(after, "/?#")
		if j < 0 {
			j = len(after)
		}
		var raw string
		raw, rest = after[:j], after[j:]
		if host, ok = readHost(scheme, raw); !ok {
			return "", nil, false
		}
	} else if urinorm.HostScheme(scheme) {
		return "", nil, false
	}
	if urinorm.HostScheme(scheme) && host == "" {
		return "", nil, false
	}
	prefix := ""
	if scheme != "" {
		prefix = scheme + ":"
	}
	hostless := ""
	if scheme == "file" {
		// file:/x, file:///x and file://localhost/x name one file.
		if host == "localhost" {
			host = ""
		}
		if host != "" {
			hostless = prefix + "//"
		}
		hasHost = true
	}
	if hasHost {
		prefix += "//" + host
	}
	// The normal form: split as written, the path decoded.
	k := strings.IndexAny(rest, "?#")
	if k < 0 {
		k = len(rest)
	}
	path, ok := urinorm.ReadPath(rest[:k], hasHost, scheme == "file" && !strings.HasPrefix(uri[len(scheme)+1:], "//"), true)
	if !ok {
		return "", nil, false
	}
	if path == "" && urinorm.HostScheme(scheme) {
		path = "/"
	}
	normal = prefix + path + rest[k:]
	seen := map[string]bool{uri: true}
	add := func(name string, ruleOnly bool) {
		if !seen[name] {
			seen[name] = true
			readings = append(readings, reading{name, ruleOnly})
		}
	}
	add(normal, false)
	// A server decodes the path some rounds (none to three) before it
	// splits and cleans it, and may decode what is left after.
	srcs := []string{rest}
	for s := rest; len(srcs) < 4; {
		d := urinorm.Unescape(s)
		if d == s {
			break
		}
		srcs, s = append(srcs, d), d
	}
	for _, src := range srcs {
		for _, delims := range []string{"?#", "?", "#", ""} {
			body := src
			if delims != "" {
				if k := strings.IndexAny(src, delims); k >= 0 {
					body = src[:k]
				}
			}
			// Cleaned as written (backslashes as slashes), as a URL
			// parser does (a segment that is "." or ".." once "%2e" is
			// decoded is a dot segment; other escapes stay in their
			// segment), or not before the rest is decoded.
			for _, p := range []string{urinorm.CleanPath(strings.ReplaceAll(body, `\`, "/")), urinorm.CleanPath(dotsDecoded(body)), body} {
				p, ok := urinorm.ReadPath(p, hasHost, false, false)
				if !ok {
					return "", nil, false
				}
				if p == "" && urinorm.HostScheme(scheme) {
					p = "/"
				}
				add(prefix+p, false)
				trimmed, slash := strings.CutSuffix(p, "/")
				if slash && trimmed != "" && !strings.HasSuffix(trimmed, "/") {
					add(prefix+trimmed, true)
				}
				if hostless != "" {
					add(hostless+p, true)
					if slash && trimmed != "" && !strings.HasSuffix(trimmed, "/") {
						add(hostless+trimmed, true)
					}
				}
			}
		}
	}
	return normal, readings, true
}

// dotsDecoded is p with backslashes as slashes and, in each segment that
// is "." or ".." once its "%2e" escapes are decoded, those escapes decoded:
// the segments a URL parser removes before it decodes anything else.
func dotsDecoded(p string) string {
	segs := strings.Split(strings.ReplaceAll(p, `\`, "/"), "/")
	for i, seg := range segs {
		if d := strings.ReplaceAll(strings.ReplaceAll(seg, "%2e", "."), "%2E", "."); d == "." || d == ".." {
			segs[i] = d
		}
	}
	return strings.Join(segs, "/")
}

// readHost is the written host raw of a URI of scheme, decoded and in
// normal form; ok is false when it is not sound.
func readHost(scheme, raw string) (string, bool) {
	host, ok := urinorm.DecodeAll(raw)
	if !ok || strings.ContainsAny(host, "/?#\\ ") {
		return "", false
	}
	if k := strings.LastIndexByte(host, '@'); k >= 0 {
		host = host[k+1:] // userinfo names no other resource
	}
	host = urinorm.ASCIILower(host)
	port := ""
	if k := strings.LastIndexByte(host, ':'); k >= 0 && !strings.Contains(host[k:], "]") {
		host, port = host[:k], host[k+1:]
		if port != "" {
			n, err := strconv.Atoi(port)
			if err != nil || n < 0 || n > 65535 {
				return "", false
			}
			port = strconv.Itoa(n) // no leading zeros
		}
		if port == defaultPorts[scheme] || scheme == "file" {
			port = ""
		}
	}
	host = strings.TrimSuffix(host, ".")
	if urinorm.HostScheme(scheme) || scheme == "file" {
		for i := range len(host) {
			if host[i] >= 0x80 {
				return "", false // a name an IDNA mapping may turn into another
			}
		}
		if urinorm.NumericHost(host) && !urinorm.CanonicalIPv4(host) || strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
			return "", false // another address, or a port left in the host
		}
	}
	if port != "" {
		host += ":" + port
	}
	return host, true
}
