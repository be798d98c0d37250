package compiler_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime"
	"github.com/policyc/policyc/runtime/table"
)

// FuzzCompile feeds arbitrary bytes to the compiler as one policy file.
// Invariants: it never panics; it yields a table exactly when it reports no
// error; every diagnostic has a code and a message; a table it yields
// decodes, loads and re-encodes to the same bytes, and compiling the same
// input again gives the same bytes.
func FuzzCompile(f *testing.F) {
	seeds, _ := filepath.Glob("../examples/*/*.cue")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("package policy\n"))
	f.Add([]byte("package policy\nmcp_servers: a: access: tool: allow_list: [\"[\"]\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		in := compiler.Input{Files: []compiler.File{{Name: "fuzz.cue", Data: src}}, Source: table.Source{PolicyPath: "fuzz"}}
		res := compiler.Compile(in)
		for _, d := range res.Diagnostics {
			if d.Code == "" || d.Message == "" {
				t.Fatalf("diagnostic without code or message: %+v", d)
			}
		}
		if compiler.HasErrors(res.Diagnostics) {
			if res.Table != nil {
				t.Fatal("a table despite errors")
			}
			return
		}
		if res.Table == nil {
			t.Fatal("no table and no error")
		}
		b, err := table.Encode(res.Table)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := runtime.LoadUnsigned(b); err != nil {
			t.Fatalf("compiled table does not load: %v\n%s", err, b)
		}
		again, err := table.Encode(compiler.Compile(in).Table)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("compiling twice gave different tables (%v)", err)
		}
	})
}
