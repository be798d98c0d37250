package compiler_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/decide"
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
		if _, err := decide.LoadUnsigned(b); err != nil {
			t.Fatalf("compiled table does not load: %v\n%s", err, b)
		}
		again, err := table.Encode(compiler.Compile(in).Table)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("compiling twice gave different tables (%v)", err)
		}
	})
}

// FuzzCompileTwoFiles feeds two files of one policy: the invariants of
// FuzzCompile hold, and so do they when a file does not parse (the other
// is still checked on its own), and every diagnostic names one of the two
// files or none.
func FuzzCompileTwoFiles(f *testing.F) {
	f.Add([]byte("package policy\ndefaults: tool: \"allow\"\n"), []byte("package policy\ndefaults: tool: \"deny\"\n"))
	f.Add([]byte("package policy\nmcp_servers: a: {\n"), []byte("package policy\nmcp_servers: b: access: tool: approval_timeout_seconds: 0\n"))
	f.Add([]byte("package policy\n#P: {approval_list: [\"x\"]}\n"), []byte("package policy\nmcp_servers: a: access: prompt: #P\n"))
	f.Add([]byte("package policy\nx: #Missing\n"), []byte("package policy\nmcp_servers: a: access: tool: deny_list?: [\"d\"]\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		in := compiler.Input{Files: []compiler.File{{Name: "a.cue", Data: a}, {Name: "b.cue", Data: b}}, Source: table.Source{PolicyPath: "fuzz"}}
		res := compiler.Compile(in)
		for _, d := range res.Diagnostics {
			if d.Code == "" || d.Message == "" {
				t.Fatalf("diagnostic without code or message: %+v", d)
			}
			if f := d.Pos.File; f != "" && f != "a.cue" && f != "b.cue" {
				t.Fatalf("diagnostic names a file that is not an input: %+v", d)
			}
		}
		if compiler.HasErrors(res.Diagnostics) != (res.Table == nil) {
			t.Fatalf("errors %v, table %v", compiler.HasErrors(res.Diagnostics), res.Table != nil)
		}
		if res.Table == nil {
			return
		}
		enc, err := table.Encode(res.Table)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decide.LoadUnsigned(enc); err != nil {
			t.Fatalf("compiled table does not load: %v", err)
		}
	})
}
