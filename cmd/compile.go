package cmd

import (
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/atomicfile"
	"github.com/policyc/policyc/runtime/table"
)

func init() { register(newCompileCmd) }

func newCompileCmd() *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "compile [DIR]",
		Short: "Check a policy and freeze it into a decision table",
		Long: `Compile the CUE policy in DIR (default: the current directory) into a frozen
decision table: canonical JSON, byte-identical for the same sources and
compiler version.

Every problem is reported, each with file:line:col, a severity and a code
(docs/rules/<code>.md). On any error nothing is written and the exit code is 1.
Output files are written atomically: a reader never sees a partial table.

Examples:
  policyc compile examples/team -o table.json
  policyc compile -o - | jq .digest`,
		Args: argsRange(0, 1),
		RunE: func(c *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			res, err := compileDir(dir, c.ErrOrStderr())
			if err != nil {
				return err
			}
			b, err := table.Encode(res.Table)
			if err != nil {
				return failuref("encode table: %v", err)
			}
			return writeOutput(c.OutOrStdout(), out, b, 0o644)
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "-", "write the table to `FILE` (- for standard output)")
	return c
}

// compileDir compiles the policy in dir, prints its diagnostics to stderr
// and returns errSilent with ExitProblems when there is an error.
func compileDir(dir string, stderr io.Writer) (*compiler.Result, error) {
	files, err := compiler.ReadDir(dir)
	if err != nil {
		return nil, failuref("read policy directory: %v", err)
	}
	res := compiler.Compile(compiler.Input{
		Files:  files,
		Source: table.Source{PolicyPath: filepath.ToSlash(filepath.Clean(dir))},
	})
	if err := printDiagnostics(stderr, dir, res.Diagnostics); err != nil {
		return nil, err
	}
	return res, nil
}

// printDiagnostics prints diagnostics and a summary; it returns errSilent
// with ExitProblems when any is an error.
func printDiagnostics(w io.Writer, root string, ds []compiler.Diagnostic) error {
	var errs, warns int
	for _, d := range ds {
		fmt.Fprintln(w, d.Format(root))
		switch d.Severity {
		case compiler.Error:
			errs++
		case compiler.Warning:
			warns++
		}
	}
	if errs > 0 {
		fmt.Fprintf(w, "%s, %s: nothing written\n", count(errs, "error"), count(warns, "warning"))
		return withCode(ExitProblems, errSilent)
	}
	return nil
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// writeOutput writes b to stdout for "-", else atomically to the file.
func writeOutput(stdout io.Writer, path string, b []byte, perm fs.FileMode) error {
	if path == "-" || path == "" {
		_, err := stdout.Write(b)
		return err
	}
	if err := atomicfile.Write(path, b, perm); err != nil {
		return withCode(ExitFailure, err)
	}
	return nil
}
