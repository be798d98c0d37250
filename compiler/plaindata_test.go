package compiler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
	"github.com/rogpeppe/go-internal/txtar"
)

func TestPlainData(t *testing.T) {
	for _, tc := range []struct {
		src   string
		plain bool
	}{
		{"a: 1\nb: \"x\"\nc: true\nd: null\ne: -1.5\nf: [1, {g: \"h\"}, []]\n\"quoted key\": {i: 2}\n// a comment\nj: {}\nk: 'bytes'\n", true},
		{"a: b: c: d: \"e\"\n", true},
		{"a?: 1\n", false},
		{"a!: 1\n", false},
		{"a: {b?: 1}\n", false},
		{"a: b\nb: 1\n", false},
		{"#D: {x?: 1}\na: #D\n", false},
		{"_h: {x?: 1}\na: _h\n", false},
		{"a: {\"x\"}\n", false},
		{"a: [string]: 1\n", false},
		{"a: {[_]: {x?: 1}, b: {}}\n", false},
		{"a: {b: 1, {c: 2}}\n", false},
		{"for k in [\"x\"] {(k): 1}\n", false},
		{"a: {if true {x: 1}}\n", false},
		{"let x = 1\na: x\n", false},
		{"(\"a\"): 1\n", false},
		{"\"\\(\"a\")b\": 1\n", false},
		{"a: \"\\(1)\"\n", false},
		{"a: int\n", false},
		{"a: 1 | 2\n", false},
		{"a: *1 | 2\n", false},
		{"a: [...]\n", false},
		{"a: [1, ...]\n", false},
		{"a: {...}\n", false},
		{"a: !1\n", false},
		{"X=a: 1\n", false},
		{"a: strings.ToUpper(\"x\")\n", false},
		{"@attr()\na: 1\n", false},
	} {
		f, err := parser.ParseFile("p.cue", "package p\n\n"+tc.src)
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		if got := plainData([]*ast.File{f}); got != tc.plain {
			t.Errorf("plainData(%q) = %v, want %v", tc.src, got, tc.plain)
		}
	}
	f, err := parser.ParseFile("s.cue", "package s\n\nimport \"strings\"\n\na: strings.ToUpper(\"x\")\n")
	if err != nil {
		t.Fatal(err)
	}
	if plainData([]*ast.File{f}) {
		t.Error("a file with an import is plain data")
	}
}

// TestPlainDataHasNoMarkedValues: for every policy of the golden archives
// and the command scripts that is plain data, checkMarkedValues, which
// Evaluate leaves out for it, finds nothing; and it finds something in
// some of the others (the archives that test it).
func TestPlainDataHasNoMarkedValues(t *testing.T) {
	var paths []string
	for _, glob := range []string{"../testdata/compile/*.txtar", "../testdata/script/*.txtar"} {
		p, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p...)
	}
	if len(paths) == 0 {
		t.Fatal("no archives")
	}
	// Policies whose constraint fields come from a hidden field, a
	// definition or a pattern, as they do in no archive.
	extra := []string{
		"-- p/a.cue --\npackage policy\n_t: {deny_list?: [\"x\"]}\nmcp_servers: s: access: tool: _t\n",
		"-- p/a.cue --\npackage policy\n#T: {allow_list?: [\"x\"]}\nmcp_servers: s: access: tool: #T\n",
		"-- p/a.cue --\npackage policy\nmcp_servers: {[_]: access: tool: deny_list?: [\"x\"], s: {}}\n",
	}
	plain, found := 0, 0
	for _, path := range append(paths, extra...) {
		data := []byte(path)
		if !strings.HasPrefix(path, "-- ") {
			var err error
			if data, err = os.ReadFile(path); err != nil {
				t.Fatal(err)
			}
		}
		byDir := map[string][]File{}
		for _, f := range txtar.Parse(data).Files {
			if strings.HasSuffix(f.Name, ".cue") && !strings.HasSuffix(f.Name, ConfigFileName) {
				dir := filepath.Dir(f.Name)
				byDir[dir] = append(byDir[dir], File{Name: filepath.Base(f.Name), Data: f.Data})
			}
		}
		for dir, files := range byDir {
			// Evaluate's steps up to checkMarkedValues.
			c := newCompilation(PackageName, "#Policy")
			c.policyDef = c.schema().LookupPath(cue.ParsePath(c.def))
			c.parsed = c.parseFiles(files)
			if len(c.parsed.files) < len(files) {
				continue
			}
			c.checkKeys(c.parsed)
			v := c.ctx.BuildInstance(c.instance(c.parsed, true))
			before := len(c.diags)
			c.checkMarkedValues(v, nil)
			reported := len(c.diags) - before
			if plainData(c.parsed.files) {
				plain++
				if reported > 0 {
					t.Errorf("%s (%s): plain data, but checkMarkedValues reports %s", path, dir, c.diags[before].Format(""))
				}
			} else if reported > 0 {
				found++
			}
		}
	}
	if plain == 0 || found == 0 {
		t.Fatalf("%d plain policies, %d where checkMarkedValues reports: the archives no longer exercise this", plain, found)
	}
	t.Logf("%d plain policies, %d others where checkMarkedValues reports", plain, found)
}
