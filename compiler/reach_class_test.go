package compiler

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// classesPolicy is a policy whose principal u<i> is in group g<k> exactly
// when bit k of i is set, for i < 64, and has a scope of its own when i is
// even. Group g<k> denies t<k> everywhere; u<i>'s own scope denies own<i>
// and holds t<i%6> for approval on server s, which it decides only when
// u<i> is not in g<i%6>; the global scope denies glob.
func classesPolicy(t *testing.T) *Policy {
	t.Helper()
	var src strings.Builder
	src.WriteString("package policy\n")
	src.WriteString("approval_channels: page: approvals_page: {}\n")
	src.WriteString("mcp_servers: s: access: tool: allow_list: [\"*\"]\n")
	src.WriteString("mcp_servers: r: access: tool: allow_list: [\"*\"]\n")
	src.WriteString("global: access: tool: {approval_channel: \"page\", deny_list: [\"glob\"]}\n")
	for k := range 6 {
		var members []string
		for i := range 64 {
			if i>>k&1 == 1 {
				members = append(members, fmt.Sprintf("%q", fmt.Sprintf("u%d", i)))
			}
		}
		fmt.Fprintf(&src, "groups: g%d: {members: [%s], global: access: tool: deny_list: [\"t%d\"]}\n", k, strings.Join(members, ", "), k)
	}
	for i := 0; i < 64; i += 2 {
		fmt.Fprintf(&src, "principals: u%d: mcp_servers: s: access: tool: {deny_list: [\"own%d\"], approval_list: [\"t%d\"]}\n", i, i, i%6)
	}
	res := Compile(Input{Files: []File{{Name: "classes.cue", Data: []byte(src.String())}}, Source: table.Source{PolicyPath: "classes"}})
	if res.Table == nil || res.Policy == nil {
		for _, d := range res.Diagnostics {
			t.Log(d.Format(""))
		}
		t.Fatal("the policy does not compile")
	}
	return res.Policy
}

// refClasses is the classes of p's named principals found the
// straightforward way: every scope is asked about every principal.
func refClasses(p *Policy) []*class {
	named := map[string]bool{}
	for _, g := range p.Groups {
		for _, m := range g.Members {
			named[m] = true
		}
	}
	for n := range p.Principals {
		named[n] = true
	}
	seen := map[string]bool{}
	var out []*class
	for _, name := range slices.Sorted(maps.Keys(named)) {
		if name == "" {
			continue
		}
		c := &class{principal: name, has: map[*Scope]bool{}}
		var key []string
		for _, sc := range p.scopes() {
			if appliesTo(sc, name) {
				c.scopes = append(c.scopes, sc)
				c.has[sc] = true
				key = append(key, sc.Name)
			}
		}
		if k := strings.Join(key, "\x00"); !seen[k] {
			seen[k] = true
			out = append(out, c)
		}
	}
	return out
}

// refClassesFor is classesFor over classes, every class compared with
// every other, and, for a group, the class of a principal in it by its
// token alone (anyone's scopes and the group's) when no listed principal
// is in that class.
func refClassesFor(anyone *class, classes []*class, b *rblock) []*class {
	if b.scope == nil || b.scope.Name == "global" {
		return []*class{anyone}
	}
	var cands, out []*class
	alone := false
	for _, c := range classes {
		if c.has[b.scope] {
			cands = append(cands, c)
			alone = alone || len(c.scopes) == len(anyone.scopes)+1
		}
	}
	if g, ok := strings.CutPrefix(b.scope.Name, "group:"); ok && !alone {
		c := &class{principal: " groups=" + g, scopes: append(slices.Clone(anyone.scopes), b.scope), has: maps.Clone(anyone.has)}
		c.has[b.scope] = true
		cands = append(cands, c)
	}
	for _, c := range cands {
		minimal := true
		for _, d := range cands {
			if d != c && len(d.scopes) < len(c.scopes) && subset(d, c) {
				minimal = false
			}
		}
		if minimal {
			out = append(out, c)
		}
	}
	return out
}

// describeClasses names each class by its principal and scopes.
func describeClasses(cs []*class) []string {
	var out []string
	for _, c := range cs {
		var names []string
		for _, sc := range c.scopes {
			names = append(names, sc.Name)
		}
		out = append(out, c.principal+": "+strings.Join(names, ", "))
	}
	return out
}

// checkClasses compares the analyzer's classes of p, and the classes it
// judges every block for, with the straightforward computation.
func checkClasses(t *testing.T, p *Policy) *analyzer {
	t.Helper()
	a := newAnalyzer(p)
	ref := refClasses(p)
	if got, want := describeClasses(a.classes), describeClasses(ref); !slices.Equal(got, want) {
		t.Fatalf("classes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got, want := describeClasses([]*class{a.anyone}), []string{": global"}; !slices.Equal(got, want) {
		t.Errorf("anyone's class: %q, want %q", got, want)
	}
	for _, b := range a.blocks {
		got, want := describeClasses(a.classesFor(b)), describeClasses(refClassesFor(a.anyone, ref, b))
		if !slices.Equal(got, want) {
			t.Errorf("%s %s %s: classes %q, want %q", b.scopeName, b.server, b.kind, got, want)
		}
		// A second call answers the same.
		if again := describeClasses(a.classesFor(b)); !slices.Equal(again, got) {
			t.Errorf("%s %s %s: classes %q, then %q", b.scopeName, b.server, b.kind, got, again)
		}
	}
	return a
}

// TestClassesOfOverlappingScopes checks the classes the analysis judges
// rules for, on a policy with overlapping groups and principal scopes,
// against every scope asked about every principal, and its verdicts
// against the runtime's decisions for every principal.
func TestClassesOfOverlappingScopes(t *testing.T) {
	p := classesPolicy(t)
	a := checkClasses(t, p)
	// 64 principals, each with a set of groups of its own.
	if len(a.classes) != 64 {
		t.Errorf("%d classes, want 64", len(a.classes))
	}

	res := AnalyzeReach(p, ReachOptions{})
	tab := Freeze(p, table.Source{PolicyPath: "classes"}, 1)
	rt, err := decide.Load(tab)
	if err != nil {
		t.Fatal(err)
	}
	<-rt.Ready()
	principals := []string{"", "nobody", " groups=g0,g5", "u1 groups=g4"}
	names := []string{"glob", "x"}
	for i := range 64 {
		principals = append(principals, fmt.Sprintf("u%d", i))
		names = append(names, fmt.Sprintf("own%d", i))
	}
	for k := range 6 {
		names = append(names, fmt.Sprintf("t%d", k))
		// In one group by its token alone, listed or not.
		principals = append(principals, fmt.Sprintf(" groups=g%d", k), fmt.Sprintf("u%d groups=g%d", 63-k, k))
	}
	var reachable, unreachable int
	for _, rr := range res.Rules {
		blk, fr := frozenRule(t, tab, rr)
		kind, _ := table.ParseKind(rr.Kind)
		narrowAllow := rr.Scope != ServerScope && rr.Effect == table.Allow.String()
		// u<i>'s approval of t<i%6> decides exactly when u<i> is not in
		// g<i%6>; every other rule decides for someone.
		want := Reachable
		var i int
		if _, err := fmt.Sscanf(rr.Scope, "principal:u%d", &i); err == nil && rr.Effect == table.Approve.String() && i>>(i%6)&1 == 1 {
			want = Unreachable
		}
		if rr.Status != want {
			t.Errorf("%s %s %q: %s, want %s", rr.Scope, rr.Path, rr.Entry.Pattern, rr.Status, want)
		}
		switch rr.Status {
		case Reachable:
			reachable++
			if !decidesOracle(rt, blk, fr, rr.Scope, narrowAllow, rr.Principal, rr.WitnessServer, kind, rr.Witness) {
				t.Errorf("%s %q called reachable, but it does not decide its witness %q on %s for principal %q", rr.Path, rr.Entry.Pattern, rr.Witness, rr.WitnessServer, rr.Principal)
			}
		case Unreachable:
			unreachable++
			for _, server := range []string{"r", "s"} {
				if !appliesToServer(rr, server) {
					continue
				}
				for _, principal := range principals {
					for _, name := range names {
						if decidesOracle(rt, blk, fr, rr.Scope, narrowAllow, principal, server, kind, name) {
							t.Fatalf("%s %q called unreachable, but it decides %q on %s for principal %q", rr.Path, rr.Entry.Pattern, name, server, principal)
						}
					}
				}
			}
		}
	}
	if reachable == 0 || unreachable == 0 {
		t.Errorf("%d rules reachable, %d unreachable: want both", reachable, unreachable)
	}
}

// TestClassesOfUnsortedMembers checks the classes of a policy whose groups
// list members out of order and twice, as a Policy built by hand may: they
// are the classes the binary search of appliesTo finds, as before.
func TestClassesOfUnsortedMembers(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	p := classesPolicy(t)
	sorted := map[*Scope][]string{}
	for _, g := range p.Groups {
		sorted[g] = g.Members
	}
	for range 20 {
		for _, g := range p.Groups {
			g.Members = slices.Clone(sorted[g])
			if r.IntN(2) == 0 {
				g.Members = append(g.Members, g.Members[r.IntN(len(g.Members))], "u99")
				r.Shuffle(len(g.Members), func(i, j int) { g.Members[i], g.Members[j] = g.Members[j], g.Members[i] })
			}
		}
		checkClasses(t, p)
	}
}

// appliesTo is the reference the tests compare the classes with: whether
// scope sc applies to principal, asked of the scope directly.
func appliesTo(sc *Scope, principal string) bool {
	switch {
	case sc.Name == "global":
		return true
	case strings.HasPrefix(sc.Name, "group:"):
		_, ok := slices.BinarySearch(sc.Members, principal)
		return ok
	case strings.HasPrefix(sc.Name, "principal:"):
		return sc.Name == "principal:"+principal
	}
	return false
}
