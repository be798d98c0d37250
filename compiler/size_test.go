package compiler_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/policygen"
)

// A policy whose lists would cost CUE more than the evaluation budget is
// refused at its largest list, before CUE evaluates it, with the budget
// named; the count is of entries in the syntax, so the test needs no timer.
func TestEvaluationBudget(t *testing.T) {
	// n² > EvaluationBudget for the first n over √EvaluationBudget.
	n := 44722
	res := compiler.Compile(compiler.Input{Files: policygen.Prefixes(n)})
	if res.Policy != nil || res.Table != nil || len(res.Diagnostics) != 1 {
		t.Fatalf("policy %v, diagnostics %v", res.Policy != nil, res.Diagnostics)
	}
	d := res.Diagnostics[0]
	want := fmt.Sprintf("mcp_servers.s.access.tool.allow_list: this list has 44,722 entries; CUE's work on a list or struct grows with the square of its entries, and the policy's lists and structs would cost %s units of evaluation, over the evaluation budget of 2,000,000,000, so the policy is not evaluated", "2,000,057,289")
	if d.Code != compiler.CodeTooLarge || d.Severity != compiler.Error || d.Pos.String() != "policy.cue:3:43" || d.Message != want {
		t.Errorf("got %s %v %s %q", d.Code, d.Severity, d.Pos, d.Message)
	}
}

// Many lists each small enough add up: the budget is of the policy, and
// the largest of them is named.
func TestEvaluationBudgetAddsUp(t *testing.T) {
	var src strings.Builder
	src.WriteString("package policy\n")
	for s := range 9 {
		n := 15000 + s // s8's is the largest
		fmt.Fprintf(&src, "mcp_servers: s%d: access: tool: allow_list: [%s\"x\"]\n", s, strings.Repeat(`"x", `, n-1))
	}
	ev := compiler.Evaluate([]compiler.File{{Name: "p.cue", Data: []byte(src.String())}}, compiler.PackageName, "#Policy")
	if len(ev.Diagnostics) != 1 || ev.Diagnostics[0].Code != compiler.CodeTooLarge || ev.Diagnostics[0].Path != "mcp_servers.s8.access.tool.allow_list" ||
		ev.Diagnostics[0].Pos.Line != 10 {
		t.Fatalf("diagnostics %v", ev.Diagnostics)
	}
}
