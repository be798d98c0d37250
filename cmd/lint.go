package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/gitsrc"
	"github.com/policyc/policyc/lint"
)

func init() { register(newLintCmd) }

func newLintCmd() *cobra.Command {
	var (
		staged, listRules          bool
		format, failLevel, cfgPath string
		color                      string
	)
	c := &cobra.Command{
		Use:   "lint [DIR]",
		Short: "Find rules that cannot take effect and every other problem in a policy",
		Long: `Lint the CUE policy in DIR (default: the current directory): everything the
compiler reports, with the same codes and positions, and the reachability
analysis: rules wholly or partly shadowed by higher-precedence rules, approvals
a deny always beats, allows another scope always overrides, group and
principal rules that try to widen access, duplicate and empty patterns, ui://
URIs the ui allowlist denies, approval holds longer than MCP hosts wait.

When DIR has a catalog/ directory (snapshots written by policyc catalog
pull), the policy is also checked against what the servers offer: patterns
that match no catalogued item (with the nearest names), catalogued items no
rule names (and the default that decides them), tools whose annotations say
they may be destructive allowed without approval, approvals on tools marked
read-only, and tools whose input schema changed since the snapshot committed
at HEAD. Annotations are hints from the servers, not trust (docs/catalog.md).

Every finding has a rule id, a level and a page at docs/rules/<id>.md;
'policyc lint --list-rules' prints the catalogue. policyc.cue at the policy
root (CUE, package policyc) sets rule levels, ignored files and the fail
level; a comment '// policyc:ignore <id> <reason>' on a finding's line or the
line above silences that finding. Rules whose default level is error stop
compilation and can be neither lowered nor ignored.

With --staged the policy (and policyc.cue) are read from the git index, not
the work tree: what will be committed is what is judged. This is the
pre-commit hook (.pre-commit-hooks.yaml).

Formats: text (findings grouped by file and a summary table; colour only on
a terminal), json, sarif (SARIF 2.1.0, for code scanning), github (workflow
annotations).

Exit codes: 0 no finding at or above the fail level (default error), 1 some
finding is, 2 usage error, 3 the tool failed (an unreadable or invalid
policyc.cue, an unreadable directory or index).

Examples:
  policyc lint examples/team
  policyc lint --staged
  policyc lint --fail-level warning policy/   # with policy/catalog/*.json
  policyc lint --fail-level warning --format github policy/
  policyc lint --format sarif > policyc.sarif
  policyc lint --list-rules`,
		Args: argsRange(0, 1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkFormat(format, lint.Formats...); err != nil {
				return err
			}
			if failLevel != "" {
				if err := checkChoice("fail-level", failLevel, "error", "warning"); err != nil {
					return err
				}
			}
			if err := checkChoice("color", color, "auto", "always", "never"); err != nil {
				return err
			}
			dir := dirArg(args)
			stderr := c.ErrOrStderr()

			var files []compiler.File
			var stagedCfg *compiler.File
			var cat *lint.Catalogue
			if staged {
				repo, err := gitsrc.Open(dir)
				if err != nil {
					return withCode(ExitFailure, notRepoAdvice(err, "run policyc lint --staged inside the repository, or name a policy directory in its work tree as DIR"))
				}
				defer repo.Close()
				if err := fileNotDir(dir); err != nil {
					return err
				}
				rel, err := repo.RelPath(dir)
				var be *gitsrc.BareError
				if errors.As(err, &be) {
					return withCode(ExitFailure, fmt.Errorf("%w and no index, so nothing is staged in it; run policyc lint --staged in a clone with a work tree", err))
				}
				if err != nil {
					return withCode(ExitFailure, err)
				}
				if files, stagedCfg, err = repo.Staged(rel); err != nil {
					return withCode(ExitFailure, err)
				}
				noteUnstaged(stderr, dir, files, stagedCfg)
				cfiles, err := stagedCatalogueFiles(repo, rel)
				if err != nil {
					return err
				}
				if cat, err = lintCatalogue(filepath.Join(dir, catalog.Dir)+" (staged)", cfiles, repo, rel, stderr); err != nil {
					return err
				}
			} else if !listRules {
				var err error
				if files, err = readPolicyDir(dir); err != nil {
					return err
				}
				if cat, err = workTreeLintCatalogue(dir, stderr); err != nil {
					return err
				}
			}
			cfg, err := loadLintConfig(dir, cfgPath, staged, stagedCfg, stderr)
			if err != nil {
				return err
			}

			out := c.OutOrStdout()
			if listRules {
				switch format {
				case "text":
					return lint.WriteRules(out, cfg)
				case "json":
					return lint.WriteRulesJSON(out, cfg)
				}
				return usageErrorf("--list-rules prints text or json, not %s", format)
			}
			rep := lint.LintCatalogue(files, cfg, cat)
			o := lint.Output{Root: filepath.ToSlash(dir), Color: useColor(color, out), Sources: map[string][]byte{}}
			for _, f := range files {
				o.Sources[f.Name] = f.Data
			}
			if err := lint.Write(out, format, rep, o); err != nil {
				return withCode(ExitFailure, err)
			}
			level := cfg.FailLevel
			if failLevel != "" {
				level, _ = compiler.ParseSeverity(failLevel)
			}
			if rep.Fails(level) {
				return withCode(ExitProblems, errSilent)
			}
			return nil
		},
	}
	f := c.Flags()
	f.BoolVar(&staged, "staged", false, "lint the policy as staged in the git index, not the work tree")
	addFormatFlag(f, &format, lint.Formats...)
	f.StringVar(&failLevel, "fail-level", "", "exit 1 when a finding is at `LEVEL` or above: error or warning (default: fail_level in policyc.cue, else error)")
	f.BoolVar(&listRules, "list-rules", false, "print the rule catalogue (text or json) and exit")
	f.StringVar(&cfgPath, "config", "", "read the lint configuration from `FILE` instead of DIR/policyc.cue")
	f.StringVar(&color, "color", "auto", "`WHEN` to colour the text format: auto (only on a terminal, unless NO_COLOR is set), always or never")
	return c
}

// workTreeLintCatalogue reads the catalogue beside a policy on disk and,
// when the policy is in a repository with a commit, the one committed at
// HEAD. Nil when the policy has no catalogue: the catalogue rules then do
// not run.
func workTreeLintCatalogue(dir string, stderr io.Writer) (*lint.Catalogue, error) {
	cdir := filepath.Join(dir, catalog.Dir)
	files, err := readCatalogueDir(cdir)
	if err != nil || len(files) == 0 {
		return nil, err
	}
	repo, err := gitsrc.Open(dir)
	var ne *gitsrc.NotRepositoryError
	if errors.As(err, &ne) {
		return lintCatalogue(cdir, files, nil, "", stderr)
	}
	if err != nil {
		return nil, withCode(ExitFailure, err)
	}
	defer repo.Close()
	rel, err := repo.RelPath(dir)
	if err != nil {
		return nil, withCode(ExitFailure, err)
	}
	return lintCatalogue(cdir, files, repo, rel, stderr)
}

// lintCatalogue parses the snapshot files the policy is linted against and
// reads HEAD's for input-schema-changed (none outside a repository or
// before the first commit). A snapshot at HEAD that does not read is noted
// and not compared: the files being linted may be its fix.
func lintCatalogue(where string, files []catalog.File, repo *gitsrc.Repo, rel string, stderr io.Writer) (*lint.Catalogue, error) {
	cur, err := parseCatalogue(filepath.ToSlash(where), files)
	if err != nil || cur == nil {
		return nil, err
	}
	cat := &lint.Catalogue{Current: cur, Files: files}
	if repo == nil {
		return cat, nil
	}
	head, err := repo.Head()
	if errors.Is(err, gitsrc.ErrNoCommits) {
		return cat, nil
	}
	if err != nil {
		return nil, gitError(err)
	}
	committed, err := treeCatalogueFiles(repo, head, "HEAD", rel)
	if err != nil {
		return nil, err
	}
	if len(committed) == 0 {
		return cat, nil
	}
	if cat.Committed, err = catalog.Parse(committed); err != nil {
		fmt.Fprintf(stderr, "policyc: note: the catalogue committed at HEAD does not read, so input schemas are not compared with it: %v\n", err)
		cat.Committed = nil
	}
	return cat, nil
}

// loadLintConfig reads the lint configuration: --config FILE, else the one
// staged at the policy root (with --staged) or on disk beside the policy,
// else the defaults. A configuration that exists but cannot be used is a
// tool failure: its problems are printed and nothing is linted.
func loadLintConfig(dir, path string, staged bool, stagedCfg *compiler.File, stderr io.Writer) (*lint.Config, error) {
	var cfg *lint.Config
	var err error
	root := dir
	switch {
	case path != "":
		root = filepath.Dir(path)
		cfg, err = lint.ReadConfig(path)
	case staged && stagedCfg != nil:
		cfg, err = lint.ParseConfig(*stagedCfg)
		if ce, ok := err.(*lint.ConfigError); ok {
			ce.File = filepath.Join(dir, compiler.ConfigFileName) + " (staged)"
		}
	case staged:
		return lint.DefaultConfig(), nil
	default:
		p := filepath.Join(dir, compiler.ConfigFileName)
		if _, statErr := os.Stat(p); errors.Is(statErr, os.ErrNotExist) {
			return lint.DefaultConfig(), nil
		}
		cfg, err = lint.ReadConfig(p)
	}
	if err == nil {
		return cfg, nil
	}
	var ce *lint.ConfigError
	if errors.As(err, &ce) {
		for _, d := range ce.Diagnostics {
			fmt.Fprintln(stderr, d.Format(filepath.ToSlash(root)))
		}
	}
	return nil, withCode(ExitFailure, err)
}

// useColor decides whether the text format is coloured: never for a writer
// that is not a terminal, and never when NO_COLOR is set (no-color.org).
func useColor(mode string, w io.Writer) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
