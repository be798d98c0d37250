package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/catalog/hosts"
	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/decide"
)

func init() { register(newExportCmd) }

func newExportCmd() *cobra.Command {
	var target, catalogDir, principal, out string
	var allowCoarse bool
	var tr tableReader
	c := &cobra.Command{
		Use:   "export claude-code|cursor TABLE_OR_DIR [--catalog DIR] [--principal PRINCIPAL] [--trust KEY.pub] [-o FILE]",
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
stricter when it can and prints a note on standard error for every place
where it cannot, such as tools outside the catalogue that Claude Code asks
about but the table denies. The cursor file carries the notes as comments.

A deny pattern of a server no catalogue lists could only be written for
Claude Code as a deny of the whole server (mcp__<server>), which blocks the
tools the table allows there: the export refuses it (exit 2) and says to
run 'policyc catalog pull' and export with --catalog. With --allow-coarse
it denies such servers whole, and says so first, on standard error, before
anything else.

TABLE_OR_DIR may be a signed table (as 'policyc sign' writes it): with
--trust it is read only once its signature verifies (exit codes 10-16 as
'policyc verify' otherwise); without, it is read unverified, with a note.
Only tools are exported: neither host has permission rules for prompts or
resources. Decisions are those of --principal (default: a principal with no
group or scope of its own).

The host may also be given as --target TARGET, before or after the table.

Exit codes: 0 exported (read the notes); 2 usage, or an export that would
deny whole servers for want of a catalogue (without --allow-coarse); 1 the
policy does not compile; 3 the table or the catalogue cannot be read, or the
output written; 10-16 a signed table refused (with --trust).

Examples:
  policyc export claude-code examples/local
  policyc export claude-code team.table.json --catalog policy/catalog -o .claude/settings.policyc.json
  policyc export cursor examples/apps --principal carol@example.com -o ~/.cursor/permissions.json
  policyc export claude-code team.signed.json --trust ci.pub --catalog policy/catalog`,
		Args: argsRange(0, 2),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 2 {
				switch {
				case !isExportTarget(args[0]):
					hint := ""
					if near := compiler.Suggest(args[0], exportTargets); near != "" {
						hint = fmt.Sprintf("did you mean %s? ", near)
					}
					return usageErrorf("%q is not a host policyc exports to: %swrite claude-code or cursor before the table (see 'policyc export --help')", args[0], hint)
				case target != "" && target != args[0]:
					return usageErrorf("the host is given twice, as %s and as --target %s: give it once", args[0], target)
				}
				target, args = args[0], args[1:]
			}
			switch {
			case len(args) == 0 && target != "":
				return usageErrorf("which table or policy directory? policyc export %s TABLE_OR_DIR", target)
			case len(args) == 0:
				return usageErrorf("which host and which table? policyc export claude-code|cursor TABLE_OR_DIR (see 'policyc export --help')")
			case target == "" && isExportTarget(args[0]):
				return usageErrorf("export %s: which table or policy directory? (policyc export %s TABLE_OR_DIR; for a directory named %s, policyc export HOST %s)", args[0], args[0], args[0], args[0])
			case target == "":
				return usageErrorf("which host? policyc export claude-code|cursor %s", args[0])
			}
			if err := checkChoice("target", target, exportTargets...); err != nil {
				return err
			}
			stderr := c.ErrOrStderr()
			tr.stderr = stderr
			rt, _, err := loadPolicyOrTable(args[0], &tr, stderr)
			if err != nil {
				return err
			}
			notePrincipal(stderr, rt.Source(), principal)
			cat, err := exportCatalog(args[0], catalogDir)
			if err != nil {
				return err
			}
			var ex *hosts.Export
			if target == "claude-code" {
				ex, err = hosts.ClaudeCode(rt, cat, principal)
			} else {
				ex, err = hosts.Cursor(rt, cat, principal, exportSource(args[0], rt))
			}
			if err != nil {
				return failuref("export: %v", err)
			}
			if len(ex.Coarse) > 0 {
				if !allowCoarse {
					return coarseRefusal(ex.Coarse, cat != nil)
				}
				// Before anything else: this export blocks what the table
				// allows.
				for _, co := range ex.Coarse {
					fmt.Fprintf(stderr, "policyc: WARNING: %s: every tool is denied (%s), including tools the table does not deny: its deny pattern(s) %s cannot be expanded without a catalogue of its tools (--allow-coarse)\n",
						co.Server, co.Rule, quoted(co.Patterns))
				}
			}
			if err := writeOutput(c.OutOrStdout(), out, ex.File, 0o644); err != nil {
				return err
			}
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
	f.StringVar(&target, "target", "", "the host, `TARGET`: claude-code or cursor (or give it before the table)")
	f.StringVar(&catalogDir, "catalog", "", "the catalogue `DIR`ectory to expand patterns over (default: DIR/catalog when exporting a policy directory)")
	f.StringVar(&principal, "principal", "", "export the decisions of `PRINCIPAL` (default: one with no group or scope of its own)")
	addOutputFlag(f, &out, "-", "the settings to `FILE` (atomically) instead of standard output")
	f.BoolVar(&allowCoarse, "allow-coarse", false, "deny a server whole where a deny pattern cannot be expanded for want of its catalogue (blocks tools the table allows; warns first)")
	tr.addFlags(f)
	return c
}

// coarseRefusal refuses an export that would deny servers whole for want
// of their catalogue, naming them and what to do instead.
func coarseRefusal(coarse []hosts.Coarse, haveCatalog bool) error {
	var what []string
	for _, co := range coarse {
		what = append(what, fmt.Sprintf("%s (%s, as %s)", co.Server, quoted(co.Patterns), co.Rule))
	}
	lacks := "there is no catalogue"
	if haveCatalog {
		lacks = "the catalogue has no snapshot of them"
	}
	return usageErrorf("export refused: deny patterns of %s can be written for Claude Code only as a deny of the whole server, which would block tools the table does not deny, and %s to expand them over. Run 'policyc catalog pull' and export with --catalog DIR, or give --allow-coarse to deny these servers whole",
		strings.Join(what, ", "), lacks)
}

// quoted writes patterns as a quoted, comma-separated list.
func quoted(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// exportSource says, for a file's header, what was exported: the policy,
// by the path compile records (relative to its repository's root, with the
// commit), or the table file and the policy it was compiled from. A path
// relative to where the command ran ("..") would mean nothing in the file:
// the directory is named instead.
func exportSource(arg string, t *decide.Table) string {
	src := t.Source().Source
	p := src.PolicyPath
	relative := p == "" || p == "." || p == ".." || strings.HasPrefix(p, "../")
	var policy string
	switch {
	case src.Commit != "" && (p == "" || p == "."):
		policy = "the policy at the root of its repository"
	case src.Commit != "" || !relative:
		policy = "the policy directory " + p
	}
	if src.Commit != "" {
		policy += " at commit " + src.Commit[:min(12, len(src.Commit))]
		if src.Dirty {
			policy += " with uncommitted changes"
		}
	}
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		if policy == "" {
			abs, err := filepath.Abs(arg)
			if err != nil {
				abs = arg
			}
			policy = "the policy directory " + filepath.Base(abs)
		}
		return policy
	}
	if policy == "" {
		return "the table " + filepath.ToSlash(arg)
	}
	return fmt.Sprintf("the table %s (compiled from %s)", filepath.ToSlash(arg), policy)
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

// exportTargets are the hosts export writes for.
var exportTargets = []string{"claude-code", "cursor"}

// isExportTarget reports whether s names a host export writes for.
func isExportTarget(s string) bool { return slices.Contains(exportTargets, s) }
