package cmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/importer"
	"github.com/policyc/policyc/runtime/table"
)

func init() { register(newImportCmd) }

func newImportCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "import hangar|claude-code FILE [-o FILE.cue]",
		Short: "Convert MCP Hangar or Claude Code access rules into a policyc policy",
		Long: `Convert the access policy of another tool into a CUE policy that decides the
same, for review and commit:

  hangar       an MCP Hangar config.yaml: mcp_servers.<id>.tools (allow_list,
               deny_list, approval_list, approval_timeout_seconds) and
               mcp_servers.<id>.access.prompt / access.resource
  claude-code  the MCP permission rules of a Claude Code settings file
               (permissions.allow, ask and deny with mcp__ names)

Every key of the file is carried over, reported as not carried over with the
reason (on standard error), or refused as an error naming its position: an
unknown key is never ignored. With any error nothing is written. The policy is
checked by compiling it before it is written. docs/catalog.md says what each
import carries over and why.

Exit codes: 0 imported (read the notes); 1 the file has problems, nothing
written; 2 usage; 3 the file could not be read or the policy written.

Examples:
  policyc import hangar config.yaml > policy/imported.cue
  policyc import hangar deploy/hangar.yaml -o policy/hangar.cue
  policyc import claude-code .claude/settings.json -o policy/claude.cue`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("import has no source %q: use hangar or claude-code (see 'policyc import --help')", args[0])
			}
			return usageErrorf("import needs a source: hangar or claude-code (see 'policyc import --help')")
		},
	}
	c.AddCommand(newImportSourceCmd("hangar", "CONFIG.yaml", "an MCP Hangar config.yaml", importer.Hangar, `Import the access policy of an MCP Hangar config.yaml.

Hangar allows every tool, prompt and resource a server's lists do not
restrict, and denies by default once a block has an allow_list; deny_list
beats approval_list beats allow_list. The policy says so with an explicit
default for every server and kind. Patterns are Python fnmatch globs; they
are translated into policyc globs that match exactly the same names
(case-sensitively, as fnmatch does on Linux and macOS). Approval lists go to
the gateway's approvals page.

Refused, with the position: unknown keys; a key written twice in one
mapping (Hangar would read the last and drop the other); approval_list under
access.prompt or access.resource (no approval hold exists on a fetch; use
deny_list); per-tenant tool_access and access policies on one member of a
group (policyc cannot narrow by them, and dropping them would allow more);
values of the wrong type; patterns with a reversed range. Not carried over, and said so:
deployment settings (mode, command, ...), approval_channel, ui_resources
(every ui:// resource stays denied) and the sections that configure the
Hangar process.

Examples:
  policyc import hangar config.yaml
  policyc import hangar config.yaml -o policy/hangar.cue`))
	c.AddCommand(newImportSourceCmd("claude-code", "SETTINGS.json", "a Claude Code settings file", importer.ClaudeCode, `Import the MCP permission rules of a Claude Code settings file.

Claude Code checks deny, then ask, then allow, and the first matching rule
decides: the policy's deny_list, approval_list and allow_list keep that
order, and an ask rule becomes an approval on the gateway's approvals page.
Rules take the forms Claude Code documents: mcp__<server> and
mcp__<server>__* (every tool of the server) and mcp__<server>__<tool>.

Refused, with the position: MCP rules outside that grammar (mcp__*, wildcards
inside a tool name, argument patterns), unknown keys under permissions, and
defaultMode bypassPermissions. Not carried over, and said so: rules about
Claude Code's own tools (Bash, Read, ...), and everything outside
permissions. Stricter than Claude Code, and said so in the policy: a tool no
rule names is denied (Claude Code would ask; policyc has no asking default),
and prompts and resources are denied (Claude Code's rules do not cover them).

Examples:
  policyc import claude-code .claude/settings.json
  policyc import claude-code ~/.claude/settings.json -o policy/claude.cue`))
	return c
}

func newImportSourceCmd(name, arg, what string, run func(string, []byte) *importer.Result, long string) *cobra.Command {
	var out string
	var force bool
	c := &cobra.Command{
		Use:   name + " " + arg + " [-o FILE.cue] [--force]",
		Short: "Import " + what,
		Long:  long,
		Args:  argsRange(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			if out != "-" && out != "" {
				if st, err := os.Stat(out); err == nil {
					if st.IsDir() {
						return usageErrorf("-o %s is a directory: give the file to write, e.g. %s", out, filepath.Join(out, "imported.cue"))
					}
					if !force {
						return usageErrorf("-o %s already exists: import does not overwrite a policy file unless --force is given", out)
					}
				} else if !errors.Is(err, fs.ErrNotExist) {
					return failuref("%v", err)
				}
			}
			data, err := os.ReadFile(args[0])
			if err != nil {
				return failuref("%v", err)
			}
			res := run(filepath.ToSlash(args[0]), data)
			stderr := c.ErrOrStderr()
			errs, notes := 0, 0
			for _, f := range res.Findings {
				fmt.Fprintln(stderr, f)
				if f.Error {
					errs++
				} else {
					notes++
				}
			}
			if errs > 0 {
				fmt.Fprintf(stderr, "%s in %s: nothing written\n", count(errs, "error"), args[0])
				return withCode(ExitProblems, errSilent)
			}
			// The policy must compile before it is written; an error here
			// is a bug in the import, not in the file.
			file := "imported.cue"
			if out != "-" && out != "" {
				file = filepath.Base(out)
			}
			cres := compiler.Compile(compiler.Input{Files: []compiler.File{{Name: file, Data: res.CUE}}, Source: table.Source{PolicyPath: "."}})
			for _, d := range cres.Diagnostics {
				if d.Severity == compiler.Error {
					return failuref("the imported policy does not compile (a bug in policyc import): %s", d.Format(""))
				}
				fmt.Fprintf(stderr, "note: the imported policy: %s\n", d.Format(""))
				notes++
			}
			if err := writeOutput(c.OutOrStdout(), out, res.CUE, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "imported %s from %s (%s)\n", count(len(cres.Policy.Servers), "server"), args[0], count(notes, "note"))
			return nil
		},
	}
	addOutputFlag(c.Flags(), &out, "-", "the policy to `FILE` (atomically) instead of standard output")
	c.Flags().BoolVar(&force, "force", false, "overwrite the -o file if it exists")
	return c
}
