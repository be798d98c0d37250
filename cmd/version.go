package cmd

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/table"
)

func init() { register(newVersionCmd) }

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the policyc version, and the compiler version its tables record",
		Long: `Print the version of this policyc build (its module version, or "(devel)"
for a build from a source tree, with the commit it was built from when that
is known), the compiler version the decision tables it compiles record, and
the table format it writes. 'policyc --version' prints the same.

Examples:
  policyc version
  policyc --version`,
		Args: argsRange(0, 0),
		RunE: func(c *cobra.Command, args []string) error {
			_, err := fmt.Fprint(c.OutOrStdout(), versionText())
			return err
		},
	}
}

// versionText is what 'policyc version' and 'policyc --version' print.
// The build's version comes from the module information Go records in the
// binary; the compiler version is the one every table records, which
// decides whether two builds compile the same bytes.
func versionText() string {
	version, commit := "(devel)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" {
			version = v
		}
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if commit != "" && modified {
			commit += ", modified"
		}
	}
	if commit != "" {
		version += " (commit " + commit + ")"
	}
	return fmt.Sprintf("policyc %s\ncompiler %s\ntable format %s\n", version, compiler.Version, table.Format)
}
