package cmd

import (
	"fmt"
	"io"
	"io/fs"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/fileio"
)

// printDiagnostics prints the errors among diagnostics and a summary; it
// returns errSilent with ExitProblems when there is any.
//
// Warnings and infos are policyc lint's to report: lint applies the
// repository's policyc.cue (levels, ignored files, inline ignores), which a
// compile does not read, so printing them here would contradict it.
func printDiagnostics(w io.Writer, root string, ds []compiler.Diagnostic) error {
	errs := 0
	for _, d := range ds {
		if d.Severity == compiler.Error {
			errs++
			fmt.Fprintln(w, d.Format(root))
		}
	}
	if errs > 0 {
		fmt.Fprintf(w, "%s: nothing written\n", count(errs, "error"))
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
	if err := fileio.WriteAtomic(path, b, perm); err != nil {
		return withCode(ExitFailure, err)
	}
	return nil
}
