package compiler

import (
	"fmt"
	"sort"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// Freeze turns a checked policy into a decision table. The table holds no
// clock time: two freezes of the same policy are identical.
func Freeze(p *Policy, src table.Source, serial uint64) *table.Table {
	t := &table.Table{
		Channels: map[string]table.Channel{},
		Compiler: "policyc " + Version,
		Format:   table.Format,
		Scopes:   []table.Scope{},
		Serial:   serial,
		Servers:  map[string]table.Server{},
		Source:   src,
	}
	for name, ch := range p.Channels {
		t.Channels[name] = table.Channel{Kind: ch.Kind, Origin: ch.Pos.Origin(), ReachesHuman: ch.ReachesHuman, URL: ch.URL}
	}
	var globalTool *Access
	if p.Global != nil && p.Global.Servers[table.AllServers] != nil {
		globalTool = p.Global.Servers[table.AllServers].Access[table.Tool.String()]
	}
	for name, s := range p.Servers {
		var ts table.Server
		for _, k := range Kinds {
			a := baseAccess(p, s, k)
			if k == table.Tool.String() {
				a.ApprovalTimeoutSeconds = DefaultApprovalTimeout
				if src := s.Access[k]; src != nil && src.Timeout > 0 {
					a.ApprovalTimeoutSeconds = src.Timeout
				}
				switch {
				case s.Access[k] != nil && s.Access[k].Channel != nil:
					a.ApprovalChannel = s.Access[k].Channel.Value
				case globalTool != nil && globalTool.Channel != nil:
					a.ApprovalChannel = globalTool.Channel.Value
				}
			}
			setKind(&ts, k, a)
		}
		if s.UI != nil && len(s.UI.Allow) > 0 {
			ui := &table.UI{AllowList: []string{}, ConsentChannel: s.UI.ConsentChannel.Value, Origin: s.UI.Pos.Origin()}
			for _, e := range s.UI.Allow {
				ui.AllowList = append(ui.AllowList, e.Pattern)
			}
			ts.UI = ui
		}
		if s.Pins != nil {
			ts.Pins = s.Pins.Value
		}
		ts.Audit = s.Audit
		t.Servers[name] = ts
	}
	for _, sc := range p.scopes() {
		ts := table.Scope{Name: sc.Name, Members: sc.Members, Servers: map[string]table.Server{}}
		for sname, ss := range sc.Servers {
			var srv table.Server
			for _, k := range Kinds {
				if a := ss.Access[k]; a != nil {
					setKind(&srv, k, narrowAccess(a))
				}
			}
			ts.Servers[sname] = srv
		}
		t.Scopes = append(t.Scopes, ts)
	}
	return t
}

func setKind(s *table.Server, kind string, a *table.Access) {
	switch kind {
	case table.Tool.String():
		s.Tool = a
	case table.Prompt.String():
		s.Prompt = a
	case table.Resource.String():
		s.Resource = a
	}
}

// baseAccess is a server's own rules for a kind, with the default resolved:
// the server's default, else the policy's default for the kind, else deny.
func baseAccess(p *Policy, s *Server, kind string) *table.Access {
	a := &table.Access{Default: table.Deny.String(), Rules: []table.Rule{}}
	if d, ok := p.Defaults[kind]; ok {
		a.Default, a.DefaultOrigin = d.Value, d.Pos.Origin()
	}
	src := s.Access[kind]
	if src == nil {
		return a
	}
	if src.Default != nil {
		a.Default, a.DefaultOrigin = src.Default.Value, src.Default.Pos.Origin()
	}
	a.Rules = rules(src)
	return a
}

// narrowAccess is a narrowing scope's rules for a kind. Its default takes
// nothing away unless it has an allow_list, which restricts it to the names
// on the list.
func narrowAccess(src *Access) *table.Access {
	a := &table.Access{Default: table.Allow.String(), Rules: rules(src), ApprovalTimeoutSeconds: src.Timeout}
	if src.Allow != nil {
		a.Default, a.DefaultOrigin = table.Deny.String(), src.Allow.Pos.Origin()
	}
	return a
}

// rules orders a block's entries by precedence: deny, approve, allow, each
// in source order.
func rules(src *Access) []table.Rule {
	out := []table.Rule{}
	for _, l := range []*List{src.Deny, src.Approval, src.Allow} {
		if l == nil {
			continue
		}
		for _, e := range l.Entries {
			out = append(out, table.Rule{Effect: listEffect(l.Key), Origin: e.Pos.Origin(), Pattern: e.Pattern})
		}
	}
	return out
}

// OrderedLists returns a block's lists in precedence order, skipping absent
// ones; rule i of the frozen block is the i-th entry across them.
func (a *Access) OrderedLists() []*List {
	var out []*List
	for _, l := range []*List{a.Deny, a.Approval, a.Allow} {
		if l != nil {
			out = append(out, l)
		}
	}
	return out
}

// FreezeItems decides every item of a catalogue with table t, for a
// principal with no group or principal scope of their own and then for
// each principal that has some, and returns the decisions sorted by
// server, kind, name and principal. A named principal's decision is listed
// only where its effect or deciding rule differs from the one without a
// principal, so the list grows with what scopes change, not with the
// number of principals. An item of a server the policy does not define is
// denied, as the gateway denies it. The decisions come from the runtime
// that enforces the table, so they cannot disagree with it.
func FreezeItems(t *table.Table, cat *catalog.Catalog) ([]table.Item, error) {
	rt, err := decide.LoadForInspection(t)
	if err != nil {
		return nil, err
	}
	items := []table.Item{}
	principals := rt.Principals()
	for it := range cat.Items() {
		kind, ok := table.ParseKind(it.Kind)
		if !ok {
			return nil, fmt.Errorf("catalogue item %s %q: unknown kind %q", it.Server, it.Name, it.Kind)
		}
		d := rt.Decide("", it.Server, kind, it.Name)
		ti := table.Item{Decision: d.Effect.String(), DefinitionDigest: it.DefinitionDigest(), Kind: it.Kind, Name: it.Name, Origin: d.Origin, Server: it.Server}
		if it.Tool != nil {
			ti.InputSchemaDigest = it.Tool.InputSchemaDigest()
		}
		items = append(items, ti)
		for _, p := range principals {
			if pd := rt.Decide(p, it.Server, kind, it.Name); pd.Effect != d.Effect || pd.Origin != d.Origin {
				pi := ti
				pi.Decision, pi.Origin, pi.Principal = pd.Effect.String(), pd.Origin, p
				items = append(items, pi)
			}
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Less(items[j]) })
	return items, nil
}
