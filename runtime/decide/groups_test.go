package decide_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/policyc/policyc/internal/policygen"
	"github.com/policyc/policyc/internal/policytest"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/principal"
	"github.com/policyc/policyc/runtime/table"
)

// claimed is the principal reference of a token of name with groups.
func claimed(name string, groups ...string) string {
	slices.Sort(groups)
	return principal.Ref(principal.Parts{Name: name, Groups: groups, Issuer: "https://idp.example.com", Subject: "sub-" + name})
}

// A group from a token narrows exactly as listed membership does: a
// principal the policy does not name, in group g by its token, decides as
// g's listed members do, for every item of every server.
func TestClaimedGroupDecidesAsListed(t *testing.T) {
	rt, gen := loadSpec(t, policygen.Spec{Servers: 6, RulesPerServer: 30, Groups: 4, Seed: 3})
	for g := range 4 {
		group := fmt.Sprintf("team%03d", g)
		member := gen.Members[2*g]
		ref := claimed("stranger@example.com", group)
		if rt.ClassOf(ref) != rt.ClassOf(member) {
			t.Errorf("%s by its token is not of the class of %s, a listed member", group, member)
		}
		for _, server := range gen.Servers {
			for _, name := range gen.Names[:50] {
				want, got := rt.Decide(member, server, table.Tool, name), rt.Decide(ref, server, table.Tool, name)
				if got != want {
					t.Fatalf("%s %s as %s by token: %+v; as a listed member: %+v", server, name, group, got, want)
				}
			}
		}
	}
	// The issuer and subject decide nothing.
	if rt.ClassOf(claimed("a", "team001")) != rt.ClassOf(principal.Ref(principal.Parts{Name: "a", Groups: []string{"team001"}})) {
		t.Error("the issuer and subject changed the class")
	}
	// No group: the name's own view.
	if rt.ClassOf(claimed(gen.Members[3])) != rt.ClassOf(gen.Members[3]) || rt.ClassOf(claimed("nobody")) != rt.ClassOf("") {
		t.Error("a reference without groups is not decided as its name")
	}
}

func TestClaimedGroupsAddToListed(t *testing.T) {
	rt, err := decide.LoadForInspection(policytest.Compile(t, `package policy
mcp_servers: github: access: tool: allow_list: ["*"]
groups: contractors: {members: ["carol"], mcp_servers: github: access: tool: deny_list: ["delete_*"]}
groups: quiet: {members: [], mcp_servers: github: access: tool: deny_list: ["list_*"]}
principals: carol: mcp_servers: github: access: tool: deny_list: ["merge_*"]
`, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who, name string
		want      table.Effect
		scope     string
	}{
		{claimed("carol", "quiet"), "list_issues", table.Deny, "group:quiet"},            // from the token
		{claimed("carol", "quiet"), "delete_branch", table.Deny, "group:contractors"},    // listed
		{claimed("carol", "quiet"), "merge_pull_request", table.Deny, "principal:carol"}, // her own scope
		{claimed("carol", "quiet"), "create_issue", table.Allow, "server"},
		{claimed("dave", "quiet", "contractors"), "delete_branch", table.Deny, "group:contractors"},
		{claimed("dave", "ghosts"), "delete_branch", table.Allow, "server"}, // a group the table lacks narrows nothing
		{principal.Ref(principal.Parts{Groups: []string{"contractors"}}), "delete_branch", table.Deny, "group:contractors"},
	} {
		d := rt.Decide(tc.who, "github", table.Tool, tc.name)
		if d.Effect != tc.want || d.Scope != tc.scope {
			t.Errorf("%q %s: %s (%s), want %s (%s)", tc.who, tc.name, d.Effect, d.Scope, tc.want, tc.scope)
		}
	}
	ex := rt.Explain(claimed("carol", "quiet"), "github", table.Tool, "list_issues")
	if !slices.Equal(ex.Scopes, []string{"server", "group:contractors", "group:quiet", "principal:carol"}) {
		t.Errorf("explain's scopes: %q", ex.Scopes)
	}
}

// A decision for a claimed group set seen before allocates nothing.
func TestClaimedGroupsAllocateNothing(t *testing.T) {
	rt, gen := loadSpec(t, policygen.Spec{Servers: 5, RulesPerServer: 35, Groups: 3, Seed: 1})
	refs := []string{claimed("agent", "team001"), claimed(gen.Members[0], "team002"), claimed("x", "team000", "team002")}
	for _, r := range refs {
		rt.Decide(r, gen.Servers[1], table.Tool, gen.Names[0])
	}
	allocs := testing.AllocsPerRun(200, func() {
		for _, r := range refs {
			for _, n := range gen.Names[:20] {
				rt.Decide(r, gen.Servers[1], table.Tool, n)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("Decide for a claimed group set allocates %.1f times per run; want 0", allocs)
	}
}

// Many goroutines asking about new group sets at once get one view per
// set, the same for all.
func TestClaimedGroupsConcurrent(t *testing.T) {
	rt, gen := loadSpec(t, policygen.Spec{Servers: 3, RulesPerServer: 20, Groups: 6, Seed: 2})
	var wg sync.WaitGroup
	classes := make([][]decide.Class, 8)
	for w := range classes {
		wg.Go(func() {
			for i := range 64 {
				g := []string{fmt.Sprintf("team%03d", i%6), fmt.Sprintf("team%03d", (i/6)%6)}
				classes[w] = append(classes[w], rt.ClassOf(claimed(fmt.Sprintf("user%d", i), g...)))
				rt.Decide(claimed(fmt.Sprintf("user%d", i), g...), gen.Servers[0], table.Tool, gen.Names[i])
			}
		})
	}
	wg.Wait()
	for w := range classes[1:] {
		if !slices.Equal(classes[w+1], classes[0]) {
			t.Fatal("two goroutines got different classes for one reference")
		}
	}
}

// Past the references a table keeps in full, decisions are still right,
// and still allocate nothing once their name and group set was seen.
func TestManyReferences(t *testing.T) {
	rt, gen := loadSpec(t, policygen.Spec{Servers: 2, RulesPerServer: 10, Groups: 2, Seed: 4})
	member := rt.ClassOf(gen.Members[0]) // team000
	for i := range 4096 + 100 {
		if rt.ClassOf(claimed(fmt.Sprintf("agent%d", i), "team000")) != member {
			t.Fatalf("reference %d is not decided as team000's members", i)
		}
	}
	late := claimed("agent4100", "team000")
	if n := testing.AllocsPerRun(100, func() { rt.Decide(late, gen.Servers[0], table.Tool, gen.Names[0]) }); n != 0 {
		t.Errorf("a reference past the full cache allocates %v times", n)
	}
}
