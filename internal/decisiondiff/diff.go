// Package decisiondiff compares two decision tables by what they decide, not
// by how they are written: for each principal class, server and kind, the
// names whose decision changes (allow → approve, deny → allow, …), and the
// rules added and removed with their origins.
//
// The comparison is exact. A decision depends only on which of the tables'
// patterns match a name, and within one scope block only on the set of
// (pattern, effect) pairs that match, so a name can change only inside the
// patterns of added or removed rules (or anywhere, when blocks or defaults
// differ). The package searches those regions with glob.Witness over the
// automata of every pattern that can meet them, until each glob with a
// changed name has a row, and the names no pattern matches have one when
// they change. Literal patterns are decided directly. Names are never
// sampled: if any name's decision changes, the report has a row. A search
// that exceeds glob's state budget is reported as undecided, never as "no
// change". Each row is confirmed by deciding its name on both sides.
//
// It reads tables only; it never compiles a policy and never evaluates CUE.
// It decides names itself, pattern by pattern, as decide.Table.Decide does
// (the tests hold the two to each other), rather than through decide.Load,
// whose automata it does not need.
package decisiondiff

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/policyc/policyc/internal/glob"
	"github.com/policyc/policyc/runtime/table"
)

// Items supplies names to compare besides the patterns of the two tables:
// the catalogued items of a server, where a catalogue snapshot exists.
// Every name it returns gets a row when its decision changes.
type Items interface {
	Names(server string, kind table.Kind) []string
}

// Options tune a comparison.
type Options struct {
	// Items, when set, adds catalogued names to the names compared.
	Items Items
	// Budget bounds the work of all the searches of one comparison, in
	// glob.Budget units; 0 means glob.DefaultBudget, as for lint's
	// analysis. Once it is spent, each search left is reported Undecided.
	Budget int64
}

// Side describes one of the two tables.
type Side struct {
	// Label is how the user named it: a revision or a file.
	Label      string `json:"label"`
	Commit     string `json:"commit,omitempty"`
	PolicyPath string `json:"policy_path"`
	Digest     string `json:"digest"`
	Serial     uint64 `json:"serial"`
	Dirty      bool   `json:"dirty,omitempty"`
}

// Decision is one side of a change.
type Decision struct {
	Effect string `json:"effect"`
	// Reason is "rule", "default", "unknown server", … (decide.Reason).
	Reason string `json:"reason"`
	// Scope decided: "server" for the server's own rules, "global",
	// "group:NAME" or "principal:NAME".
	Scope string `json:"scope,omitempty"`
	// List and Pattern are the deciding rule's, when a rule decided.
	List    string `json:"list,omitempty"`
	Pattern string `json:"pattern,omitempty"`
	// Origin is the file:line of the deciding rule or default, relative to
	// the policy path of its table.
	Origin string `json:"origin,omitempty"`
}

// How a changed name was found.
const (
	// FoundLiteral: the name is a literal pattern of one of the tables.
	FoundLiteral = "pattern"
	// FoundGlob: the name is a short name of Pattern whose decision
	// changes.
	FoundGlob = "glob"
	// FoundOther: the name matches no pattern of either table; its
	// decision comes from defaults, and so does every such name's.
	FoundOther = "unmatched"
	// FoundCatalogue: the name is a catalogued item.
	FoundCatalogue = "catalogue"
)

// Change is a name whose decision differs between the tables.
type Change struct {
	// Principals the change applies to. Empty means every principal that
	// no group or principal scope names for this server and kind, the
	// anonymous principal among them.
	Principals []string `json:"principals"`
	Server     string   `json:"server"`
	Kind       string   `json:"kind"`
	Name       string   `json:"name"`
	Found      string   `json:"found"`
	// Pattern is the glob Name stands for when Found is FoundGlob.
	Pattern string   `json:"pattern,omitempty"`
	Before  Decision `json:"before"`
	After   Decision `json:"after"`
}

// Rule is a rule present in one table and not the other.
type Rule struct {
	// Scope is "server" for a server's own rules, else the narrowing
	// scope's name.
	Scope string `json:"scope"`
	// Server is the server name, or "*" for a scope's rules on every
	// server.
	Server  string `json:"server"`
	Kind    string `json:"kind"`
	List    string `json:"list"`
	Pattern string `json:"pattern"`
	Origin  string `json:"origin"`
}

// Member is a principal added to or removed from a group.
type Member struct {
	Group     string `json:"group"`
	Principal string `json:"principal"`
}

// Undecided is a search that gave up: a change may hide there.
type Undecided struct {
	Principals []string `json:"principals"`
	Server     string   `json:"server"`
	Kind       string   `json:"kind"`
	Pattern    string   `json:"pattern"`
}

// Definition is a pinned definition (a catalogued tool, prompt, resource
// or resource template) that differs between the sides. Compare does not
// fill these: the caller compares the sides' catalogues.
type Definition struct {
	Server string `json:"server"`
	// Kind is "tool", "prompt", "resource" or "resource template".
	Kind string `json:"kind"`
	// Name is the item's name, a URI or URI template for resources.
	Name string `json:"name"`
	// Change is "added", "removed" or "changed".
	Change string `json:"change"`
	// What says what changed, as catalog pull --check words it; empty
	// when only the digests are known (a side is a table file).
	What string `json:"what,omitempty"`
	// OldDigest and NewDigest are the definition digests, each empty on
	// the side that has no such item.
	OldDigest string `json:"old_digest,omitempty"`
	NewDigest string `json:"new_digest,omitempty"`
	// DescriptionDiff is the description's word difference, removed
	// words as [-...-] and added ones as {+...+}, when it changed.
	DescriptionDiff string `json:"description_diff,omitempty"`
}

// Report is the result of Compare.
type Report struct {
	Old            Side        `json:"old"`
	New            Side        `json:"new"`
	Changes        []Change    `json:"changes"`
	RulesAdded     []Rule      `json:"rules_added"`
	RulesRemoved   []Rule      `json:"rules_removed"`
	MembersAdded   []Member    `json:"members_added"`
	MembersRemoved []Member    `json:"members_removed"`
	Undecided      []Undecided `json:"undecided"`
	// Definitions are the pinned definitions that change, last so that
	// the fields before keep their places.
	Definitions []Definition `json:"definitions"`
}

// Changed reports whether some decision or pinned definition changes, or
// a decision might (an undecided search counts: the report cannot say
// there is none).
func (r *Report) Changed() bool {
	return len(r.Changes) > 0 || len(r.Undecided) > 0 || len(r.Definitions) > 0
}

// Compare compares the decisions of two tables. Each is decided as
// decide.Table.Decide would decide it; a pattern that does not parse is an
// error, as it is for decide.Load.
func Compare(so, sn *table.Table, opts Options) (*Report, error) {
	rep := &Report{
		Old: sideOf(so), New: sideOf(sn),
		Changes: []Change{}, Undecided: []Undecided{}, Definitions: []Definition{},
	}
	rep.RulesAdded, rep.RulesRemoved = diffRules(so, sn)
	rep.MembersAdded, rep.MembersRemoved = diffMembers(so, sn)

	if opts.Budget <= 0 {
		opts.Budget = glob.DefaultBudget
	}
	search := glob.Search{Budget: glob.NewBudget(opts.Budget)}
	principals := namedPrincipals(so, sn)
	for _, server := range unionKeys(so.Servers, sn.Servers) {
		for k := table.Tool; k <= table.Resource; k++ {
			for _, cl := range classes(so, sn, principals, server, k) {
				b := &block{old: so, new: sn, server: server, kind: k, class: cl, opts: opts, bounds: search}
				if err := b.compare(rep); err != nil {
					return nil, err
				}
			}
		}
	}
	sortChanges(rep.Changes)
	return rep, nil
}

func sideOf(t *table.Table) Side {
	return Side{Commit: t.Source.Commit, PolicyPath: t.Source.PolicyPath, Digest: t.Digest, Serial: t.Serial, Dirty: t.Source.Dirty}
}

// class is a set of principals whose decisions for one server and kind are
// the same in both tables, because the same scopes apply to them.
type class struct {
	// principals is empty for the anonymous class.
	principals []string
	// rep is who to ask the runtime tables about: "" for the anonymous
	// class.
	rep string
}

// namedPrincipals are the principals some group or principal scope of
// either table names.
func namedPrincipals(ts ...*table.Table) []string {
	seen := map[string]bool{}
	for _, t := range ts {
		for _, sc := range t.Scopes {
			switch {
			case strings.HasPrefix(sc.Name, "group:"):
				for _, m := range sc.Members {
					if m != "" {
						seen[m] = true
					}
				}
			case strings.HasPrefix(sc.Name, "principal:"):
				if p := strings.TrimPrefix(sc.Name, "principal:"); p != "" {
					seen[p] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// layerKeys names the scope blocks that apply to principal for server and
// kind, in evaluation order.
func layerKeys(t *table.Table, principal, server string, kind table.Kind) string {
	var b strings.Builder
	for i := range t.Scopes {
		sc := &t.Scopes[i]
		if !sc.AppliesTo(principal) {
			continue
		}
		for _, key := range [2]string{table.AllServers, server} {
			if s, ok := sc.Servers[key]; ok && s.Kind(kind.String()) != nil {
				fmt.Fprintf(&b, "%s@%s;", sc.Name, key)
			}
		}
	}
	return b.String()
}

// classes partitions the principals by the scope blocks that apply to them
// in either table. The anonymous class comes first and takes every named
// principal that sees what it sees.
func classes(so, sn *table.Table, principals []string, server string, kind table.Kind) []class {
	key := func(p string) string {
		return layerKeys(so, p, server, kind) + "|" + layerKeys(sn, p, server, kind)
	}
	anon := key("")
	byKey := map[string]*class{}
	var out []*class
	for _, p := range principals {
		k := key(p)
		if k == anon {
			continue
		}
		c := byKey[k]
		if c == nil {
			c = &class{rep: p}
			byKey[k] = c
			out = append(out, c)
		}
		c.principals = append(c.principals, p)
	}
	res := []class{{}}
	for _, c := range out {
		res = append(res, *c)
	}
	return res
}

func unionKeys[V any](a, b map[string]V) []string {
	seen := map[string]bool{}
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

func sortChanges(cs []Change) {
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.Server != b.Server {
			return a.Server < b.Server
		}
		if ka, kb := kindRank(a.Kind), kindRank(b.Kind); ka != kb {
			return ka < kb
		}
		if pa, pb := strings.Join(a.Principals, ","), strings.Join(b.Principals, ","); pa != pb {
			return pa < pb
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Pattern < b.Pattern
	})
}

func kindRank(k string) int {
	kind, _ := table.ParseKind(k)
	return int(kind)
}

// listName is the policy key a rule of an effect is written under.
func listName(effect string) string {
	switch effect {
	case table.Deny.String():
		return "deny_list"
	case table.Approve.String():
		return "approval_list"
	}
	return "allow_list"
}

// globSyntax escapes the glob metacharacters of a literal string.
func globSyntax(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// uiGlob turns a ui allowlist entry into the glob matching the same URIs:
// "prefix*" and "prefix/" admit every URI with the prefix, anything else
// exactly itself (decide.compileUI).
func uiGlob(entry string) string {
	switch {
	case strings.HasSuffix(entry, "*"):
		return globSyntax(strings.TrimSuffix(entry, "*")) + "*"
	case strings.HasSuffix(entry, "/"):
		return globSyntax(entry) + "*"
	}
	return globSyntax(entry)
}

// parseGlob parses a pattern of a loaded table; decide.Load has already
// refused any that does not parse.
func parseGlob(s string) (*glob.Pattern, error) {
	p, err := glob.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("table pattern %q: %w", s, err)
	}
	return p, nil
}
