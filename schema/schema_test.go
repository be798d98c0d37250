package schema

import (
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
)

// TestTextStandsAlone: each surface's text compiles as CUE on its own, with
// every definition it refers to, and defines its surface's root.
func TestTextStandsAlone(t *testing.T) {
	roots := map[string]string{"policy": "#Policy", "gateway": "#Gateway", "lint": "#LintConfig", "test": "#Tests"}
	for _, surface := range Surfaces {
		text, ok := Text(surface)
		if !ok {
			t.Fatalf("%s: no text", surface)
		}
		v := cuecontext.New().CompileBytes(text, cue.Filename(surface+".cue"))
		if err := v.Validate(); err != nil {
			t.Errorf("%s: the text does not compile alone: %v", surface, err)
			continue
		}
		if d := v.LookupPath(cue.ParsePath(roots[surface])); !d.Exists() {
			t.Errorf("%s: %s is not defined", surface, roots[surface])
		}
	}
	if _, ok := Text("policyc"); ok {
		t.Error("an unknown surface has a text")
	}
	gw, _ := Text("gateway")
	if n := strings.Count(string(gw), "\n#Name:"); n != 1 {
		t.Errorf("the gateway text defines #Name %d times, want once", n)
	}
}
