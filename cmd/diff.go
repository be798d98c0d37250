package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/spf13/cobra"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/decisiondiff"
	"github.com/policyc/policyc/internal/gitsrc"
	"github.com/policyc/policyc/runtime/table"
)

func init() { register(newDiffCmd) }

func newDiffCmd() *cobra.Command {
	var format, repoDir string
	var tr tableReader
	c := &cobra.Command{
		Use:   "diff OLD NEW [PATH]",
		Short: "Show which decisions change between two revisions or tables",
		Long: `Compare two policies by what they decide, not by their text. Each of OLD and
NEW is a table file (compiled with policyc compile, or signed with policyc
sign: with --trust read only once its signature verifies, else read
unverified, with a note) or a git revision, whose
policy at PATH (default: the current directory; with --repo, relative to the
repository root) is read from the object store and compiled.

For each server, kind and class of principals, the report lists the names
whose decision changes, before → after, with the rule that now decides it:
each literal pattern of either side, for each glob a short name of it
whose decision changes, and one name standing for all the names no rule
matches when the defaults change. The search is exact, not sampled: when no
row is shown, no name's decision changes. Principals "*" means everyone
without a group or principal scope of their own on that server and kind.
Rules added and removed are listed with their origins; a rule that only
moved to another line is neither.

When a side has a catalogue snapshot (catalog/ beside the policy in the
revision, or the items a table compiled with one records), every catalogued
item of either side is compared too: each one whose decision changes gets a
row of its own. Then the pinned definitions are compared: each tool,
prompt or resource added, removed, or whose definition digest changes,
with what changed and a description's word difference, read from both
revisions' catalogues (from table files, by digest alone); in json, the
"definitions" field.

Formats: text (a table), markdown (for a pull-request comment), json.

Exit codes: 0 no decision or pinned definition changes; 4 some decisions
or definitions change (or a search gave up, so no change cannot be promised); 1 a side does not compile; 2 bad
arguments, not a repository, unknown revision or policy path; 3 the tool
failed (an unreadable table, history missing from a shallow clone); 10-16 a
signed table refused (with --trust).

Examples:
  policyc diff origin/main HEAD policy
  policyc diff origin/main HEAD --format markdown > comment.md
  policyc diff v1.3.0 v1.4.0 --repo ../policies team --format json
  policyc diff deployed.json HEAD policy`,
		Args: argsRange(2, 3),
		RunE: func(c *cobra.Command, args []string) error {
			var write func(io.Writer, *decisiondiff.Report) error
			switch format {
			case "text":
				write = decisiondiff.WriteText
			case "markdown":
				write = decisiondiff.WriteMarkdown
			case "json":
				write = decisiondiff.WriteJSON
			default:
				return checkFormat(format, "text", "markdown", "json")
			}
			arg := "."
			if len(args) == 3 {
				arg = args[2]
			}
			tr.stderr = c.ErrOrStderr()
			sides, cats, err := loadSides(c.ErrOrStderr(), &tr, repoDir, arg, args[0], args[1])
			if err != nil {
				return err
			}
			rep, err := decisiondiff.Compare(sides[0], sides[1], decisiondiff.Options{Items: catalogueItems(sides, cats)})
			if err != nil {
				return failuref("%v", err)
			}
			rep.Old.Label, rep.New.Label = args[0], args[1]
			rep.Definitions = definitionChanges(sides, cats)
			var out bytes.Buffer
			if err := write(&out, rep); err != nil {
				return failuref("write report: %v", err)
			}
			if format != "json" {
				writeDefinitionChanges(&out, format, rep.Definitions)
			}
			if _, err := c.OutOrStdout().Write(out.Bytes()); err != nil {
				return failuref("write report: %v", err)
			}
			if rep.Changed() {
				return withCode(ExitChanged, errSilent)
			}
			return nil
		},
	}
	f := c.Flags()
	addFormatFlag(f, &format, "text", "markdown", "json")
	f.StringVar(&repoDir, "repo", "", "the git repository (`DIR`); PATH is then relative to its root")
	tr.addFlags(f)
	return c
}

// isTableFile reports whether a diff side names a file rather than a
// revision.
func isTableFile(arg string) bool {
	st, err := os.Stat(arg)
	return err == nil && st.Mode().IsRegular()
}

// neitherFileNorRevision reports a side that names no regular file and no
// revision, saying why it is neither: the user may have meant either, a
// misspelt table file or a misspelt branch. why is the reason it is no
// revision: of the repository at repoDir, or, when repoDir is "", the
// error that found no repository. When a file of a close name is in the
// same directory, it is what the user meant: it is suggested, and the
// reason the side is no revision is left out. Else advice, when given,
// ends the message.
func neitherFileNorRevision(side string, why error, repoDir, advice string) error {
	file := "no such file"
	if st, err := os.Stat(side); err == nil {
		file = "a " + fileKind(st.Mode()) + ", not a table file"
	}
	near := nearFile(side)
	var msg string
	switch {
	case repoDir == "":
		msg = fmt.Sprintf("%s: %s, and not a revision: %v", side, file, why)
	case near != "":
		msg = fmt.Sprintf("%s: %s, and not a revision of the repository at %s", side, file, repoDir)
	default:
		reason := why.Error()
		if errors.Is(why, plumbing.ErrReferenceNotFound) {
			reason = "no branch, tag or commit by that name"
		}
		msg = fmt.Sprintf("%s: %s, and not a revision of the repository at %s (%s)", side, file, repoDir, reason)
	}
	if near != "" {
		return fmt.Errorf("%s; did you mean %s?", msg, near)
	}
	if advice != "" && !errors.Is(why, gitsrc.ErrNoCommits) {
		msg += "; " + advice
	}
	return errors.New(msg)
}

func fileKind(m fs.FileMode) string {
	if m.IsDir() {
		return "directory"
	}
	return "special file"
}

// nearFile returns the regular file in the directory of name whose name is
// closest to name's, when it is close enough to be a misspelling of it;
// else "".
func nearFile(name string) string {
	dir, base := filepath.Split(name)
	entries, err := os.ReadDir(filepath.Join(".", dir))
	if err != nil {
		return ""
	}
	var files []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != base && strings.HasSuffix(e.Name(), ".json") { // tables only
			files = append(files, e.Name())
		}
	}
	near := compiler.Nearest(base, files, 1)
	if len(near) == 0 {
		return ""
	}
	return dir + near[0]
}

// loadSides loads the two sides: table files are read as they are,
// revisions are read from git and compiled, both at once. Diagnostics are
// printed old side first.
func loadSides(stderr io.Writer, tr *tableReader, repoDir, arg string, revs ...string) ([2]*table.Table, [2]*catalog.Catalog, error) {
	var out [2]*table.Table
	var cats [2]*catalog.Catalog
	var srcs [2]*policySource
	var repo *gitsrc.Repo
	for i, r := range revs {
		if isTableFile(r) {
			t, err := tr.read(r)
			if err != nil {
				return out, cats, tableFileError(r, err, "diff reads tables written by policyc compile or policyc sign")
			}
			out[i] = t
			continue
		}
		if repo == nil {
			var rel string
			var err error
			if repo, rel, err = openRepo(repoDir, arg); err != nil {
				var ne *gitsrc.NotRepositoryError
				switch {
				case errors.As(err, &ne) && repoDir != "":
					// --repo names no repository: that is the problem, not
					// the revision.
					return out, cats, withCode(ExitUsage, fmt.Errorf("--repo %s: %v; %s", repoDir, ne, repoAdvice(repoDir)))
				case errors.As(err, &ne):
					return out, cats, withCode(ExitUsage, neitherFileNorRevision(r, ne, "", repoAdvice(repoDir)))
				}
				return out, cats, err
			}
			defer repo.Close()
			arg = rel
		}
		commit, err := repo.Resolve(r)
		var re *gitsrc.RevisionError
		if errors.As(err, &re) {
			return out, cats, withCode(ExitUsage, neitherFileNorRevision(r, re.Err, repo.Dir(), "check the name, or fetch it first"))
		}
		if err != nil {
			return out, cats, gitError(err)
		}
		snap, err := repo.ReadCommit(commit, r, arg)
		if err != nil {
			return out, cats, gitError(err)
		}
		if cats[i], err = revisionCatalogue(repo, snap.Commit, r, arg); err != nil {
			return out, cats, err
		}
		srcs[i] = &policySource{Files: snap.Files, Source: snap.Source, Serial: snap.Serial, root: r + ":", revision: true, Catalog: cats[i]}
	}
	// Compile the revisions side by side; print their diagnostics in order.
	var diags [2]bytes.Buffer
	var errs [2]error
	var wg sync.WaitGroup
	for i, s := range srcs {
		if s == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.compile(&diags[i])
			if err != nil {
				errs[i] = err
				return
			}
			// Encoding sets the digest: the one policyc compile gives
			// the revision, so the report names the table it would build.
			if _, err := table.Encode(res.Table); err != nil {
				errs[i] = failuref("encode the table of %s: %v", revs[i], err)
				return
			}
			out[i] = res.Table
		}()
	}
	wg.Wait()
	for i := range srcs {
		stderr.Write(diags[i].Bytes())
	}
	for _, err := range errs {
		if err != nil {
			return out, cats, err
		}
	}
	return out, cats, nil
}
