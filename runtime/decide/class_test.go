package decide_test

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

func TestClassOf(t *testing.T) {
	rt, _ := compileArchive(t, txtar.Parse([]byte(`-- policy.cue --
package policy

mcp_servers: docs: access: tool: allow_list: ["get_*", "drop_*", "merge_*"]

groups: blue: {
	members: ["ann", "bo", "dee"]
	mcp_servers: docs: access: tool: deny_list: ["drop_*"]
}
groups: red: {
	members: ["cy", "dee"]
	mcp_servers: docs: access: tool: deny_list: ["merge_*"]
}
principals: bo: global: access: tool: deny_list: ["get_secret"]
`)))
	same := [][2]string{
		{"ann", "ann"},
		{"eve", ""}, // no scope of her own: the anonymous principal's class
		{"eve", "fay"},
	}
	for _, p := range same {
		if rt.ClassOf(p[0]) != rt.ClassOf(p[1]) {
			t.Errorf("%q and %q: different classes, want one", p[0], p[1])
		}
	}
	// ann is in blue alone; bo is in blue with a scope of his own; cy is
	// in red; dee in both.
	distinct := []string{"", "ann", "bo", "cy", "dee"}
	for i, a := range distinct {
		for _, b := range distinct[i+1:] {
			if rt.ClassOf(a) == rt.ClassOf(b) {
				t.Errorf("%q and %q: one class, want two", a, b)
			}
		}
	}
	if (decide.Class{}) == rt.ClassOf("") {
		t.Error("the anonymous principal's class is the zero Class")
	}

	// Members of the same groups share a class, and so decide alike,
	// without a scope of their own.
	rt2, _ := compileArchive(t, txtar.Parse([]byte(`-- policy.cue --
package policy

mcp_servers: docs: access: tool: allow_list: ["get_*", "drop_*"]
groups: blue: {
	members: ["ann", "bo"]
	mcp_servers: docs: access: tool: deny_list: ["drop_*"]
}
groups: all: {
	members: ["ann", "bo", "cy"]
	global: access: tool: deny_list: ["get_secret"]
}
`)))
	if rt2.ClassOf("ann") != rt2.ClassOf("bo") {
		t.Error("ann and bo are members of the same groups, yet of different classes")
	}
	if rt2.ClassOf("ann") == rt2.ClassOf("cy") {
		t.Error("cy is not in blue, yet of ann's class")
	}
	for _, name := range []string{"get_x", "get_secret", "drop_x"} {
		a, b := rt2.Decide("ann", "docs", table.Tool, name), rt2.Decide("bo", "docs", table.Tool, name)
		if a != b {
			t.Errorf("%s: ann %v, bo %v: one class decides alike", name, a, b)
		}
	}
	if d := rt2.Decide("cy", "docs", table.Tool, "drop_x"); d.Effect != table.Allow {
		t.Errorf("cy drop_x: %v, want allow (cy is not in blue)", d)
	}
	if d := rt2.Decide("ann", "docs", table.Tool, "drop_x"); d.Effect != table.Deny {
		t.Errorf("ann drop_x: %v, want deny", d)
	}
}

// scopesPolicy is a policy whose principal u<i> is in group g<k> exactly
// when bit k of i is set, for i < 64, and has a scope of its own when i is
// even. Group g<k> denies t<k>, u<i>'s own scope denies own<i>, and the
// global scope denies glob.
func scopesPolicy(t testing.TB) *decide.Table {
	t.Helper()
	var src strings.Builder
	src.WriteString("package policy\n")
	src.WriteString("mcp_servers: s: access: tool: allow_list: [\"*\"]\n")
	src.WriteString("global: access: tool: deny_list: [\"glob\"]\n")
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
		fmt.Fprintf(&src, "principals: u%d: mcp_servers: s: access: tool: deny_list: [\"own%d\"]\n", i, i)
	}
	res := compiler.Compile(compiler.Input{Files: []compiler.File{{Name: "scopes.cue", Data: []byte(src.String())}}, Source: table.Source{PolicyPath: "scopes"}})
	if res.Table == nil {
		for _, d := range res.Diagnostics {
			t.Log(d.Format(""))
		}
		t.Fatal("the policy does not compile")
	}
	rt, err := decide.Load(res.Table)
	if err != nil {
		t.Fatal(err)
	}
	<-rt.Ready()
	return rt
}

// TestLoadScopesOfEachPrincipal checks that every principal gets exactly
// the layers of the scopes that apply to it: its groups, its own scope and
// the global one, and no other's.
func TestLoadScopesOfEachPrincipal(t *testing.T) {
	rt := scopesPolicy(t)
	dec := func(p, name string) table.Effect { return rt.Decide(p, "s", table.Tool, name).Effect }
	for i := range 64 {
		p := fmt.Sprintf("u%d", i)
		for k := range 6 {
			want := table.Allow
			if i>>k&1 == 1 {
				want = table.Deny
			}
			if got := dec(p, fmt.Sprintf("t%d", k)); got != want {
				t.Errorf("%s, t%d: %v, want %v", p, k, got, want)
			}
		}
		for j := 0; j < 64; j += 2 {
			want := table.Allow
			if j == i {
				want = table.Deny
			}
			if got := dec(p, fmt.Sprintf("own%d", j)); got != want {
				t.Errorf("%s, own%d: %v, want %v", p, j, got, want)
			}
		}
		if got := dec(p, "glob"); got != table.Deny {
			t.Errorf("%s, glob: %v, want deny", p, got)
		}
	}
	for _, name := range []string{"t0", "t5", "own0"} {
		if got := dec("", name); got != table.Allow {
			t.Errorf("anonymous, %s: %v, want allow", name, got)
		}
	}
	// u0 has its own scope and no group: a class of its own. u1, in g0
	// only, and u<i> outside every group and scope share no class.
	if rt.ClassOf("u0") == rt.ClassOf("") || rt.ClassOf("u1") == rt.ClassOf("u3") || rt.ClassOf("nobody") != rt.ClassOf("") {
		t.Error("principals with different scopes share a class, or one with none has its own")
	}
	if got := len(rt.Principals()); got != 64 {
		t.Errorf("%d named principals, want 64", got)
	}
}
