package cmd

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/catalog/hosts"
)

func init() { register(newExportCmd) }

func newExportCmd() *cobra.Command {
	var target, catalogDir, principal, out string
	c := &cobra.Command{
		Use:   "export --target TARGET TABLE_OR_DIR [--catalog DIR] [--principal PRINCIPAL] [-o FILE]",
		Short: "Carry a table's tool decisions into Claude Code or Cursor permission settings",
		Long: `Write the tool decisions of a decision table (a table file, or a policy
directory compiled on the fly) as a host's permission settings: a second belt
in front of the gateway, which still enforces the whole table.

  claude-code  {"permissions": {"allow": [...], "ask": [...], "deny": [...]}}
               with mcp__<server> and mcp__<server>__<tool> rules, to merge into
               .claude/settings.json. Claude Code checks deny, then ask, then
               allow; the first match decides. An approval becomes ask.
  cursor       Cursor's permissions.json: an mcpAllowlist of server:tool
               entries. Cursor has no deny and no approval rules: such tools
               are left off, so Cursor asks before each call.

Neither host has globs. A server whose tools all get one decision becomes one
rule; otherwise every tool in the catalogue (--catalog, default DIR/catalog
for a policy directory, written by 'policyc catalog pull') and every tool a
rule names literally gets a rule of its own, with the table's decision for it.
Where a host cannot say what the table says, the export says something
stricter when it can (a deny pattern with no catalogue to expand it over
denies the whole server) and prints a note on standard error for every place
where it cannot, such as tools outside the catalogue that Claude Code asks
about but the table denies. The cursor file carries the notes as comments.
Only tools are exported: neither host has permission rules for prompts or
resources. Decisions are those of --principal (default: a principal with no
group or scope of its own).

Exit codes: 0 exported (read the notes); 2 usage; 1 the policy does not
compile; 3 the table or the catalogue cannot be read, or the output written.

Examples:
  policyc export --target claude-code examples/team
  policyc export --target claude-code team.table.json --catalog policy/catalog -o .claude/settings.policyc.json
  policyc export --target cursor examples/team --principal alice@example.com -o ~/.cursor/permissions.json`,
		Args: argsRange(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			if target != "claude-code" && target != "cursor" {
				return usageErrorf("--target must be claude-code or cursor, got %q (see 'policyc export --help')", target)
			}
			rt, _, err := loadPolicyOrTable(args[0], c.ErrOrStderr())
			if err != nil {
				return err
			}
			cat, err := exportCatalog(args[0], catalogDir)
			if err != nil {
				return err
			}
			var ex *hosts.Export
			if target == "claude-code" {
				ex, err = hosts.ClaudeCode(rt, cat, principal)
			} else {
				ex, err = hosts.Cursor(rt, cat, principal, filepath.ToSlash(args[0]))
			}
			if err != nil {
				return failuref("export: %v", err)
			}
			if err := writeOutput(c.OutOrStdout(), out, ex.File, 0o644); err != nil {
				return err
			}
			stderr := c.ErrOrStderr()
			if cat == nil {
				fmt.Fprintf(stderr, "note: no catalogue: tools are decided one by one only where a rule names them literally (see --catalog)\n")
			}
			for _, n := range ex.Notes {
				fmt.Fprintf(stderr, "note: %s\n", n)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&target, "target", "", "the host, `TARGET`: claude-code or cursor")
	f.StringVar(&catalogDir, "catalog", "", "the catalogue `DIR`ectory to expand patterns over (default: DIR/catalog when exporting a policy directory)")
	f.StringVar(&principal, "principal", "", "export the decisions of `PRINCIPAL` (default: one with no group or scope of its own)")
	addOutputFlag(f, &out, "-", "the settings to `FILE` (atomically) instead of standard output")
	return c
}

// exportCatalog reads the catalogue to expand patterns over: --catalog, or
// the policy directory's own; nil when there is none.
func exportCatalog(arg, dir string) (*catalog.Catalog, error) {
	if dir == "" {
		st, err := os.Stat(arg)
		if err != nil || !st.IsDir() {
			return nil, nil
		}
		dir = filepath.Join(arg, catalog.Dir)
		if _, err := os.Stat(dir); err != nil {
			return nil, nil
		}
	} else if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, usageErrorf("--catalog %s: not a directory (the catalogue that 'policyc catalog pull' writes)", dir)
	}
	cat, err := catalog.ReadDir(dir)
	if err != nil {
		return nil, failuref("catalogue %v", err)
	}
	return cat, nil
}
