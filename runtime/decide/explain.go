package decide

import "github.com/policyc/policyc/runtime/table"

// Match is a rule that matched a name, in some scope.
type Match struct {
	Scope  string       `json:"scope"`
	Effect table.Effect `json:"effect"`
	Rule   *table.Rule  `json:"rule"`
}

// Explanation is a decision with the rules it beat: every other rule, in any
// scope that applies, that matched the name.
type Explanation struct {
	Decision Decision
	// Scopes are the scopes that applied, in evaluation order.
	Scopes []string
	// Beaten are the matching rules that did not decide.
	Beaten []Match
	// Normal is the normal form of a resource URI that is not in normal
	// form, decided too (see Decide); "" otherwise.
	Normal string
}

// Explain decides like Decide and also lists the rules the decision beat.
// It is for people and allocates; the gateway calls Decide.
func (t *Table) Explain(principal, server string, kind table.Kind, name string) Explanation {
	ex := Explanation{Decision: t.Decide(principal, server, kind, name)}
	if kind >= table.NumKinds {
		return ex
	}
	if kind == table.Resource {
		if n, ok := normalURI(name); ok && n != name {
			ex.Normal = n
		}
	}
	srv, narrowing := t.serverOf(principal, server, kind)
	if srv == nil {
		return ex
	}
	for _, l := range append([]*layer{&srv.kinds[kind]}, narrowing...) {
		if len(ex.Scopes) == 0 || ex.Scopes[len(ex.Scopes)-1] != l.scope {
			ex.Scopes = append(ex.Scopes, l.scope)
		}
		for i, p := range l.pats {
			if !p.Match(name) || &l.rules[i] == ex.Decision.Rule {
				continue
			}
			ex.Beaten = append(ex.Beaten, Match{Scope: l.scope, Effect: l.hot[i].effect, Rule: &l.rules[i]})
		}
	}
	return ex
}
