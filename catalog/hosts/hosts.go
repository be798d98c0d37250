// Package hosts carries a decision table into the permission settings of
// MCP hosts, Claude Code and Cursor, as a second belt in front of the
// gateway.
//
// A host's rules are much weaker than a table: Claude Code names a whole
// server or one tool exactly, and asks about any tool no rule names; Cursor
// only lists tools that run without asking. Globs are expanded over the
// catalogued tools (package catalog), and where a host cannot say what the
// table says, the export says something stricter when the host can, and
// reports every place where it cannot. It never turns a decision into a
// looser one silently.
package hosts

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/internal/glob"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// Looser is a place where the host answers more than the table does,
// because the host cannot express the table's answer.
type Looser struct {
	// Server is the server, or "" for every server the table and the
	// catalogue do not name.
	Server string
	// Tool is the tool, or "" for the tools of Server no rule lists.
	Tool string
	// Table and Host are the two answers.
	Table, Host table.Effect
}

// Export is the outcome of an export.
type Export struct {
	// File is the settings to write.
	File []byte
	// Notes say what the host cannot express and what the export did
	// instead, one sentence each.
	Notes []string
	// Looser lists every catalogued tool (and every server's unlisted
	// tools) the host answers more loosely than the table.
	Looser []Looser
	// Coarse lists the servers the export denies whole because no
	// catalogue lists their tools to expand a deny pattern over: the host
	// then blocks tools the table allows. The command refuses such an
	// export unless asked for it.
	Coarse []Coarse
}

// Coarse is a server denied whole for want of its catalogue.
type Coarse struct {
	Server string
	// Rule is the host's rule that denies it; Patterns the deny patterns
	// that could not be expanded.
	Rule     string
	Patterns []string
}

// plan is what the table says about the tools of one server, for one
// principal.
type plan struct {
	server string
	// inTable is false for a catalogued server the table does not know:
	// the table denies everything on it.
	inTable bool
	// constant is set when every tool of the server gets the same
	// decision, effect.
	constant bool
	effect   table.Effect
	// names are the tools decided one by one: the catalogued ones and the
	// literal patterns of the rules. decisions holds their decisions.
	names     []string
	decisions map[string]table.Effect
	// catalogued is set when the server has a catalogue snapshot.
	catalogued bool
	// unlisted is the set of decisions a tool outside names may get.
	unlisted map[table.Effect]bool
	// globs are the non-literal patterns that decide, by effect, for notes.
	globs map[table.Effect][]string
	// defaultDeny is set when a layer denies what its rules do not name.
	defaultDeny bool
}

// outside says, for notes, which of the server's tools are not in names.
func (p *plan) outside() string {
	if p.catalogued {
		return "tools outside the catalogue"
	}
	return "tools no rule lists"
}

// plans analyses every server of the table and of the catalogue.
func plans(t *decide.Table, cat *catalog.Catalog, principal string) []*plan {
	src := t.Source()
	servers := map[string]bool{}
	for name := range src.Servers {
		servers[name] = true
	}
	if cat != nil {
		for name := range cat.Servers {
			servers[name] = true
		}
	}
	names := slices.Sorted(maps.Keys(servers))
	var out []*plan
	for _, name := range names {
		out = append(out, analyse(t, cat, principal, name))
	}
	return out
}

func analyse(t *decide.Table, cat *catalog.Catalog, principal, server string) *plan {
	p := &plan{server: server, decisions: map[string]table.Effect{}, unlisted: map[table.Effect]bool{}, globs: map[table.Effect][]string{}}
	_, p.inTable = t.Source().Servers[server]
	if cat != nil && cat.Servers[server] != nil {
		p.catalogued = true
	}
	if !p.inTable {
		p.constant, p.effect = true, table.Deny
		return p
	}
	layers := toolLayers(t.Source(), principal, server)
	named := map[string]bool{}
	uniform := true
	for _, l := range layers {
		def, _ := table.ParseEffect(l.Default)
		p.unlisted[def] = true
		p.defaultDeny = p.defaultDeny || def == table.Deny
		for _, r := range l.Rules {
			e, _ := table.ParseEffect(r.Effect)
			if e != def {
				uniform = false
			}
			g, err := glob.Parse(r.Pattern)
			if err != nil {
				continue // the runtime refused such a table already
			}
			if lit, ok := g.Literal(); ok {
				named[lit] = true
			} else {
				p.unlisted[e] = true
				p.globs[e] = append(p.globs[e], r.Pattern)
			}
		}
	}
	if uniform {
		p.constant = true
		p.effect = t.Decide(principal, server, table.Tool, "").Effect
		return p
	}
	if p.catalogued {
		for _, n := range cat.ItemNames(server, table.Tool.String()) {
			named[n] = true
		}
	}
	for n := range named {
		p.names = append(p.names, n)
		p.decisions[n] = t.Decide(principal, server, table.Tool, n).Effect
	}
	sort.Strings(p.names)
	return p
}

// toolLayers are the tool blocks that decide for principal on server, as
// the runtime combines them: the server's own, then every narrowing scope
// that applies to the principal (global, its groups, its own).
func toolLayers(src *table.Table, principal, server string) []*table.Access {
	s := src.Servers[server]
	layers := []*table.Access{s.Tool}
	for i := range src.Scopes {
		sc := &src.Scopes[i]
		if !sc.AppliesTo(principal) {
			continue
		}
		for _, key := range []string{table.AllServers, server} {
			if ss, ok := sc.Servers[key]; ok && ss.Tool != nil {
				layers = append(layers, ss.Tool)
			}
		}
	}
	return layers
}

// minUnlisted is the least access a tool outside the plan's names may get.
func (p *plan) minUnlisted() table.Effect {
	for _, e := range []table.Effect{table.Deny, table.Approve, table.Allow} {
		if p.unlisted[e] {
			return e
		}
	}
	return table.Allow
}

// effectWord names an effect in the words of the notes.
func effectWord(e table.Effect) string {
	switch e {
	case table.Deny:
		return "denies"
	case table.Approve:
		return "holds for approval"
	}
	return "allows"
}

func quoteList(items []string, n int) string {
	q := make([]string, 0, len(items))
	for _, it := range items {
		q = append(q, fmt.Sprintf("%q", it))
	}
	if len(q) <= n {
		return strings.Join(q, ", ")
	}
	return strings.Join(q[:n], ", ") + fmt.Sprintf(" and %d more", len(q)-n)
}
