package cmd

import (
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/table"
)

func init() { register(newCompileCmd) }

func newCompileCmd() *cobra.Command {
	var out, rev, repoDir string
	var requireClean bool
	var sign *signOptions
	c := &cobra.Command{
		Use:   "compile [PATH]",
		Short: "Check a policy and freeze it into a decision table",
		Long: `Compile the CUE policy in PATH (default: the current directory) into a frozen
decision table: canonical JSON, byte-identical for the same sources and
compiler version.

Every error is reported, each with file:line:col and a code
(docs/rules/<code>.md); on any error nothing is written and the exit code is 1.
Warnings and infos (rules that can never take effect, holds longer than hosts
wait, ...) are policyc lint's to report, with the repository's policyc.cue.
Output files are written atomically: a reader never sees a partial table.

With --rev REV the policy is read from the git object store at REV (a branch,
a tag, a commit hash, HEAD, HEAD~2, ...), never from the work tree, so an
uncommitted edit cannot leak into a build. The table records where it came
from: the origin URL (without credentials), the commit, the tree hash of the
policy path, the policy path inside the repository and the commit time; its
serial is the commit's depth on the first-parent line (docs/git.md). The same
commit gives the same bytes in every clone.

Without --rev the work tree is compiled. Inside a repository the table is
compared with HEAD: when the policy files equal HEAD's it is exactly the table
--rev HEAD gives; otherwise it is marked "dirty", names HEAD as the commit it
started from and has serial 0. --require-clean refuses a dirty work tree (with
--rev it has nothing to check: a revision build never reads the work tree).

The repository is found by searching upward from PATH. With --repo DIR it is
the repository at DIR, and PATH is relative to the repository root.

Exit codes: 0 written; 1 the policy has problems; 2 not a repository, unknown
revision, no such policy path at the revision, or a dirty tree with
--require-clean; 3 the tool failed (including history missing from a shallow
clone, which the serial needs).

When the policy has a catalog/ directory (snapshots written by policyc
catalog pull; from the revision with --rev), the table also records the
decision for every catalogued tool, prompt and resource, with the rule or
default that decides it and each tool's input-schema digest; policyc diff
then compares every catalogued item. A work-tree catalogue that differs from
HEAD's makes the table dirty, as a changed policy file does.

With --key FILE (or --key-env VAR naming an environment variable that holds
the private key) the table is signed in the same step and written as a DSSE
envelope, as policyc sign would, with the same flags (docs/signing.md);
--expires sets its expiry.

Examples:
  policyc compile examples/team -o table.json
  policyc compile -o - | jq .digest
  policyc compile --rev HEAD policy --key-env POLICYC_SIGNING_KEY --expires 720h -o table.signed.json
  policyc compile --rev HEAD policy -o table.json
  policyc compile --rev v1.4.0 --repo ../policies team -o table.json
  policyc compile --require-clean policy -o table.json`,
		Args: argsRange(0, 1),
		RunE: func(c *cobra.Command, args []string) error {
			arg := dirArg(args)
			var src *policySource
			var err error
			if rev != "" {
				src, err = revisionSource(repoDir, arg, rev)
			} else {
				src, err = workTreeSource(repoDir, arg, requireClean)
			}
			if err != nil {
				return err
			}
			res, err := src.compile(c.ErrOrStderr())
			if err != nil {
				return err
			}
			if src.Source.Dirty {
				fmt.Fprintf(c.ErrOrStderr(), "policyc: note: the policy differs from HEAD (%s); the table is marked dirty and has serial 0\n", strings.Join(src.changed, ", "))
			}
			noteAudit(c.ErrOrStderr(), res.Table)
			b, err := table.Encode(res.Table)
			if err != nil {
				return failuref("encode table: %v", err)
			}
			env, signed, done, err := sign.seal(b, c.ErrOrStderr())
			if err != nil {
				return err
			}
			if signed {
				b = env
			}
			if err := writeOutput(c.OutOrStdout(), out, b, 0o644); err != nil {
				return err
			}
			if signed {
				fmt.Fprintln(c.ErrOrStderr(), done)
			}
			return nil
		},
	}
	sign = newSignOptions(c.Flags())
	sign.addOldSignFlags(c.Flags())
	f := c.Flags()
	addOutputFlag(f, &out, "-", "the table to `FILE` (- for standard output)")
	f.StringVar(&rev, "rev", "", "compile the policy as committed at `REV`, read from the git object store")
	f.StringVar(&repoDir, "repo", "", "the git repository (`DIR`); PATH is then relative to its root")
	f.BoolVar(&requireClean, "require-clean", false, "refuse to compile a work tree whose policy differs from HEAD")
	return c
}

// policySource is a policy to compile and what its table records.
type policySource struct {
	Files  []compiler.File
	Source table.Source
	Serial uint64
	// root is what diagnostic positions are joined to: the directory as
	// the user named it, or REV:path for a revision.
	root string
	// revision is set when the files came from the object store.
	revision bool
	// changed lists the files that make a work tree dirty.
	changed []string
	// Catalog is the policy's catalogue snapshot (catalog/), nil when it
	// has none: the table then records every catalogued item's decision.
	Catalog *catalog.Catalog
}

// compile compiles the source and prints its diagnostics.
func (s *policySource) compile(stderr io.Writer) (*compiler.Result, error) {
	res := compiler.Compile(compiler.Input{Files: s.Files, Source: s.Source, Serial: s.Serial, Catalog: s.Catalog})
	ds := res.Diagnostics
	root := s.root
	if s.revision {
		// REV:path/file.cue:3:5, the way git names a file of a revision:
		// the positions are in the commit, not in the work tree.
		ds = make([]compiler.Diagnostic, len(res.Diagnostics))
		for i, d := range res.Diagnostics {
			ds[i] = d.Rooted(func(file string) string { return s.root + path.Join(s.Source.PolicyPath, file) })
		}
		root = ""
	}
	if err := printDiagnostics(stderr, root, ds); err != nil {
		return nil, err
	}
	return res, nil
}

// compileDir compiles the policy in dir, prints its diagnostics to stderr
// and returns errSilent with ExitProblems when there is an error. It reads
// the work tree only and records no provenance: explain and lint use it.
func compileDir(dir string, stderr io.Writer) (*compiler.Result, error) {
	files, err := readPolicyDir(dir)
	if err != nil {
		return nil, err
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

// noteAudit says on standard error which servers of t are in audit mode:
// a gateway serves every call of theirs, denied ones too, and only logs
// what the rules decided. Lint reports it as audit-mode; a compile in CI
// that does not lint would otherwise ship it unremarked.
func noteAudit(w io.Writer, t *table.Table) {
	var audit []string
	for name, s := range t.Servers {
		if s.Audit {
			audit = append(audit, name)
		}
	}
	if len(audit) == 0 {
		return
	}
	slices.Sort(audit)
	what, it := "server "+quoted(audit)+" is", "it"
	if len(audit) > 1 {
		what, it = "servers "+quoted(audit)+" are", "them"
	}
	fmt.Fprintf(w, "policyc: warning: %s in audit mode: the gateway serves every request of %s, denied ones and ones held for approval too, and only logs what the rules decided (audit-mode)\n", what, it)
}
