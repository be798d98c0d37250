// Package policytest compiles policies written inline in tests.
package policytest

import (
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/table"
)

// Compile compiles src, one file of package policy, into a table with the
// given serial, and fails tb if it has an error or the table does not
// encode.
func Compile(tb testing.TB, src string, serial uint64) *table.Table {
	tb.Helper()
	res := compiler.Compile(compiler.Input{
		Files:  []compiler.File{{Name: "policy.cue", Data: []byte(src)}},
		Source: table.Source{PolicyPath: "test"},
		Serial: serial,
	})
	for _, d := range res.Diagnostics {
		if d.Severity == compiler.Error {
			tb.Fatalf("test policy does not compile: %s", d.Format(""))
		}
	}
	if _, err := table.Encode(res.Table); err != nil {
		tb.Fatal(err)
	}
	return res.Table
}
