package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/schema"
)

func init() {
	register(newSchemaCmd)
	register(newVersionCmd)
}

func newSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the embedded CUE schema of the policy surface",
		Long: `Print the CUE schema every policy is checked against. #Policy is the whole
policy; every struct is closed, so a key not listed here is an error.

Examples:
  policyc schema
  policyc schema > policy-schema.cue`,
		Args: argsRange(0, 0),
		RunE: func(c *cobra.Command, args []string) error {
			_, err := c.OutOrStdout().Write(schema.Source)
			return err
		},
	}
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the policyc version",
		Args:  argsRange(0, 0),
		RunE: func(c *cobra.Command, args []string) error {
			_, err := fmt.Fprintf(c.OutOrStdout(), "policyc %s\n", compiler.Version)
			return err
		},
	}
}
