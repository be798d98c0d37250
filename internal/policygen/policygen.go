// Package policygen generates large, realistic policies for benchmarks and
// load tests: many servers, each with a mix of literal and glob rules across
// deny, approval and allow lists. Output is deterministic for a seed.
package policygen

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/policyc/policyc/compiler"
)

var (
	verbs = []string{"get", "list", "search", "create", "update", "delete", "merge", "close", "open", "read", "write", "move", "sync", "export", "import"}
	nouns = []string{"issue", "comment", "pull_request", "branch", "file", "project", "team", "user", "label", "milestone", "release", "secret", "webhook", "entity", "relation"}
)

// Spec says how big a policy to generate.
type Spec struct {
	Servers        int
	RulesPerServer int
	// GlobShare is the fraction of rules that are globs (0.6 by default).
	GlobShare float64
	// Groups is the number of principal groups, each with two members and
	// a global tool layer that narrows every server (deny and approval
	// globs). Zero generates none; the servers do not depend on it.
	Groups int
	Seed   uint64
}

// Policy is a generated policy: its CUE sources and names worth asking
// about (a mix of names that rules match and names they do not).
type Policy struct {
	Files   []compiler.File
	Servers []string
	Names   []string
	Rules   int
	// Members lists the groups' members, in group order.
	Members []string
}

// Generate builds the policy of spec: one file per server plus a file with
// the channels, so it has the shape of a real policy repository.
func Generate(spec Spec) Policy {
	if spec.GlobShare == 0 {
		spec.GlobShare = 0.6
	}
	r := rand.New(rand.NewPCG(spec.Seed, 0x9e3779b97f4a7c15))
	p := Policy{}
	p.Files = append(p.Files, compiler.File{Name: "channels.cue", Data: []byte(`package policy

approval_channels: page: approvals_page: {}
global: access: tool: approval_channel: "page"
`)})
	for _, v := range verbs {
		for _, n := range nouns {
			p.Names = append(p.Names, v+"_"+n)
		}
	}
	p.Names = append(p.Names, "zz_unmatched_tool", "get", "x")
	for s := 0; s < spec.Servers; s++ {
		name := fmt.Sprintf("srv%03d", s)
		p.Servers = append(p.Servers, name)
		lists := map[string][]string{}
		seen := map[string]bool{}
		for len(seen) < spec.RulesPerServer {
			var pat string
			if r.Float64() < spec.GlobShare {
				pat = globPattern(r)
			} else {
				pat = verbs[r.IntN(len(verbs))] + "_" + nouns[r.IntN(len(nouns))] + fmt.Sprintf("_%d", r.IntN(50))
			}
			if seen[pat] {
				continue
			}
			seen[pat] = true
			list := []string{"deny_list", "approval_list", "allow_list", "allow_list"}[r.IntN(4)]
			lists[list] = append(lists[list], pat)
		}
		p.Rules += len(seen)
		var b strings.Builder
		fmt.Fprintf(&b, "package policy\n\nmcp_servers: %q: access: tool: {\n", name)
		for _, list := range []string{"deny_list", "approval_list", "allow_list"} {
			if len(lists[list]) == 0 {
				continue
			}
			fmt.Fprintf(&b, "\t%s: [\n", list)
			for _, pat := range lists[list] {
				fmt.Fprintf(&b, "\t\t%q,\n", pat)
			}
			b.WriteString("\t]\n")
		}
		b.WriteString("}\n")
		p.Files = append(p.Files, compiler.File{Name: name + ".cue", Data: []byte(b.String())})
	}
	if spec.Groups > 0 {
		p.Files = append(p.Files, groups(&p, spec))
	}
	return p
}

// groups generates spec.Groups groups, from a random stream of their own
// so that the servers are the same with or without them.
func groups(p *Policy, spec Spec) compiler.File {
	r := rand.New(rand.NewPCG(spec.Seed, 0x5bd1e9955bd1e995))
	var b strings.Builder
	b.WriteString("package policy\n\ngroups: {\n")
	for g := range spec.Groups {
		m0, m1 := fmt.Sprintf("user%03d@example.com", 2*g), fmt.Sprintf("user%03d@example.com", 2*g+1)
		p.Members = append(p.Members, m0, m1)
		fmt.Fprintf(&b, "\t%q: {\n\t\tmembers: [%q, %q]\n\t\tglobal: access: tool: {\n", fmt.Sprintf("team%03d", g), m0, m1)
		fmt.Fprintf(&b, "\t\t\tdeny_list: [%q, %q]\n", verbs[r.IntN(len(verbs))]+"_*", "*_"+nouns[r.IntN(len(nouns))])
		fmt.Fprintf(&b, "\t\t\tapproval_list: [%q]\n", verbs[r.IntN(len(verbs))]+"_*")
		b.WriteString("\t\t}\n\t}\n")
	}
	b.WriteString("}\n")
	return compiler.File{Name: "groups.cue", Data: []byte(b.String())}
}

func globPattern(r *rand.Rand) string {
	v, n := verbs[r.IntN(len(verbs))], nouns[r.IntN(len(nouns))]
	switch r.IntN(6) {
	case 0:
		return v + "_*"
	case 1:
		return "*_" + n
	case 2:
		return v + "_" + n[:1] + "?" + n[min(2, len(n)):] + "*"
	case 3:
		return "[a-m]*_" + n
	case 4:
		return v + "_*_" + fmt.Sprint(r.IntN(10))
	default:
		return "*" + n[:3] + "*"
	}
}

// LongGlobs is a policy whose global tool allow_list holds n random globs
// of about length elements each (literals a-d, ? and *), over one server
// that allows every tool: the shape that makes the reachability analysis's
// product automaton widest, since every server block is compared with all
// of them at once.
func LongGlobs(n, length int, seed uint64) []compiler.File {
	r := rand.New(rand.NewPCG(seed, 0x2545f4914f6cdd1d))
	var b strings.Builder
	b.WriteString("package policy\n\nmcp_servers: s: access: tool: allow_list: [\"*\"]\nglobal: access: tool: allow_list: [\n")
	for range n {
		var p []byte
		for len(p) < length {
			switch x := r.IntN(10); {
			case x == 0:
				if len(p) == 0 || p[len(p)-1] != '*' {
					p = append(p, '*')
				}
			case x == 1:
				p = append(p, '?')
			default:
				p = append(p, byte('a'+r.IntN(4)))
			}
		}
		fmt.Fprintf(&b, "\t%q,\n", p)
	}
	b.WriteString("]\n")
	return []compiler.File{{Name: "policy.cue", Data: []byte(b.String())}}
}

// Prefixes is a policy with one server whose tool allow_list holds the n
// globs t0_*, t1_*, ...: many simple patterns in one block.
func Prefixes(n int) []compiler.File {
	var b strings.Builder
	b.WriteString("package policy\n\nmcp_servers: s: access: tool: allow_list: [\n")
	for i := range n {
		fmt.Fprintf(&b, "\t\"t%d_*\",\n", i)
	}
	b.WriteString("]\n")
	return []compiler.File{{Name: "policy.cue", Data: []byte(b.String())}}
}

// Suffixes is Prefixes with the globs *_t0, *_t1, ...
func Suffixes(n int) []compiler.File { return affixed(n, "*_t%d") }

// Infixes is Prefixes with the globs *_t0_*, *_t1_*, ...: neither a
// literal prefix nor a suffix tells them apart, so every one may match
// what another matches.
func Infixes(n int) []compiler.File { return affixed(n, "*_t%d_*") }

func affixed(n int, format string) []compiler.File {
	var b strings.Builder
	b.WriteString("package policy\n\nmcp_servers: s: access: tool: allow_list: [\n")
	for i := range n {
		fmt.Fprintf(&b, "\t%q,\n", fmt.Sprintf(format, i))
	}
	b.WriteString("]\n")
	return []compiler.File{{Name: "policy.cue", Data: []byte(b.String())}}
}
