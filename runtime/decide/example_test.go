package decide_test

import (
	"fmt"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// Example repeats the README's quick start: compile the bundled team
// example and explain one decision.
func Example() {
	files, err := compiler.ReadDir("../../examples/team")
	if err != nil {
		panic(err)
	}
	res := compiler.Compile(compiler.Input{Files: files, Source: table.Source{PolicyPath: "examples/team"}})
	if res.Table == nil {
		panic("the example does not compile")
	}
	rt, err := decide.Load(res.Table)
	if err != nil {
		panic(err)
	}
	d := rt.Decide("", "linear", table.Tool, "save_issue")
	fmt.Println(d.Effect, d.Rule.Pattern, d.Origin, d.ApprovalTimeoutSeconds, d.ApprovalChannel)
	d = rt.Decide("", "memory", table.Tool, "delete_entities")
	fmt.Println(d.Effect, d.Rule.Pattern, d.Origin)
	// Output:
	// approve save_issue linear.cue:6 900 page
	// deny delete_entities memory.cue:7
}
