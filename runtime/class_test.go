package runtime_test

import (
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/policyc/policyc/runtime"
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
	if (runtime.Class{}) == rt.ClassOf("") {
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
		a, b := rt2.Decide("ann", "docs", runtime.Tool, name), rt2.Decide("bo", "docs", runtime.Tool, name)
		if a != b {
			t.Errorf("%s: ann %v, bo %v: one class decides alike", name, a, b)
		}
	}
	if d := rt2.Decide("cy", "docs", runtime.Tool, "drop_x"); d.Effect != runtime.Allow {
		t.Errorf("cy drop_x: %v, want allow (cy is not in blue)", d)
	}
	if d := rt2.Decide("ann", "docs", runtime.Tool, "drop_x"); d.Effect != runtime.Deny {
		t.Errorf("ann drop_x: %v, want deny", d)
	}
}
