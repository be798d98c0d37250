package cmd

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// -update rewrites the golden files (cmp targets) of the scripts.
var update = flag.Bool("update", false, "update testscript golden files")

func TestMain(m *testing.M) {
	quickRaceExit()
	testscript.Main(packageTests{m}, map[string]func(){
		"policyc": func() { os.Exit(Main()) },
	})
}

// quickRaceExit shortens the sleep of a -race binary before it exits, for
// the processes these tests start: the scripts and the gateway tests run
// policyc (this test binary) some thousand times, and under -race each run
// would otherwise sleep 1 s in its exit (GORACE atexit_sleep_ms, 1000 by
// default), most of the package's time. The race detector still watches
// every run, and a race it finds still fails the run (exit 66); only the
// window for races that begin after the program has decided to exit is
// 10 ms instead of 1 s. A GORACE that sets atexit_sleep_ms itself is kept.
// testscript passes GORACE on to the scripts' commands.
func quickRaceExit() {
	gorace := os.Getenv("GORACE")
	if strings.Contains(gorace, "atexit_sleep_ms") {
		return
	}
	os.Setenv("GORACE", strings.TrimSpace(gorace+" atexit_sleep_ms=10"))
}

// TestScripts runs testdata/script/*.txtar: each runs the real policyc
// command in-process and compares its output.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "../testdata/script",
		UpdateScripts:       *update,
		RequireExplicitExec: false,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":  cmdExits,
			"sparse": cmdSparse,
			"testop": cmdTestop,
		},
		Setup: func(env *testscript.Env) error {
			examples, err := filepath.Abs("../examples")
			env.Setenv("EXAMPLES", examples)
			if err != nil {
				return err
			}
			interop, err := filepath.Abs("../interop")
			env.Setenv("INTEROP", interop)
			return err
		},
		Condition: func(cond string) (bool, error) {
			if cond != "interop" {
				return false, fmt.Errorf("unknown condition %q", cond)
			}
			return interopReady("../interop", os.Getenv("POLICYC_INTEROP") == "required")
		},
	})
}

// interopReady reports whether the interoperability scripts can run: Node.js
// on PATH and interop/'s packages installed (npm ci --prefix interop).
// Where they are required (POLICYC_INTEROP=required, as in .ci/run), their
// absence fails the script instead of skipping it.
func interopReady(dir string, required bool) (bool, error) {
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not on PATH"
	} else {
		for _, pkg := range []string{"@modelcontextprotocol/sdk", "@modelcontextprotocol/server-everything"} {
			if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
				missing = pkg + " is not installed (npm ci --prefix interop)"
				break
			}
		}
	}
	if missing != "" && required {
		return false, fmt.Errorf("POLICYC_INTEROP=required, but %s", missing)
	}
	return missing == "", nil
}

// cmdExits runs a command and checks its exit code:
//
//	exits CODE policyc ARGS...
//
// Its stdout and stderr are kept for the stdout and stderr commands, as
// with exec.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE COMMAND [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: bad code %q", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exits: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with %d, want %d", args[1], got, want)
	}
}

// cmdSparse creates FILE of SIZE bytes that holds no data (a sparse file),
// for scripts about inputs too large to write out.
func cmdSparse(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: sparse FILE SIZE")
	}
	size, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		ts.Fatalf("sparse: bad size %q", args[1])
	}
	f, err := os.Create(ts.MkAbs(args[0]))
	ts.Check(err)
	ts.Check(f.Truncate(size))
	ts.Check(f.Close())
}

// upstreamBuild is runtime/gateway's test upstream, built once for all the
// tests of this package that run it (go build links it anew each time).
var upstreamBuild struct {
	once sync.Once
	dir  string
	bin  string
	err  error
	out  []byte
}

// packageDir is this package's directory, where go test starts its tests.
var packageDir, _ = os.Getwd()

// testUpstream returns the path of the test upstream's binary, building it
// on first use. Tests only run it; none changes it.
func testUpstream(t *testing.T) string {
	t.Helper()
	upstreamBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "policyc-testupstream-")
		if err != nil {
			upstreamBuild.err = err
			return
		}
		upstreamBuild.dir = dir
		upstreamBuild.bin = filepath.Join(dir, "testupstream")
		build := exec.Command("go", "build", "-o", upstreamBuild.bin, "../runtime/gateway/internal/testupstream/cmd/testupstream")
		build.Dir = packageDir // whichever test builds it may have changed directory
		upstreamBuild.out, upstreamBuild.err = build.CombinedOutput()
	})
	if upstreamBuild.err != nil {
		t.Fatalf("go build testupstream: %v\n%s", upstreamBuild.err, upstreamBuild.out)
	}
	return upstreamBuild.bin
}

// packageTests runs the package's tests (testscript.Main runs them when
// this binary is not being run as policyc): more of them at once than
// go test's default, then it removes the test upstream's binary if one was
// built.
//
// The default -parallel is GOMAXPROCS, but the scripts that take longest
// (gateway_interop_*, catalog_failures) spend their time waiting: for
// holds, timeouts and Node.js processes, not computing. At GOMAXPROCS
// they would keep the other scripts from the processors while they wait,
// so the scripts run 2*GOMAXPROCS at a time; an explicit -parallel is
// kept.
type packageTests struct{ m *testing.M }

func (p packageTests) Run() int {
	defer func() {
		if upstreamBuild.dir != "" {
			os.RemoveAll(upstreamBuild.dir)
		}
	}()
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		flag.Set("test.parallel", strconv.Itoa(2*runtime.GOMAXPROCS(0)))
	}
	return p.m.Run()
}
