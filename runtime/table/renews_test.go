package table_test

import (
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/table"
)

// A renewal is the same table with another expiry; any other change,
// serial included, is not.
func TestRenews(t *testing.T) {
	compile := func() *table.Table {
		t.Helper()
		tb, err := table.Decode(mustEncode(t, compiler.Compile(compiler.Input{Files: []compiler.File{{Name: "p.cue",
			Data: []byte("package policy\nmcp_servers: a: access: tool: allow_list: [\"x\"]\n")}}}).Table))
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	old := compile()
	renewed := compile()
	renewed.Expires = "2099-01-01T00:00:00Z"
	mustEncode(t, renewed) // a new digest
	if renewed.Digest == old.Digest || !table.Renews(renewed, old) || !table.Renews(old, renewed) {
		t.Errorf("a new expiry is a renewal: digests %s %s", renewed.Digest, old.Digest)
	}
	changed := compile()
	changed.Expires = "2099-01-01T00:00:00Z"
	changed.Servers["a"].Tool.Rules[0].Pattern = "y"
	if table.Renews(changed, old) {
		t.Error("a changed rule with a new expiry was taken for a renewal")
	}
	other := compile()
	other.Serial++
	if table.Renews(other, old) {
		t.Error("another serial was taken for a renewal")
	}
}

func mustEncode(t *testing.T, tb *table.Table) []byte {
	t.Helper()
	b, err := table.Encode(tb)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
