package cmd

import (
	"github.com/spf13/cobra"

	"github.com/policyc/policyc/schema"
)

func init() { register(newSchemaCmd) }

func newSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema [policy|gateway|lint|test]",
		Short: "Print the embedded CUE schema of a policy, a gateway configuration, a lint configuration or policy tests",
		Long: `Print the CUE schema an input is checked against: the policy (the default;
#Policy is the whole policy), the gateway configuration (#Gateway, read by
policyc gateway --config), the lint configuration (#LintConfig, policyc.cue) or
the policy's test cases (#Tests, tests/*.cue, read by policyc test).
Every struct is closed, so a key not listed is an error. Keys are shown with
CUE's markers: ? optional, ! required; write them without the marker.

Examples:
  policyc schema
  policyc schema > policy-schema.cue
  policyc schema gateway
  policyc schema test`,
		Args:      argsRange(0, 1),
		ValidArgs: schema.Surfaces,
		RunE: func(c *cobra.Command, args []string) error {
			surface := "policy"
			if len(args) == 1 {
				surface = args[0]
			}
			text, ok := schema.Text(surface)
			if !ok {
				return usageErrorf("schema has no %q: give policy, gateway, lint or test (see 'policyc schema --help')", surface)
			}
			_, err := c.OutOrStdout().Write(text)
			return err
		},
	}
}
