package decisiondiff

import (
	"sort"
	"strings"

	"github.com/policyc/policyc/runtime/table"
)

// ruleKey identifies a rule regardless of where it is written: moving a
// line neither adds nor removes a rule.
type ruleKey struct {
	scope, server, kind, list, pattern string
}

// rulesOf lists every rule of a table with its origin, by key.
func rulesOf(t *table.Table) map[ruleKey][]string {
	out := map[ruleKey][]string{}
	addServer := func(scope, name string, s table.Server) {
		for _, kind := range []string{table.Tool.String(), table.Prompt.String(), table.Resource.String()} {
			a := s.Kind(kind)
			if a == nil {
				continue
			}
			for _, r := range a.Rules {
				k := ruleKey{scope, name, kind, listName(r.Effect), r.Pattern}
				out[k] = append(out[k], r.Origin)
			}
		}
		if s.UI != nil {
			for _, p := range s.UI.AllowList {
				k := ruleKey{scope, name, table.Resource.String(), "ui.allow_list", p}
				out[k] = append(out[k], s.UI.Origin)
			}
		}
	}
	for name, s := range t.Servers {
		addServer("server", name, s)
	}
	for _, sc := range t.Scopes {
		for name, s := range sc.Servers {
			addServer(sc.Name, name, s)
		}
	}
	return out
}

// diffRules returns the rules only the new table has and those only the
// old one has. A rule present on both sides under the same key is neither,
// whatever its line; when a key occurs more often on one side, the extra
// occurrences are reported, preferring origins the other side lacks.
func diffRules(old, new *table.Table) (added, removed []Rule) {
	ro, rn := rulesOf(old), rulesOf(new)
	extra := func(k ruleKey, mine, theirs []string) []Rule {
		if len(mine) <= len(theirs) {
			return nil
		}
		left := map[string]int{}
		for _, o := range theirs {
			left[o]++
		}
		var unmatched, matched []string
		for _, o := range mine {
			if left[o] > 0 {
				left[o]--
				matched = append(matched, o)
			} else {
				unmatched = append(unmatched, o)
			}
		}
		origins := append(unmatched, matched...)[:len(mine)-len(theirs)]
		var out []Rule
		for _, o := range origins {
			out = append(out, Rule{Scope: k.scope, Server: k.server, Kind: k.kind, List: k.list, Pattern: k.pattern, Origin: o})
		}
		return out
	}
	added, removed = []Rule{}, []Rule{}
	for k, origins := range rn {
		added = append(added, extra(k, origins, ro[k])...)
	}
	for k, origins := range ro {
		removed = append(removed, extra(k, origins, rn[k])...)
	}
	sortRules(added)
	sortRules(removed)
	return added, removed
}

func sortRules(rs []Rule) {
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		for _, c := range [][2]string{{a.Server, b.Server}, {kindOrder(a.Kind), kindOrder(b.Kind)}, {scopeOrder(a.Scope), scopeOrder(b.Scope)}, {a.Origin, b.Origin}, {a.List, b.List}, {a.Pattern, b.Pattern}} {
			if c[0] != c[1] {
				return c[0] < c[1]
			}
		}
		return false
	})
}

func kindOrder(k string) string { return string(rune('0' + kindRank(k))) }

// scopeOrder sorts the server's own rules first, then global, groups and
// principals.
func scopeOrder(s string) string {
	switch {
	case s == "server":
		return "0"
	case s == "global":
		return "1"
	case strings.HasPrefix(s, "group:"):
		return "2" + s
	}
	return "3" + s
}

// diffMembers returns the group memberships only the new table has, and
// those only the old one has.
func diffMembers(old, new *table.Table) (added, removed []Member) {
	members := func(t *table.Table) map[Member]bool {
		m := map[Member]bool{}
		for _, sc := range t.Scopes {
			if g, ok := strings.CutPrefix(sc.Name, "group:"); ok {
				for _, p := range sc.Members {
					m[Member{Group: g, Principal: p}] = true
				}
			}
		}
		return m
	}
	mo, mn := members(old), members(new)
	added, removed = []Member{}, []Member{}
	for m := range mn {
		if !mo[m] {
			added = append(added, m)
		}
	}
	for m := range mo {
		if !mn[m] {
			removed = append(removed, m)
		}
	}
	sortMembers(added)
	sortMembers(removed)
	return added, removed
}

func sortMembers(ms []Member) {
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].Group != ms[j].Group {
			return ms[i].Group < ms[j].Group
		}
		return ms[i].Principal < ms[j].Principal
	})
}
