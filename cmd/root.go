// Package cmd is the policyc command line. Commands write only to the
// writers they are given, so tests run them in-process and capture output.
package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/policyc/policyc/compiler"
)

// Main runs policyc with os.Args and returns the exit code.
func Main() int {
	return Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// Run runs policyc with args and the given streams and returns the exit
// code. Errors are printed here, once.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	if strings.HasPrefix(err.Error(), "unknown command ") {
		// cobra reports unknown subcommands as plain errors.
		err = withCode(ExitUsage, fmt.Errorf("%w (see 'policyc --help')", err))
	}
	var ee *exitError
	if !errors.As(err, &ee) || ee.err != errSilent {
		fmt.Fprintf(stderr, "policyc: %v\n", err)
	}
	return exitCode(err)
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "policyc",
		Short: "Compile, lint, sign and enforce MCP access policy kept in Git",
		Long: `policyc checks MCP access policy written in CUE (which tools an agent may call,
which need a human's approval, which prompts and resources it may see), compiles
it into a frozen decision table, and enforces that table in a gateway.

Exit codes:
  0  success
  1  the policy has problems (compile errors, lint findings at the fail level),
     or a policy test failed or coverage is below --coverage-min (policyc test)
  2  usage error (bad flags or arguments)
  3  the tool failed (I/O, unreadable table); says nothing about the policy
  4  policyc diff: some decisions change; catalog pull --check: drift
  5  policyc approvals: the admin API refused (unknown, decided or expired
     request, your own request, a bad token)
  10 verify: a bare, unsigned table
  11 verify: the payload or a signature was altered, or the envelope is malformed
  12 verify: signed, but by no trusted key
  13 verify: not a policyc table envelope (wrong payloadType)
  14 verify: a table format this build does not read
  15 verify: the table has expired
  16 verify: rollback (older than the last table accepted)

Flags mean the same on every command that has them: -o/--output FILE is the
file written ("-" for standard output); --format FORMAT the output format;
--key FILE and --key-env VAR the signing key (compile and sign); --trust FILE
a trusted public key; --check checks only: it writes nothing and serves
nothing, reports, and exits non-zero when the check fails (gateway: 1, the
configuration or the table has problems, and no upstream is started;
catalog pull: 4, drift, and the upstreams are started, to be read).

Documentation: docs/ in the source repository (policy.md, signing.md, ...).`,
		PersistentPreRun: func(c *cobra.Command, args []string) {
			noteDeprecated(c.Flags(), c.ErrOrStderr())
		},
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.Version = versionText()
	root.SetVersionTemplate("{{.Version}}")
	root.Flags().BoolP("version", "v", false, "print the policyc version and the compiler version its tables record, as 'policyc version' does")
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if near := nearFlag(c, err); near != "" {
			return withCode(ExitUsage, fmt.Errorf("%w: did you mean --%s? (see '%s --help')", err, near, c.CommandPath()))
		}
		return withCode(ExitUsage, fmt.Errorf("%w (see '%s --help')", err, c.CommandPath()))
	})
	for _, newCmd := range commands {
		root.AddCommand(newCmd())
	}
	return root
}

// commands are the subcommand constructors; each command's file registers
// its own in an init function, so commands stay one file each.
var commands []func() *cobra.Command

func register(newCmd func() *cobra.Command) { commands = append(commands, newCmd) }

// dirArg is the optional DIR argument of a command whose only argument
// it is: the current directory when it is not given.
func dirArg(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	return "."
}

// exactArgs and friends return usage errors with the right exit code.
func argsRange(lo, hi int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			if lo == hi {
				return usageErrorf("%s takes %d argument(s), got %d (see '%s --help')", c.Name(), lo, len(args), c.CommandPath())
			}
			return usageErrorf("%s takes %d to %d arguments, got %d (see '%s --help')", c.Name(), lo, hi, len(args), c.CommandPath())
		}
		return nil
	}
}

// nearFlag returns the flag of c that an unknown long flag in err (pflag's
// "unknown flag: --chek") likely misspells, or "".
func nearFlag(c *cobra.Command, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return ""
	}
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Deprecated == "" {
			names = append(names, f.Name)
		}
	})
	return compiler.Suggest(name, names)
}
