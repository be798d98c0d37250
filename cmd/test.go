package cmd

import (
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/testcase"
)

func init() { register(newTestCmd) }

// testFormats are the output formats of policyc test.
var testFormats = []string{"text", "json", "junit", "github"}

// testFlags are policyc test's flags.
type testFlags struct {
	run, rev, format, coverageMin, out string
	staged, coverage, snapshot         bool
}

func newTestCmd() *cobra.Command {
	var f testFlags
	c := &cobra.Command{
		Use:   "test [DIR]",
		Short: "Run the policy's test cases through the decision table, with rule coverage",
		Long: `Compile the policy in DIR (default: the current directory) and decide every
test case of DIR/tests/*.cue (CUE, package tests; docs/testing.md) with the
compiled table, loaded into the decision engine the gateway runs. A case names
who asks (a principal, a set of groups, or neither), the server, the kind and
name of the item, the decision it expects and, optionally, the rule that must
decide it ("default", FILE:LINE, or the rule as 'policyc explain' names it).
A case that fails is printed at its position with the decision, the rule that
made it with its origin, and the rules it beat, as explain prints them. Test
files are not policy files: they never enter the table.

A case that names an unknown server or group, expects approve for a prompt or
a resource, or names a rule that matches no rule is an error at its position,
and no case runs.

--run REGEXP runs the cases whose GROUP/NAME matches, and fails when none
does (a misspelt pattern would pass having run nothing). --rev REV reads the
policy and its tests as committed at REV, --staged as staged in the git index,
so a pre-commit hook and CI test what is committed.

--coverage lists every rule with the number of cases it decided (for an
allow_list entry of a group, principal or global, the cases it kept from being
denied), and every rule no case exercised, at its position; a rule that can
never decide (policyc lint's shadowed-rule and the like) is listed as
unreachable and is not counted. --coverage-min PERCENT fails when fewer rules
are covered; the percentage is exact, never rounded up (999 of 1000 is 99.9).

--snapshot records the decision of every item of the catalogue (DIR/catalog/)
for anyone, a member of each group and each principal the policy names, as
cases in DIR/tests/snapshot.cue (or -o FILE): a change that flips one then
fails until the snapshot is recorded again.

Formats: text, json, junit (JUnit XML, for CI test reports), github
(workflow annotations).

Exit codes: 0 every case passed (and coverage met --coverage-min); 1 a case
failed, coverage is below the minimum, --run matched no case, or the policy or
a test file has an error; 2 usage error; 3 the tool failed.

Examples:
  policyc test examples/team
  policyc test --run 'contractors/' --coverage examples/apps
  policyc test --staged examples/team
  policyc test --rev HEAD --format junit examples/team > policyc-test.xml
  policyc test --coverage-min 90 --format github examples/apps`,
		Args: argsRange(0, 1),
		RunE: func(c *cobra.Command, args []string) error {
			dir := dirArg(args)
			return runTest(c, dir, f)
		},
	}
	fs := c.Flags()
	fs.StringVar(&f.run, "run", "", "run only the cases whose GROUP/NAME matches `REGEXP`")
	fs.StringVar(&f.rev, "rev", "", "test the policy and its tests as committed at `REV`, read from the git object store")
	fs.BoolVar(&f.staged, "staged", false, "test the policy and its tests as staged in the git index, not the work tree")
	fs.BoolVar(&f.coverage, "coverage", false, "list every rule with the number of cases it decided")
	fs.StringVar(&f.coverageMin, "coverage-min", "", "exit 1 when less than `PERCENT` of the rules that can decide decided a case")
	fs.BoolVar(&f.snapshot, "snapshot", false, "record the decision of every catalogued item as cases, in DIR/tests/snapshot.cue")
	addOutputFlag(fs, &f.out, "", "the snapshot to `FILE` (- for standard output; default DIR/tests/snapshot.cue)")
	addFormatFlag(fs, &f.format, testFormats...)
	return c
}

// check refuses flags that do not go together.
func (f *testFlags) check() (run *regexp.Regexp, min *big.Rat, err error) {
	if err := checkFormat(f.format, testFormats...); err != nil {
		return nil, nil, err
	}
	if f.rev != "" && f.staged {
		return nil, nil, usageErrorf("--rev and --staged both say where to read the policy: give one")
	}
	if f.snapshot && (f.run != "" || f.coverage || f.coverageMin != "" || f.format != "text") {
		return nil, nil, usageErrorf("--snapshot records decisions and runs no case: it takes no --run, --coverage, --coverage-min or --format")
	}
	if f.out != "" && !f.snapshot {
		return nil, nil, usageErrorf("-o names the file --snapshot writes; without --snapshot nothing is written")
	}
	if f.run != "" {
		if run, err = regexp.Compile(f.run); err != nil {
			return nil, nil, usageErrorf("--run: %v", err)
		}
	}
	if f.coverageMin != "" {
		var ok bool
		if min, ok = testcase.ParsePercent(f.coverageMin); !ok {
			return nil, nil, usageErrorf("--coverage-min must be a percentage from 0 to 100, such as 90 or 99.5, got %q", f.coverageMin)
		}
	}
	return run, min, nil
}

func runTest(c *cobra.Command, dir string, f testFlags) error {
	run, min, err := f.check()
	if err != nil {
		return err
	}
	stdout, stderr := c.OutOrStdout(), c.ErrOrStderr()
	src, err := readTestSource(dir, f.rev, f.staged, stderr)
	if err != nil {
		return err
	}
	out := testOutput{join: src.join, file: src.file, min: min, minText: f.coverageMin, runText: f.run}
	// Without the catalogue (readTestSource). A policy that does not
	// compile is reported in the chosen format, as errors in the tests
	// are, and no test file is read.
	res := compiler.Compile(compiler.Input{Files: src.Files, Source: src.Source, Serial: src.Serial})
	if errs := errorsOf(res.Diagnostics); len(errs) > 0 {
		stopped := "no case was run"
		if f.snapshot {
			stopped = "nothing was recorded"
		}
		if err := out.writeErrors(stdout, stderr, f.format, errs, "in the policy: "+stopped); err != nil {
			return withCode(ExitFailure, err)
		}
		return withCode(ExitProblems, errSilent)
	}
	if f.snapshot {
		return writeSnapshot(stdout, stderr, dir, f.out, res, src.Catalog)
	}
	// Every problem at once: the cases the schema accepted are checked
	// against the table even when others were refused.
	cases, diags := testcase.Parse(src.tests)
	diags = append(diags, testcase.Check(cases, res.Table)...)
	compiler.SortDiagnostics(diags)
	if compiler.HasErrors(diags) {
		if err := out.writeErrors(stdout, stderr, f.format, diags, "in the tests: no case was run"); err != nil {
			return withCode(ExitFailure, err)
		}
		return withCode(ExitProblems, errSilent)
	}
	for _, d := range diags { // warnings: the cases run
		fmt.Fprintln(stderr, d.Rooted(src.join).Format(""))
	}
	if len(src.tests) == 0 {
		fmt.Fprintf(stderr, "policyc: note: %s has no test files: write cases in %s/*.cue (docs/testing.md)\n", dir, filepath.Join(dir, testcase.Dir))
	}
	selected := cases
	if run != nil {
		selected = testcase.Filter(cases, run.MatchString)
		// A pattern that matches nothing fails the run: a misspelt one
		// would otherwise pass CI having tested nothing.
		switch {
		case len(selected) > 0:
		case len(cases) == 0:
			out.noMatch = fmt.Sprintf("--run %q matches no case: %s has none", f.run, dir)
		default:
			out.noMatch = fmt.Sprintf("--run %q matches no case (of %d; it is matched against GROUP/NAME, such as %s)", f.run, len(cases), cases[0].FullName())
		}
	}
	runner, err := testcase.NewRunner(res.Table, selected)
	if err != nil {
		return withCode(ExitFailure, err)
	}
	counting := f.coverage || min != nil
	rep := runner.Run(selected, counting)
	var cov *testcase.Coverage
	if counting {
		cov = rep.Coverage(compiler.AnalyzeReach(res.Policy, compiler.ReachOptions{}))
	}
	out.list = f.coverage
	if err := out.write(stdout, f.format, rep, cov); err != nil {
		return withCode(ExitFailure, err)
	}
	if rep.Failed > 0 || cov != nil && min != nil && !cov.Meets(min) || out.noMatch != "" {
		return withCode(ExitProblems, errSilent)
	}
	return nil
}

// writeSnapshot records the decision of every catalogued item as cases.
func writeSnapshot(stdout, stderr io.Writer, dir, out string, res *compiler.Result, cat *catalog.Catalog) error {
	if cat == nil {
		return usageErrorf("--snapshot records the decisions of the catalogue, and %s has none: pull one with policyc catalog pull (docs/catalog.md)", dir)
	}
	snap, err := testcase.Snapshot(res.Table, cat)
	if err != nil {
		return withCode(ExitFailure, err)
	}
	if out == "" {
		out = filepath.Join(dir, filepath.FromSlash(testcase.SnapshotFile))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return withCode(ExitFailure, err)
		}
	}
	if err := writeOutput(stdout, out, snap.File, 0o644); err != nil {
		return err
	}
	where := out
	if out == "-" {
		where = "standard output"
	}
	fmt.Fprintf(stderr, "policyc: recorded %s (%s, each for anyone, every group and every principal the policy names) in %s\n",
		count(snap.Cases, "case"), count(snap.Items, "catalogued item"), where)
	if snap.Skipped > 0 {
		fmt.Fprintf(stderr, "policyc: note: %s of servers the policy does not define %s not recorded: the gateway denies them all\n",
			count(snap.Skipped, "item"), map[bool]string{true: "is", false: "are"}[snap.Skipped == 1])
	}
	return nil
}
