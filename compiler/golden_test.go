package compiler_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/table"
)

var update = flag.Bool("update", false, "rewrite the want/ sections of testdata/compile/*.txtar")

// TestGolden compiles each archive in testdata/compile and compares the
// diagnostics (want/diagnostics) and, when present, the table
// (want/table.json) with the archive's golden sections. With -update the
// sections are rewritten; CI checks that an update leaves no diff.
func TestGolden(t *testing.T) {
	paths, err := filepath.Glob("../testdata/compile/*.txtar")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden archives: %v", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			t.Parallel()
			ar, err := txtar.ParseFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var files []compiler.File
			for _, f := range ar.Files {
				if strings.HasSuffix(f.Name, ".cue") {
					files = append(files, compiler.File{Name: f.Name, Data: f.Data})
				}
			}
			res := compiler.Compile(compiler.Input{Files: files, Source: table.Source{PolicyPath: "testdata"}})
			var diags bytes.Buffer
			for _, d := range res.Diagnostics {
				diags.WriteString(d.Format("") + "\n")
			}
			got := map[string][]byte{"want/diagnostics": diags.Bytes()}
			if res.Table != nil {
				b, err := table.Encode(res.Table)
				if err != nil {
					t.Fatal(err)
				}
				got["want/table.json"] = b
			}
			if compiler.HasErrors(res.Diagnostics) == (res.Table != nil) {
				t.Fatalf("a table must be produced exactly when there is no error (table: %v)", res.Table != nil)
			}
			changed := false
			for i, f := range ar.Files {
				if !strings.HasPrefix(f.Name, "want/") {
					continue
				}
				g, ok := got[f.Name]
				if !ok {
					t.Errorf("%s: expected, but compile produced none", f.Name)
					continue
				}
				delete(got, f.Name)
				if bytes.Equal(g, f.Data) {
					continue
				}
				if *update {
					ar.Files[i].Data, changed = g, true
					continue
				}
				t.Errorf("%s differs:\n--- got\n%s--- want\n%s", f.Name, g, f.Data)
			}
			for name, g := range got {
				if len(g) > 0 && !*update {
					t.Errorf("%s produced but not in the archive:\n%s", name, g)
				}
			}
			if changed {
				if err := os.WriteFile(path, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
