package compiler

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/policyc/policyc/internal/glob"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// The gateway decides a resource URI in its other readings too
// (decide.Table.Decide). These tests hold the shapes readShape finds, and
// the verdicts built on them, to the real runtime, on URIs made of the
// pieces that make readings differ: case, escapes, dot segments, empty
// segments, backslashes, queries, user information, ports.

// uriPiece is one piece of a generated pattern: its glob text and, for a
// literal, the text it matches.
type uriPiece struct {
	glob string
	lit  string
	wild bool
}

var (
	uriSchemes = []string{"file:", "FILE:", "repo:", "Repo:", "https:", "ui:", "x-y:"}
	uriSeps    = []string{"//", "//", "//", "/", "", "///"}
	uriHosts   = []string{"", "h", "h", "H", "localhost", "h.", "u@h", "%68", "h:80", "h_1", "127.1", "a.h"}
	uriPaths   = []string{"/", "/", "/", "a", "a", "B", ".", "..", "%41", "%2e", "%2F", "%25", `\`, "?", "#", "x", "/./", "/../", "//"}
	// uriFill is what a wildcard of a pattern is filled with in a URI.
	uriFill = []string{"a", "b", "/", "/", "/../", "/..", "..", "?q", "#f", "%2e%2e", "%2e", "A", "%41", `\`, "/x/", "h", "//", "%3F", "%252e", "."}
)

func litPiece(s string) uriPiece { return uriPiece{glob: escapeGlob(s), lit: s} }

// uriPattern returns a random resource pattern, as pieces.
func uriPattern(r *rand.Rand) []uriPiece {
	var ps []uriPiece
	if r.IntN(8) == 0 {
		return []uriPiece{{glob: "*", wild: true}}
	}
	ps = append(ps, litPiece(uriSchemes[r.IntN(len(uriSchemes))]))
	sep := uriSeps[r.IntN(len(uriSeps))]
	ps = append(ps, litPiece(sep))
	if strings.HasPrefix(sep, "//") && r.IntN(4) != 0 {
		ps = append(ps, litPiece(uriHosts[r.IntN(len(uriHosts))]))
	}
	for range r.IntN(5) {
		switch r.IntN(6) {
		case 0:
			ps = append(ps, uriPiece{glob: "*", wild: true})
		case 1:
			ps = append(ps, uriPiece{glob: "?", wild: true})
		default:
			ps = append(ps, litPiece(uriPaths[r.IntN(len(uriPaths))]))
		}
	}
	if r.IntN(2) == 0 {
		ps = append(ps, uriPiece{glob: "*", wild: true})
	}
	return ps
}

func uriGlob(ps []uriPiece) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.glob)
	}
	return b.String()
}

// uriFor returns a URI the pattern ps matches, its wildcards filled at
// random.
func uriFor(r *rand.Rand, ps []uriPiece) string {
	var b strings.Builder
	for _, p := range ps {
		switch {
		case !p.wild:
			b.WriteString(p.lit)
		case p.glob == "?":
			b.WriteByte("a/.?%A#"[r.IntN(7)])
		default:
			for range r.IntN(4) {
				b.WriteString(uriFill[r.IntN(len(uriFill))])
			}
		}
	}
	return b.String()
}

// uriRuleLine numbers the generated entries.
type uriBuilder struct{ line int }

func (u *uriBuilder) list(path, key string, pats []string) *List {
	if pats == nil {
		return nil
	}
	u.line++
	l := &List{Key: key, Path: path + "." + key, Pos: Position{File: "p.cue", Line: u.line, Column: 1}}
	for i, p := range pats {
		u.line++
		l.Entries = append(l.Entries, Entry{Pattern: p, Glob: glob.MustParse(p), Pos: Position{File: "p.cue", Line: u.line, Column: 1}, Index: i})
	}
	return l
}

func (u *uriBuilder) access(path, def string, deny, allow []string) *Access {
	u.line++
	a := &Access{Path: path + ".resource", Pos: Position{File: "p.cue", Line: u.line, Column: 1}}
	if def != "" {
		u.line++
		a.Default = &Setting{Value: def, Pos: Position{File: "p.cue", Line: u.line, Column: 1}}
	}
	a.Deny = u.list(a.Path, "deny_list", deny)
	a.Allow = u.list(a.Path, "allow_list", allow)
	return a
}

func newURIPolicy() *Policy {
	return &Policy{Defaults: map[string]Setting{}, Channels: map[string]*Channel{"page": {Name: "page", Kind: table.ChannelApprovalsPage, ReachesHuman: true}},
		Servers: map[string]*Server{}, Groups: map[string]*Scope{}, Principals: map[string]*Scope{}}
}

func loadPolicy(t *testing.T, p *Policy) *decide.Table {
	t.Helper()
	rt, err := decide.Load(Freeze(p, table.Source{PolicyPath: "."}, 1))
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// complementOf returns patterns that together match exactly the names
// that do not begin with bound (but the empty name).
func complementOf(bound string) []string {
	var out []string
	for i := range len(bound) {
		if i > 0 {
			out = append(out, escapeGlob(bound[:i]))
		}
		out = append(out, escapeGlob(bound[:i])+"[!"+strings.ReplaceAll(string(bound[i]), `\`, `\\`)+"]*")
	}
	return out
}

func uriSeedCount(t *testing.T, n int) int {
	if testing.Short() {
		n /= 4
	}
	if s := os.Getenv("POLICYC_REACH_PROPERTY_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	return n
}

// TestURIShapesAtTheGateway checks what readShape claims of a pattern
// against the gateway, for URIs the pattern matches:
//
//   - fails: the gateway denies each, whatever the rules;
//   - query: each is denied where only cut is denied;
//   - otherwise: each is denied where only the names that begin with
//     bound are denied, but those with a query or fragment and those any
//     shaped pattern matches. This is what the analysis leans on: some
//     reading of the URI begins with bound, has no query or fragment and
//     is matched by no shaped pattern.
func TestURIShapesAtTheGateway(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 13))
	var pool []string // shaped patterns seen so far
	kinds := map[string]int{}
	for range uriSeedCount(t, 3000) {
		ps := uriPattern(r)
		pat := uriGlob(ps)
		g, err := glob.Parse(pat)
		if err != nil {
			continue
		}
		sh, ok := readShape(pat)
		if !ok {
			continue
		}
		pool = append(pool, pat)
		if len(pool) > 12 {
			pool = pool[1:]
		}
		var rt *decide.Table
		b := &uriBuilder{}
		p := newURIPolicy()
		p.Servers["fs"] = &Server{Name: "fs", Access: map[string]*Access{}}
		switch {
		case sh.fails:
			kinds["fails"]++
			p.Servers["fs"].Access["resource"] = b.access("mcp_servers.fs.access", "allow", nil, nil)
		case sh.query:
			kinds["query"]++
			p.Servers["fs"].Access["resource"] = b.access("mcp_servers.fs.access", "allow", []string{escapeGlob(sh.cut)}, []string{"*"})
		default:
			kinds["clean"]++
			p.Servers["fs"].Access["resource"] = b.access("mcp_servers.fs.access", "allow", nil, nil)
			allow := append(slices.Clone(pool), "*[?#]*")
			allow = append(allow, complementOf(sh.bound)...)
			p.Global = &Scope{Name: "global", Servers: map[string]*ScopeServer{
				table.AllServers: {Access: map[string]*Access{"resource": b.access("global.access", "", nil, allow)}},
			}}
		}
		rt = loadPolicy(t, p)
		for range 60 {
			u := uriFor(r, ps)
			if !g.Match(u) {
				t.Fatalf("%q does not match its own URI %q", pat, u)
			}
			if sh.query && u == sh.cut {
				continue // denied as written: nothing to tell
			}
			if d := rt.Decide("", "fs", table.Resource, u); d.Effect == table.Allow {
				t.Fatalf("pattern %q (shape %+v): the gateway allows %q (normal form %q)\nrules: %v",
					pat, sh, u, rt.Explain("", "fs", table.Resource, u).Normal, p.Global)
			}
		}
	}
	t.Logf("shapes: %v", kinds)
	for _, k := range []string{"fails", "query", "clean"} {
		if kinds[k] == 0 {
			t.Errorf("the generator never produced a %s shape", k)
		}
	}
}

// TestNotNormalProperty: for random resource policies of URI patterns,
// every entry the analysis calls dead at the gateway (NotNormal) is
// allowed by no decision of the gateway, for any principal, on URIs its
// patterns match; and every ui allowlist entry it calls dead lets no URI
// through.
func TestNotNormalProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 19))
	var notNormal, deadUI, reachable int
	byKind := map[string]int{}
	for seed := range uriSeedCount(t, 400) {
		b := &uriBuilder{}
		p := newURIPolicy()
		var shapes [][]uriPiece
		pats := func(n int) []string {
			var out []string
			for range n {
				ps := uriPattern(r)
				if _, err := glob.Parse(uriGlob(ps)); err != nil {
					continue
				}
				shapes = append(shapes, ps)
				out = append(out, uriGlob(ps))
			}
			return out
		}
		def := []string{"", "allow", "deny"}[r.IntN(3)]
		s := &Server{Name: "fs", Access: map[string]*Access{"resource": b.access("mcp_servers.fs.access", def, pats(r.IntN(2)), pats(1+r.IntN(4)))}}
		if r.IntN(3) == 0 {
			s.UI = &UI{ConsentChannel: Setting{Value: "page"}}
			for i, u := range []string{"ui://h/", "ui://h/a*", "ui://H/x", "ui://h/B", "ui://a.h/x"} {
				if r.IntN(2) == 0 {
					b.line++
					s.UI.Allow = append(s.UI.Allow, Entry{Pattern: u, Pos: Position{File: "p.cue", Line: b.line, Column: 1}, Index: i})
					shapes = append(shapes, []uriPiece{litPiece(strings.TrimSuffix(u, "*")), {glob: "*", wild: true}})
				}
			}
		}
		p.Servers["fs"] = s
		if r.IntN(3) == 0 {
			p.Global = &Scope{Name: "global", Servers: map[string]*ScopeServer{
				table.AllServers: {Access: map[string]*Access{"resource": b.access("global.access", "", pats(r.IntN(2)), nil)}},
			}}
		}
		if r.IntN(2) == 0 {
			g := &Scope{Name: "group:g1", Servers: map[string]*ScopeServer{
				"fs": {Access: map[string]*Access{"resource": b.access("groups.g1.mcp_servers.fs.access", "", pats(r.IntN(2)), pats(1+r.IntN(3)))}},
			}}
			if r.IntN(2) == 0 {
				g.Members = []string{"p1"}
			}
			p.Groups["g1"] = g
		}
		res := AnalyzeReach(p, ReachOptions{})
		tab := Freeze(p, table.Source{PolicyPath: "."}, 1)
		rt, err := decide.Load(tab)
		if err != nil {
			t.Fatal(err)
		}
		// URIs: each pattern's, filled at random, and each with its path
		// climbing into another's.
		var uris []string
		for _, ps := range shapes {
			for range 25 {
				uris = append(uris, uriFor(r, ps))
			}
			for _, qs := range shapes {
				other := uriFor(r, qs)
				if i := strings.Index(other, "//"); i >= 0 {
					if j := strings.IndexByte(other[i+2:], '/'); j >= 0 {
						uris = append(uris, uriFor(r, ps)+"/../../../.."+other[i+2+j:])
					}
				}
			}
		}
		askers := []string{"", "p1", " groups=g1", "p2 groups=g1"}
		for _, rr := range res.Rules {
			if rr.Status == Reachable {
				reachable++
			}
			if !rr.NotNormal {
				continue
			}
			notNormal++
			if sh, _ := readShape(rr.Entry.Pattern); true {
				byKind[fmt.Sprintf("%s fails=%v query=%v", rr.Scope, sh.fails, sh.query)]++
			}
			if rr.Status != Unreachable {
				t.Fatalf("seed %d: %s NotNormal but %s", seed, rr.Path, rr.Status)
			}
			blk, fr := frozenRule(t, tab, rr)
			narrowAllow := rr.Scope != ServerScope
			for _, u := range uris {
				for _, who := range askers {
					if gatewayDecides(rt, blk, fr, rr.Scope, narrowAllow, who, "fs", table.Resource, u) {
						t.Fatalf("seed %d: %s %q called dead at the gateway, but it allows %q for %q\n%s",
							seed, rr.Path, rr.Entry.Pattern, u, who, dumpPolicy(tab))
					}
				}
			}
		}
		for _, d := range res.Diagnostics {
			if d.Code != CodeUIResourceDenied || !strings.Contains(d.Path, ".ui.allow_list[") {
				continue
			}
			deadUI++
			var e Entry
			for _, x := range s.UI.Allow {
				if x.Pos == d.Pos {
					e = x
				}
			}
			admits := func(u string) bool {
				if prefix, ok := strings.CutSuffix(e.Pattern, "*"); ok {
					return strings.HasPrefix(u, prefix)
				}
				return u == e.Pattern || strings.HasSuffix(e.Pattern, "/") && strings.HasPrefix(u, e.Pattern)
			}
			for _, u := range uris {
				for _, who := range askers {
					if admits(u) && rt.Decide(who, "fs", table.Resource, u).Effect == table.Allow {
						t.Fatalf("seed %d: %s called dead, but %q passes for %q\n%s", seed, d.Path, u, who, dumpPolicy(tab))
					}
				}
			}
		}
	}
	t.Logf("dead at the gateway: %d entries %v; dead ui entries: %d; reachable: %d", notNormal, byKind, deadUI, reachable)
	if notNormal == 0 || deadUI == 0 {
		t.Errorf("the generator must produce both findings")
	}
}

// TestNotNormalFindings: the entries of docs' example, each written out of
// normal form, allow nothing at the gateway; their normal forms do.
func TestNotNormalFindings(t *testing.T) {
	for _, tc := range []struct {
		pattern, want, normal string
	}{
		{`file:///srv/q\?*`, `as "file:///srv/q", which is denied`, ""},
		{"file:///srv/b/../c/*", `"." or ".." segments`, "file:///srv/c/*"},
		{"FILE:///srv/d/*", "scheme is not in lower case", "file:///srv/d/*"},
		{"file:///srv/e/%41*", "percent-escapes", "file:///srv/e/A*"},
		{"repo://Acme/*", "host is not in lower case", "repo://acme/*"},
		{"file://localhost/srv/*", "file://localhost/ is file:///", "file:///srv/*"},
		{"file:/srv/f/*", "written file:///path", "file:///srv/f/*"},
		{"https:///x/*", "has a host", ""},
		{"https://app", `empty path as "/"`, "https://app/"},
		{`file:///srv\\g/*`, "backslash", "file:///srv/g/*"},
		{"file:///srv//h/*", "empty segment", "file:///srv/h/*"},
	} {
		b := &uriBuilder{}
		p := newURIPolicy()
		p.Servers["fs"] = &Server{Name: "fs", Access: map[string]*Access{"resource": b.access("mcp_servers.fs.access", "", nil, []string{tc.pattern})}}
		res := AnalyzeReach(p, ReachOptions{})
		if len(res.Diagnostics) != 1 || res.Diagnostics[0].Code != CodeAllowNeverAllows || !strings.Contains(res.Diagnostics[0].Message, tc.want) {
			t.Errorf("%s: %v, want one %s saying %q", tc.pattern, res.Diagnostics, CodeAllowNeverAllows, tc.want)
			continue
		}
		if !res.Rules[0].NotNormal || res.Rules[0].Status != Unreachable {
			t.Errorf("%s: verdict %+v", tc.pattern, res.Rules[0])
		}
		if tc.normal == "" {
			continue
		}
		if !strings.Contains(res.Diagnostics[0].Suggestion, strconv.Quote(tc.normal)) {
			t.Errorf("%s: suggestion %q, want %q", tc.pattern, res.Diagnostics[0].Suggestion, tc.normal)
		}
		// Written in normal form, the entry allows what it was meant to.
		p.Servers["fs"].Access["resource"] = b.access("mcp_servers.fs.access", "", nil, []string{tc.normal})
		if res := AnalyzeReach(p, ReachOptions{}); len(res.Diagnostics) != 0 || res.Rules[0].Status != Reachable {
			t.Errorf("%s: normal form %s: %v", tc.pattern, tc.normal, res.Diagnostics)
		}
	}
	// An entry out of normal form that another rule backs is not dead:
	// the upper-case spelling of what file:///srv/* allows is allowed.
	b := &uriBuilder{}
	p := newURIPolicy()
	p.Servers["fs"] = &Server{Name: "fs", Access: map[string]*Access{"resource": b.access("mcp_servers.fs.access", "", nil, []string{"file:///srv/*", "FILE:///srv/*", `file:///t/q\?*`, "file:///t/q"})}}
	if res := AnalyzeReach(p, ReachOptions{}); len(res.Diagnostics) != 0 {
		t.Errorf("backed entries reported: %v", res.Diagnostics)
	}
	if d := loadPolicy(t, p).Decide("", "fs", table.Resource, "FILE:///srv/x"); d.Effect != table.Allow {
		t.Errorf("FILE:///srv/x: %v", d.Effect)
	}
}
