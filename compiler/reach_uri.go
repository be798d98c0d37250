package compiler

import (
	"fmt"
	"github.com/policyc/policyc/internal/urinorm"
	"strings"
	"unicode/utf8"

	"github.com/policyc/policyc/internal/clip"
	"github.com/policyc/policyc/internal/glob"
	"github.com/policyc/policyc/runtime/table"
)

// The gateway decides a resource URI as written and in its other readings
// (runtime/decide/uri.go): decoded, "." and ".." removed, split at "?" and
// "#", scheme and host in lower case. Each must be allowed, so a resource
// allow entry that only matches URIs out of normal form allows one only when
// some rule allows its normal form too. The analysis decides names as
// written; what follows finds, from the literal text a pattern starts with,
// the entries for which that never happens.
//
// Two readings serve, because every URI with a sound reading has them:
//
//   - cut: the URI without its query and fragment, split where written,
//     cleaned, then decoded. An entry whose literal text already holds a
//     "?" or "#" has one such reading for every URI it matches.
//   - clean: the same from the URI decoded as far as the gateway decodes
//     it: no query, fragment, escape, backslash, empty, "." or ".."
//     segment, with the scheme and host in normal form. No pattern whose
//     literal text keeps a URI from that form (a shape below) matches it.

// uriShape is what the literal text a resource pattern starts with tells
// of every URI it matches.
type uriShape struct {
	// why says what keeps the URIs out of normal form, for a finding.
	why string
	// fails: no URI the pattern matches has a sound reading, so the
	// gateway denies each.
	fails bool
	// query: each URI has a query or fragment; cut is the reading without
	// it, the same for all of them.
	query bool
	cut   string
	// bound begins every clean reading of the URIs (not query).
	bound string
	// normal is the pattern written against the normal form, or "".
	normal string
}

// literalPrefix returns the text every name pattern matches starts with,
// escapes read: up to the first wildcard or class, or a U+FFFD (which
// also matches invalid UTF-8); end is where it stops in pattern, full is
// set when it is the whole pattern.
func literalPrefix(pattern string) (lit string, end int, full bool) {
	var b strings.Builder
	for i := 0; i < len(pattern); {
		c := pattern[i]
		if c == '*' || c == '?' || c == '[' {
			return b.String(), i, false
		}
		j := i
		if c == '\\' && i+1 < len(pattern) {
			j = i + 1
		}
		r, size := utf8.DecodeRuneInString(pattern[j:])
		if r == utf8.RuneError {
			return b.String(), i, false
		}
		b.WriteRune(r)
		i = j + size
	}
	return b.String(), len(pattern), true
}

// readShape returns the shape of a resource pattern, and false when its
// literal text keeps no URI it matches out of normal form (or does not
// tell).
func readShape(pattern string) (uriShape, bool) {
	p, end, full := literalPrefix(pattern)
	colon := urinorm.SchemeEnd(urinorm.ASCIILower(p))
	if colon < 0 {
		return uriShape{}, false
	}
	scheme := urinorm.ASCIILower(p[:colon])
	rest := p[colon+1:]
	hostSch, file := urinorm.HostScheme(scheme), scheme == "file"
	var sh uriShape
	because := func(why string) {
		if sh.why == "" {
			sh.why = why
		}
	}
	if p[:colon] != scheme {
		because("its scheme is not in lower case")
	}
	if strings.ContainsAny(rest, "?#") {
		return queryShape(scheme, rest, hostSch, file)
	}
	sh.bound = scheme + ":"
	// The normal form of the literal text, for the suggestion.
	normal, normalOK := scheme+":", true
	path, pathKnown := "", false
	switch {
	case strings.HasPrefix(rest, "//"):
		after := rest[2:]
		j := strings.IndexByte(after, '/')
		complete := j >= 0 || full
		raw := after
		if j >= 0 {
			raw = after[:j]
		}
		if hostNotNormal(raw) {
			because("its host is not in lower case, decoded and without user information")
		}
		h, simple := simpleHost(scheme, raw)
		if !simple {
			h, normalOK = guessHost(raw, complete)
		}
		if complete {
			if hostSch && raw == "" {
				sh.fails = true
				because(fmt.Sprintf("a %s: URI has a host", scheme))
			}
			if file && h == "localhost" {
				h = ""
				because("file://localhost/ is file:///")
			}
			if simple {
				sh.bound = scheme + "://" + h
			}
			path, pathKnown = after[len(raw):], true
		}
		normal += "//" + h
	case full || len(rest) >= 2 || rest != "" && rest[0] != '/':
		if hostSch {
			sh.fails = true
			because(fmt.Sprintf("a %s: URI has a host, after //", scheme))
		}
		if file {
			because("a file: URI is written file:///path")
			sh.bound = "file://"
			normal += "//"
			if !strings.HasPrefix(rest, "/") {
				normal += "/"
			}
		}
		path, pathKnown = rest, true
	}
	if pathKnown {
		if urinorm.Unescape(path) != path {
			because("its path has percent-escapes, which the gateway decodes")
		}
		if strings.ContainsRune(path, '\\') {
			because(`its path has a backslash, which the gateway reads as "/"`)
		}
		segs := strings.Split(path, "/")
		for i, seg := range segs {
			if i == len(segs)-1 && !full {
				break // the segment goes on past the literal text
			}
			switch {
			case seg == "." || seg == "..":
				because(`its path has "." or ".." segments, which the gateway removes`)
			case seg == "" && i > 0 && i < len(segs)-1:
				because("its path has an empty segment (//), which the gateway removes")
			}
		}
		if full && path == "" && hostSch && strings.HasPrefix(rest, "//") {
			because(`it has no path, and the gateway reads an empty path as "/"`)
		}
		d := strings.ReplaceAll(decoded(path), `\`, "/")
		if full {
			d = urinorm.CleanPath(d)
			if d == "" && hostSch {
				d = "/"
			}
		} else {
			i := strings.LastIndexByte(d, '/')
			d = urinorm.CleanPath(d[:i+1]) + d[i+1:]
		}
		normal += d
	} else if strings.HasPrefix(rest, "//") {
		normal = "" // an unfinished host: the suggestion cannot tell
	} else {
		normal += rest
	}
	if sh.why == "" {
		return uriShape{}, false
	}
	if normalOK && normal != "" && !sh.fails {
		sh.normal = escapeGlob(normal) + pattern[end:]
	}
	return sh, true
}

// queryShape is the shape of a pattern whose literal text rest (after the
// scheme) holds a "?" or "#": the reading of its URIs without query and
// fragment is cut, the same for all of them. It replays readURI for that
// reading; a host it does not read as simply is left alone.
func queryShape(scheme, rest string, hostSch, file bool) (uriShape, bool) {
	sh := uriShape{query: true, why: "every URI it matches has a query or fragment"}
	hasHost, host, body := file, "", rest
	if after, ok := strings.CutPrefix(rest, "//"); ok {
		j := strings.IndexAny(after, "/?#")
		h, simple := simpleHost(scheme, after[:j])
		if !simple {
			return uriShape{}, false
		}
		hasHost, host, body = true, h, after[j:]
	} else if hostSch {
		return uriShape{fails: true, why: fmt.Sprintf("a %s: URI has a host, after //", scheme)}, true
	}
	if hostSch && host == "" {
		return uriShape{fails: true, why: fmt.Sprintf("a %s: URI has a host", scheme)}, true
	}
	if file && host == "localhost" {
		host = ""
	}
	prefix := scheme + ":"
	if hasHost {
		prefix += "//" + host
	}
	body = body[:strings.IndexAny(body, "?#")]
	path, ok := urinorm.ReadPath(urinorm.CleanPath(strings.ReplaceAll(body, `\`, "/")), hasHost, false, false)
	if !ok {
		return uriShape{fails: true, why: "its path holds a NUL once decoded"}, true
	}
	if path == "" && hostSch {
		path = "/"
	}
	sh.cut = prefix + path
	return sh, true
}

// hostNotNormal reports whether a written host, or the start of one, is
// one no host in normal form is: with upper case, user information or a
// percent-escape.
func hostNotNormal(raw string) bool {
	return strings.ContainsAny(raw, "ABCDEFGHIJKLMNOPQRSTUVWXYZ@") || urinorm.Unescape(raw) != raw
}

// simpleHost returns the normal form of a written host of letters, digits,
// ".", "-" and "_", as the gateway reads it, and false for any other host,
// or one the gateway reads as another address.
func simpleHost(scheme, raw string) (string, bool) {
	for i := range len(raw) {
		c := raw[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return "", false
		}
	}
	h := strings.TrimSuffix(urinorm.ASCIILower(raw), ".")
	if (urinorm.HostScheme(scheme) || scheme == "file") && urinorm.NumericHost(h) && !urinorm.CanonicalIPv4(h) {
		return "", false
	}
	return h, true
}

// guessHost is a host written otherwise, decoded and in lower case, without
// user information, for the suggestion; false when it cannot tell.
func guessHost(raw string, complete bool) (string, bool) {
	h := decoded(raw)
	if strings.ContainsAny(h, "/?#\\ %:[]") {
		return "", false
	}
	if i := strings.LastIndexByte(h, '@'); i >= 0 {
		if !complete {
			return "", false
		}
		h = h[i+1:]
	}
	if complete {
		h = strings.TrimSuffix(h, ".")
	}
	return urinorm.ASCIILower(h), true
}

// shapeOf returns r's shape, read once.
func (r *rrule) shapeOf() (*uriShape, bool) {
	if !r.shapeRead {
		if sh, ok := readShape(r.entry.Pattern); ok {
			r.shape = &sh
		}
		r.shapeRead = true
	}
	return r.shape, r.shape != nil
}

// queryOrFragment matches the names with a "?" or "#".
var queryOrFragment = glob.MustParse("*[?#]*")

// normalDead reports whether r, a resource allow entry of b decided as
// written for some principal, allows nothing at the gateway: for every
// server and class, every URI it matches has a reading that is denied.
func (a *analyzer) normalDead(b *rblock, r *rrule, servers []string, classes []*class) (*uriShape, bool) {
	sh, ok := r.shapeOf()
	if !ok {
		return nil, false
	}
	if sh.fails {
		return sh, true
	}
	for _, s := range servers {
		for _, c := range classes {
			st := a.stack(c, s, b.kind)
			if sh.query {
				if a.allows(st, s, sh.cut) {
					return nil, false
				}
				continue
			}
			key := cleanKey{c, s, sh.bound}
			allowed, seen := a.clean[key]
			if !seen {
				_, found, complete := a.cleanAllowed(st, sh.bound)
				allowed = found || !complete
				if a.clean == nil {
					a.clean = map[cleanKey]bool{}
				}
				a.clean[key] = allowed
			}
			if allowed {
				return nil, false
			}
		}
	}
	return sh, true
}

// cleanKey is a question cleanAllowed answers: for a class on a server,
// with a bound.
type cleanKey struct {
	c             *class
	server, bound string
}

// allows reports whether the stack st on server allows name as written.
func (a *analyzer) allows(st []*rblock, server, name string) bool {
	for _, b := range st {
		if b.eval(name) != effAllow {
			return false
		}
	}
	return a.uiPass(st[0].kind, server, name)
}

// cleanAllowed searches a name that begins with bound, has no query or
// fragment, and every layer of st allows, leaving out the rules with a
// shape: none matches a clean reading. The ui:// check is left out too, so
// a name it denies may be found: an answer that errs only towards "found".
func (a *analyzer) cleanAllowed(st []*rblock, bound string) (string, bool, bool) {
	g, err := glob.Parse(escapeGlob(bound) + "*")
	if err != nil {
		return "", true, true
	}
	return a.allowedIn(st, g, func(o *rrule) bool {
		_, shaped := o.shapeOf()
		return shaped
	}, queryOrFragment)
}

// allowedIn searches a name g matches, and not, that every layer of st
// allows as written, with the rules skip says left out of their layers;
// the ui:// check is left out. complete is false when the search gave up.
func (a *analyzer) allowedIn(st []*rblock, g *glob.Pattern, skip func(*rrule) bool, not *glob.Pattern) (name string, found, complete bool) {
	gr := &rrule{entry: &Entry{Pattern: g.String(), Glob: g}}
	gr.readPattern()
	var pats []*glob.Pattern
	idx := make([][]int, len(st))
	for i, b := range st {
		b.count(len(b.rules))
		idx[i] = make([]int, len(b.rules))
		for k, o := range b.rules {
			idx[i][k] = -1
			if o.pat().Empty() || disjoint(gr, o) || skip != nil && skip(o) {
				continue
			}
			idx[i][k] = len(pats)
			pats = append(pats, o.pat())
		}
	}
	notAt := -1
	if not != nil {
		notAt = len(pats)
		pats = append(pats, not)
	}
	if !a.charge() {
		return "", false, false
	}
	return a.search.Witness(g, pats, func(m []bool) bool {
		if notAt >= 0 && m[notAt] {
			return false
		}
		for i, b := range st {
			e := b.def
			for k, at := range idx[i] {
				if at >= 0 && m[at] {
					e = b.rules[k].eff
					break
				}
			}
			if e != effAllow {
				return false
			}
		}
		return true
	})
}

// reportDeadUIEntries reports the entries of a ui allowlist that admit no
// URI the resource rules allow anyone: they let nothing through. Every
// principal is judged by the server's rules and the global scope at least,
// and other scopes only narrow, so that stack is the one searched.
func (a *analyzer) reportDeadUIEntries() {
	for _, name := range a.servers {
		s := a.p.Servers[name]
		if u := a.ui[name]; u == nil || !u.consent {
			continue // ui-no-consent: nothing passes
		}
		st := a.stack(a.anyone, name, table.Resource.String())
		for _, e := range s.UI.Allow {
			if !validUIEntry(e.Pattern) {
				continue // invalid-ui-pattern
			}
			src := escapeGlob(e.Pattern)
			if prefix, ok := strings.CutSuffix(e.Pattern, "*"); ok {
				src = escapeGlob(prefix) + "*"
			} else if strings.HasSuffix(e.Pattern, "/") {
				src += "*"
			}
			g, err := glob.Parse(src)
			if err != nil {
				continue
			}
			if _, found, complete := a.allowedIn(st, g, nil, nil); found || !complete {
				continue
			}
			ex, _ := glob.Example(g)
			path := fmt.Sprintf("mcp_servers.%s.ui.allow_list[%d]", name, e.Index)
			info, _ := LookupCode(CodeUIResourceDenied)
			a.res.Diagnostics = append(a.res.Diagnostics, Diagnostic{Pos: e.Pos, Code: CodeUIResourceDenied, Severity: info.Level, Path: path,
				Message: fmt.Sprintf("%s: %s lets nothing through: the resource rules allow no URI it admits, for example %s is %s",
					path, clip.Quote(e.Pattern), clip.Quote(ex), a.decider(st, name, ex)),
				Suggestion: fmt.Sprintf("allow the URIs in mcp_servers.%s.access.resource too, or remove the entry", name)})
		}
	}
}

// validUIEntry reports whether a ui allowlist entry is a ui:// URI, a
// prefix ending in * or one ending in /, as invalid-ui-pattern wants.
func validUIEntry(p string) bool {
	rest, ok := strings.CutPrefix(p, uiPrefix)
	star := strings.IndexAny(rest, "*?[\\")
	return ok && rest != "" && rest != "*" && (star < 0 || star == len(rest)-1 && rest[star] == '*')
}

// reportNotNormal reports r, which allows nothing at the gateway (sh).
func (a *analyzer) reportNotNormal(b *rblock, r *rrule, sh *uriShape, server string, c *class) {
	what := fmt.Sprintf("%s: %s never allows anything", r.path, clip.Quote(r.entry.Pattern))
	code := CodeAllowNeverAllows
	if b.narrowing {
		what = fmt.Sprintf("%s: %s changes no decision", r.path, clip.Quote(r.entry.Pattern))
		code = CodeNarrowingNoEffect
	}
	var msg, hint string
	switch {
	case sh.fails:
		msg = fmt.Sprintf("%s: %s, so the gateway denies every URI it matches", what, sh.why)
		hint = "write the URIs as the gateway reads them (policyc explain prints a URI's normal form)"
	case sh.query:
		msg = fmt.Sprintf("%s: %s, and the gateway also decides each without it, as %s, which is %s",
			what, sh.why, clip.Quote(sh.cut), a.decider(a.stack(c, server, b.kind), server, sh.cut))
		hint = fmt.Sprintf("allow %s as well (rules cannot tell queries apart), or remove the entry", clip.Quote(sh.cut))
	default:
		msg = fmt.Sprintf("%s: no URI it matches is in normal form (%s), and the gateway allows a URI only when its normal form is allowed too; no rule allows a normal form beginning %s",
			what, sh.why, clip.Quote(sh.bound))
		hint = "write the pattern against the normal form (policyc explain prints a URI's)"
		if sh.normal != "" {
			hint = fmt.Sprintf("write the pattern against the normal form: %s", clip.Quote(sh.normal))
		}
	}
	a.add(r, code, msg, hint)
}

// checkNormal replaces the verdict on rr, a resource allow entry decided as
// written, when it allows nothing at the gateway.
func (a *analyzer) checkNormal(b *rblock, r *rrule, servers []string, classes []*class, rr *RuleReach) bool {
	if b.kind != table.Resource.String() || r.eff != effAllow {
		return false
	}
	sh, dead := a.normalDead(b, r, servers, classes)
	if !dead {
		return false
	}
	a.reportNotNormal(b, r, sh, servers[0], classes[0])
	rr.Status, rr.NotNormal = Unreachable, true
	rr.Principal, rr.WitnessServer, rr.Witness = "", "", ""
	return true
}

// decoded is s with its escapes decoded as the gateway decodes them, up to
// three rounds.
func decoded(s string) string {
	d, _ := urinorm.DecodeAll(s)
	return d
}
