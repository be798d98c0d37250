package cmd

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// -update rewrites the golden files (cmp targets) of the scripts.
var update = flag.Bool("update", false, "update testscript golden files")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"policyc": func() { os.Exit(Main()) },
	})
}

// TestScripts runs testdata/script/*.txtar: each runs the real policyc
// command in-process and compares its output.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "../testdata/script",
		UpdateScripts:       *update,
		RequireExplicitExec: false,
		Setup: func(env *testscript.Env) error {
			examples, err := filepath.Abs("../examples")
			env.Setenv("EXAMPLES", examples)
			return err
		},
	})
}
