package compiler

import (
	"fmt"
	"net/netip"
	"net/url"
	"sort"
	"strings"

	"cuelang.org/go/cue"

	"github.com/policyc/policyc/internal/clip"
	"github.com/policyc/policyc/internal/glob"
	"github.com/policyc/policyc/runtime/table"
)

// Kinds in the order they are reported.
var Kinds = []string{table.Tool.String(), table.Prompt.String(), table.Resource.String()}

// Policy is a checked policy: what the sources say, with every value's
// position, before it is frozen into a table.
type Policy struct {
	// Defaults per kind; an entry is absent when the policy says nothing.
	Defaults map[string]Setting
	Channels map[string]*Channel
	Servers  map[string]*Server
	// Global is the global narrowing scope, or nil.
	Global *Scope
	// Groups and Principals are the other narrowing scopes by name.
	Groups     map[string]*Scope
	Principals map[string]*Scope
}

// Setting is a scalar value and where it was written.
type Setting struct {
	Value string
	Pos   Position
}

// Channel is an approval or consent channel.
type Channel struct {
	Name         string
	Kind         string
	URL          string
	ReachesHuman bool
	Pos          Position
}

// Server is the base scope of one upstream server.
type Server struct {
	Name   string
	Pos    Position
	Access map[string]*Access
	UI     *UI
	// Pins is the pins mode as written; nil when the policy sets none.
	Pins *Setting
	// Audit is set by audit: true; AuditPos is where.
	Audit    bool
	AuditPos Position
}

// UI is a server's ui:// allowlist.
type UI struct {
	Allow          []Entry
	ConsentChannel Setting
	Pos            Position
}

// Scope is a narrowing scope: global, a group or a principal. Servers holds
// the per-server blocks; table.AllServers the scope's own global block.
type Scope struct {
	// Name is "global", "group:NAME" or "principal:NAME".
	Name    string
	Members []string
	Servers map[string]*ScopeServer
}

// ScopeServer is a narrowing scope's rules for one server (or all).
type ScopeServer struct {
	Pos    Position
	Access map[string]*Access
}

// Access is the lists of one scope for one server and kind.
type Access struct {
	// Path is the key path of the block, e.g. mcp_servers.github.access.tool.
	Path     string
	Pos      Position
	Default  *Setting
	Allow    *List
	Deny     *List
	Approval *List
	// Timeout is approval_timeout_seconds, 0 when unset.
	Timeout    int
	TimeoutPos Position
	Channel    *Setting
}

// List is one allow_list, deny_list or approval_list.
type List struct {
	Key     string
	Path    string
	Pos     Position
	Entries []Entry
}

// Entry is one pattern of a list.
type Entry struct {
	Pattern string
	Glob    *glob.Pattern
	Pos     Position
	// Index is the entry's position in the list as written. Entries CUE or
	// the glob check refused are left out of List.Entries, so it can be
	// more than the entry's index there.
	Index int
}

// Effect of the entries of a list key.
func listEffect(key string) string {
	switch key {
	case "deny_list":
		return table.Deny.String()
	case "approval_list":
		return table.Approve.String()
	}
	return table.Allow.String()
}

// decoder reads the evaluated user value into a Policy. It assumes the
// value already unified with the schema, so types are right; what it checks
// is what CUE cannot: globs, channels, references.
type decoder struct {
	c *compilation
	// quiet suppresses type errors: set when CUE already reported some.
	quiet bool
}

func (d decoder) pos(v cue.Value, dotted string) Position {
	if p, ok := d.c.parsed.keyPos[dotted]; ok {
		return p
	}
	if p := posOf(v.Pos()); p.File != "" {
		return p
	}
	return d.c.keyPos(dotted)
}

func (d decoder) fields(v cue.Value) []string {
	if !v.Exists() || v.IncompleteKind() != cue.StructKind {
		return nil
	}
	it, err := v.Fields()
	if err != nil {
		return nil
	}
	var names []string
	for it.Next() {
		names = append(names, it.Selector().Unquoted())
	}
	sort.Strings(names)
	return names
}

func (d decoder) str(v cue.Value, dotted string) *Setting {
	if !v.Exists() {
		return nil
	}
	s, err := v.String()
	if err != nil {
		if d.quiet {
			return nil
		}
		d.c.add(Diagnostic{Pos: d.pos(v, dotted), Code: CodeType, Severity: Error, Path: dotted,
			Message: fmt.Sprintf("%s: %v", dotted, err)})
		return nil
	}
	return &Setting{Value: s, Pos: d.pos(v, dotted)}
}

func lookup(v cue.Value, key string) cue.Value { return v.LookupPath(cue.MakePath(cue.Str(key))) }

func (d decoder) policy(v cue.Value) *Policy {
	p := &Policy{
		Defaults:   map[string]Setting{},
		Channels:   map[string]*Channel{},
		Servers:    map[string]*Server{},
		Groups:     map[string]*Scope{},
		Principals: map[string]*Scope{},
	}
	defaults := lookup(v, "defaults")
	for _, k := range Kinds {
		if s := d.str(lookup(defaults, k), "defaults."+k); s != nil {
			p.Defaults[k] = *s
		}
	}
	channels := lookup(v, "approval_channels")
	for _, name := range d.fields(channels) {
		p.Channels[name] = d.channel(name, lookup(channels, name))
	}
	servers := lookup(v, "mcp_servers")
	for _, name := range d.fields(servers) {
		p.Servers[name] = d.server(name, lookup(servers, name))
	}
	if g := lookup(v, "global"); g.Exists() {
		p.Global = &Scope{Name: "global", Servers: map[string]*ScopeServer{}}
		if a := lookup(g, "access"); a.Exists() {
			p.Global.Servers[table.AllServers] = d.scopeServer(a, "global.access")
		}
	}
	groups := lookup(v, "groups")
	for _, name := range d.fields(groups) {
		p.Groups[name] = d.narrowing("group:"+name, lookup(groups, name), "groups."+name)
	}
	principals := lookup(v, "principals")
	for _, name := range d.fields(principals) {
		p.Principals[name] = d.narrowing("principal:"+name, lookup(principals, name), "principals."+name)
	}
	return p
}

func (d decoder) channel(name string, v cue.Value) *Channel {
	path := "approval_channels." + name
	ch := &Channel{Name: name, Pos: d.pos(v, path)}
	hook, page := lookup(v, "webhook"), lookup(v, "approvals_page")
	switch {
	case hook.Exists() && page.Exists():
		d.c.add(Diagnostic{Pos: ch.Pos, Code: CodeChannelKind, Severity: Error, Path: path,
			Message:    fmt.Sprintf("%s: a channel is either a webhook or the approvals page, not both", path),
			Suggestion: "split it into two channels"})
	case hook.Exists():
		ch.Kind = table.ChannelWebhook
		if u := d.str(lookup(hook, "url"), path+".webhook.url"); u != nil {
			ch.URL = u.Value
			if plainHTTPElsewhere(u.Value) && !d.quiet {
				d.c.add(Diagnostic{Pos: u.Pos, Code: CodeWebhookPlainHTTP, Severity: Warning, Path: path + ".webhook.url",
					Message:    fmt.Sprintf("%s.webhook.url: %s is plain http to another machine: the approval requests the gateway posts there, previews of the calls' arguments among them, travel in clear text", path, clip.Quote(u.Value)),
					Suggestion: "use an https:// URL (plain http only to this machine: localhost, 127.0.0.1 or [::1])"})
			}
		} else if !lookup(hook, "url").Exists() && !d.quiet {
			d.c.add(Diagnostic{Pos: d.pos(hook, path+".webhook"), Code: CodeType, Severity: Error, Path: path + ".webhook.url",
				Message:    fmt.Sprintf("%s.webhook: url is required", path),
				Suggestion: `add url: "https://…", the address the gateway POSTs approval requests to`})
		}
	case page.Exists():
		ch.Kind = table.ChannelApprovalsPage
		ch.ReachesHuman = true
	default:
		d.c.add(Diagnostic{Pos: ch.Pos, Code: CodeChannelKind, Severity: Error, Path: path,
			Message:    fmt.Sprintf("%s: a channel needs webhook or approvals_page", path),
			Suggestion: "add approvals_page: {} to use the gateway's approvals page, or webhook: url: \"https://…\""})
	}
	if rh := lookup(v, "reaches_human"); rh.Exists() {
		b, err := rh.Bool()
		if err == nil {
			ch.ReachesHuman = b
		}
	}
	return ch
}

func (d decoder) server(name string, v cue.Value) *Server {
	path := "mcp_servers." + name
	s := &Server{Name: name, Pos: d.pos(v, path), Access: map[string]*Access{}}
	access := lookup(v, "access")
	for _, k := range Kinds {
		if a := lookup(access, k); a.Exists() {
			s.Access[k] = d.access(a, path+".access."+k)
		}
	}
	if ui := lookup(v, "ui"); ui.Exists() {
		upath := path + ".ui"
		s.UI = &UI{Pos: d.pos(ui, upath)}
		if l := d.list(lookup(ui, "allow_list"), upath+".allow_list", "allow_list", false); l != nil {
			s.UI.Allow = l.Entries
			for _, e := range l.Entries {
				d.checkUIPattern(e, upath+".allow_list")
			}
		}
		if cc := d.str(lookup(ui, "consent_channel"), upath+".consent_channel"); cc != nil {
			s.UI.ConsentChannel = *cc
		}
	}
	s.Pins = d.str(lookup(v, "pins"), path+".pins")
	if a := lookup(v, "audit"); a.Exists() {
		if b, err := a.Bool(); err == nil && b {
			s.Audit, s.AuditPos = true, d.pos(a, path+".audit")
		}
	}
	return s
}

// checkUIPattern accepts exactly the three forms SEP-1865 allowlists use.
func (d decoder) checkUIPattern(e Entry, path string) {
	if !validUIEntry(e.Pattern) {
		d.c.add(Diagnostic{Pos: e.Pos, Code: CodeInvalidUIPattern, Severity: Error, Path: path,
			Message:    fmt.Sprintf("%s: %s is not an exact ui:// URI, a prefix ending in *, or a prefix ending in /", path, clip.Quote(e.Pattern)),
			Suggestion: `write "ui://server/app.html", "ui://server/app*" or "ui://server/"`})
	}
}

func (d decoder) narrowing(name string, v cue.Value, path string) *Scope {
	sc := &Scope{Name: name, Servers: map[string]*ScopeServer{}}
	if m := lookup(v, "members"); m.Exists() {
		it, _ := m.List()
		seen := map[string]bool{}
		for it.Next() {
			if s, err := it.Value().String(); err == nil && !seen[s] {
				seen[s] = true
				sc.Members = append(sc.Members, s)
			}
		}
		sort.Strings(sc.Members)
	}
	if a := lookup(lookup(v, "global"), "access"); a.Exists() {
		sc.Servers[table.AllServers] = d.scopeServer(a, path+".global.access")
	}
	servers := lookup(v, "mcp_servers")
	for _, s := range d.fields(servers) {
		spath := path + ".mcp_servers." + s
		ss := d.scopeServer(lookup(lookup(servers, s), "access"), spath+".access")
		ss.Pos = d.pos(lookup(servers, s), spath)
		sc.Servers[s] = ss
	}
	return sc
}

func (d decoder) scopeServer(access cue.Value, path string) *ScopeServer {
	ss := &ScopeServer{Pos: d.pos(access, path), Access: map[string]*Access{}}
	for _, k := range Kinds {
		if a := lookup(access, k); a.Exists() {
			ss.Access[k] = d.access(a, path+"."+k)
		}
	}
	return ss
}

func (d decoder) access(v cue.Value, path string) *Access {
	a := &Access{Path: path, Pos: d.pos(v, path)}
	a.Default = d.str(lookup(v, "default"), path+".default")
	a.Allow = d.list(lookup(v, "allow_list"), path+".allow_list", "allow_list", true)
	a.Deny = d.list(lookup(v, "deny_list"), path+".deny_list", "deny_list", true)
	a.Approval = d.list(lookup(v, "approval_list"), path+".approval_list", "approval_list", true)
	if t := lookup(v, "approval_timeout_seconds"); t.Exists() {
		if n, err := t.Int64(); err == nil {
			a.Timeout = int(n)
			a.TimeoutPos = d.pos(t, path+".approval_timeout_seconds")
		}
	}
	a.Channel = d.str(lookup(v, "approval_channel"), path+".approval_channel")
	return a
}

// list reads a list of patterns. With globs set each entry must be a valid,
// non-empty glob; ui allowlists are checked by their own rule.
func (d decoder) list(v cue.Value, path, key string, globs bool) *List {
	if !v.Exists() {
		return nil
	}
	l := &List{Key: key, Path: path, Pos: d.pos(v, path)}
	it, err := v.List()
	if err != nil {
		return l
	}
	for i := 0; it.Next(); i++ {
		ev := it.Value()
		epath := fmt.Sprintf("%s[%d]", path, i)
		s, err := ev.String()
		if err != nil {
			continue // a type error CUE already reported
		}
		e := Entry{Pattern: s, Pos: posOf(ev.Pos()), Index: i}
		if e.Pos.File == "" {
			e.Pos = l.Pos
		}
		if globs {
			g, err := glob.Parse(s)
			if err != nil {
				msg := err.Error()
				if s == "" {
					msg = "empty pattern: it matches no name"
				}
				d.c.add(Diagnostic{Pos: e.Pos, Code: CodeInvalidGlob, Severity: Error, Path: epath,
					Message:    fmt.Sprintf("%s: %s", epath, msg),
					Suggestion: "globs use * (any run of characters), ? (one character), [a-z] or [!a-z] (a class) and \\ to escape; remove the entry or fix it"})
				continue
			}
			e.Glob = g
		}
		l.Entries = append(l.Entries, e)
	}
	return l
}

// plainHTTPElsewhere reports whether raw is an http:// URL whose host is
// not this machine's loopback: what is posted there crosses a network
// unencrypted.
func plainHTTPElsewhere(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || !strings.EqualFold(u.Scheme, "http") {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err != nil || !ip.IsLoopback()
}
