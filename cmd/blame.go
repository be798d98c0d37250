package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/gitsrc"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/principal"
	"github.com/policyc/policyc/runtime/table"
)

func init() { register(newBlameCmd) }

func newBlameCmd() *cobra.Command {
	var item itemFlags
	var rev, repoDir string
	var groups []string
	c := &cobra.Command{
		Use:   "blame --server SERVER [--kind KIND] --name NAME [--principal P [--groups GROUPS]] [--rev REV] [PATH]",
		Short: "Show the rule that decides an item and the commit that introduced it",
		Long: `Find who made a decision what it is: compile the policy at PATH as committed at
REV (default HEAD; read from the git object store, never the work tree), ask
it what it decides for one item, and name the commit that made the deciding
rule (or default) decide it, with its hash, author, date and subject. That is
the commit that last changed the rule's line, unless the policy before it
already decided the item by the same rule (another entry on that line changed,
or the line moved): then the question is asked again there (at each parent
of a merge). The governance ledger: who made this tool need approval, and
when. Renames and moves of the policy files are followed; where the search
cannot go further (a parent whose policy does not compile, at most 64 steps),
blame says the rule may be older. A decision changed and restored by other
lines while the rule's line stood is not seen.

PATH and --repo work as for policyc compile. When no line of the policy
decides the item (the built-in deny, a ui:// resource off the allowlist),
blame says so and names no commit.

Exit codes: 0 found; 1 the policy at REV has problems; 2 bad arguments, not
a repository, unknown revision or policy path, a server the policy does not
name; 3 the tool failed.

Examples:
  policyc blame --server linear --kind tool --name save_issue policy
  policyc blame --server github --kind tool --name merge_pull_request --rev v1.4.0
  policyc blame --server github --kind resource --name repo://acme/app --principal alice --format json
  policyc blame --server github --name merge_pull_request --principal dave@example.com --groups contractors`,
		Args: argsRange(0, 1),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := item.check(c)
			if err != nil {
				return err
			}
			arg := dirArg(args)
			repo, rel, err := openRepo(repoDir, arg)
			if err != nil {
				return err
			}
			defer repo.Close()
			commit, err := repo.Resolve(rev)
			if err != nil {
				return gitError(err)
			}
			snap, err := repo.ReadCommit(commit, rev, rel)
			if err != nil {
				return gitError(err)
			}
			src := &policySource{Files: snap.Files, Source: snap.Source, Serial: snap.Serial, root: rev + ":", revision: true}
			res, err := src.compile(c.ErrOrStderr())
			if err != nil {
				return err
			}
			t, err := decide.LoadForInspection(res.Table)
			if err != nil {
				return failuref("load compiled table: %v", err)
			}
			if _, ok := res.Table.Servers[item.server]; !ok {
				names := slices.Sorted(maps.Keys(res.Table.Servers))
				hint := ""
				if near := compiler.Suggest(item.server, names); near != "" {
					hint = fmt.Sprintf("; did you mean %q?", near)
				}
				return usageErrorf("server %q is not in the policy at %s (%s): every item of it is denied and no line decides it%s; servers: %s",
					item.server, rev, rel, hint, strings.Join(names, ", "))
			}
			who, err := askerWithGroups(res.Table, item.principal, groups)
			if err != nil {
				return err
			}
			if len(groups) == 0 {
				notePrincipal(c.ErrOrStderr(), res.Table, item.principal)
			}
			d := t.Decide(who, item.server, k, item.name)
			var shownGroups []string
			if g := principal.Groups(who); g != "" {
				shownGroups = strings.Split(g, ",") // as the lookup reads them
			}
			b := blameResult{
				Rev: rev, Commit: commit.Hash.String(), Principal: item.principal, Groups: shownGroups, Server: item.server, Kind: item.kind, Name: item.name,
				Decision: d.Effect.String(), Reason: d.Reason.String(), Scope: d.Scope,
			}
			if d.Rule != nil {
				b.Rule = &blameRule{List: listName(d.Rule.Effect), Pattern: d.Rule.Pattern}
			}
			if d.Origin != "" {
				file, line, err := splitOrigin(d.Origin)
				if err != nil {
					return failuref("%v", err)
				}
				b.Origin = path.Join(rel, file) + ":" + strconv.Itoa(line)
				o, stopped, err := introducedBy(repo, commit, rel, file, line, blameItem{who, item.server, k, item.name}, d)
				if err != nil {
					return failuref("%v", err)
				}
				b.Stopped = stopped
				b.Line = o.Text
				b.Introduced = &blameCommit{
					Hash: o.Commit.String(), Author: o.AuthorName, Email: o.AuthorEmail,
					Date: o.Date.UTC().Format(time.RFC3339), Subject: o.Subject,
				}
			}
			if item.format == "json" {
				return writeJSON(c.OutOrStdout(), b)
			}
			writeBlameText(c.OutOrStdout(), b)
			return nil
		},
	}
	f := c.Flags()
	item.add(f)
	f.StringVar(&rev, "rev", "HEAD", "the revision (`REV`) whose policy decides")
	f.StringVar(&repoDir, "repo", "", "the git repository (`DIR`); PATH is then relative to its root")
	f.StringSliceVar(&groups, "groups", nil, "the `GROUPS` (comma-separated) the asker is in by its access token, as the gateway maps them")
	return c
}

// maxBlameSteps bounds how many earlier commits introducedBy compiles.
const maxBlameSteps = 64

// introducedBy returns the commit that made d, the decision at commit c,
// decide by its rule: the last change of the rule's line (file and line in
// the policy at rel), or, when the policy at a parent of that change (any
// parent, for a merge) decided the item by the same rule already, the
// same question asked there. It also returns, when the search stopped
// before it could tell (the policy path is not in a parent, a parent's
// policy does not compile, the step bound), why: the rule may then be
// older than the commit named.
func introducedBy(repo *gitsrc.Repo, c *object.Commit, rel, file string, line int, it blameItem, d decide.Decision) (*gitsrc.LineOrigin, string, error) {
	o, err := repo.BlameLine(c, path.Join(rel, file), line)
	if err != nil {
		return nil, "", err
	}
	cur, dir := c, rel // a commit the search is at, and the policy's directory in it
	for range maxBlameSteps {
		changed, err := repo.Git().CommitObject(o.Commit)
		if err != nil {
			return o, fmt.Sprintf("commit %s cannot be read", o.Commit.String()[:12]), nil
		}
		if _, err := repo.Tree(changed, "", dir); err != nil {
			// The line's blame followed a move the search has not seen:
			// where was the policy in that commit?
			if moved, ok := dirIn(repo, cur, dir, changed); ok {
				dir = moved
			}
		}
		cur = changed
		var next *object.Commit
		var nextDir, nextOrigin, stopped string
		for n := range changed.NumParents() {
			parent, err := changed.Parent(n)
			if err != nil {
				stopped = fmt.Sprintf("the parent of %s is not in this clone (shallow?)", o.Commit.String()[:12])
				continue
			}
			at := dir
			before, why := decideAt(repo, parent, at, it)
			if errors.Is(why, errNoPolicyPath) {
				// A move of the policy takes no credit: ask where its
				// files were in the parent.
				if from, ok := movedFrom(parent, changed, dir); ok {
					at = from
					before, why = decideAt(repo, parent, at, it)
				}
			}
			if why != nil {
				stopped = why.Error()
				continue
			}
			if sameDecider(d, before) {
				next, nextDir, nextOrigin = parent, at, before.Origin
				break
			}
		}
		if next == nil {
			return o, stopped, nil
		}
		file, line, err := splitOrigin(nextOrigin)
		if err != nil {
			return o, "", nil
		}
		dir = nextDir
		if o, err = repo.BlameLine(next, path.Join(dir, file), line); err != nil {
			return nil, "", err
		}
	}
	return o, fmt.Sprintf("the search stopped after %d earlier commits", maxBlameSteps), nil
}

// errNoPolicyPath: the policy's directory is not in a commit.
var errNoPolicyPath = errors.New("no policy path")

// decideAt decides it by the policy at rel in commit c, read from the
// object store without provenance (no serial to count); the error says
// what kept it from deciding.
func decideAt(repo *gitsrc.Repo, c *object.Commit, rel string, it blameItem) (decide.Decision, error) {
	short := c.Hash.String()[:12]
	tree, err := repo.Tree(c, short, rel)
	if err != nil {
		return decide.Decision{}, fmt.Errorf("%w: %s is not in commit %s", errNoPolicyPath, rel, short)
	}
	files, err := repo.TreeFiles(tree, gitsrc.IsPolicyFile)
	if err != nil {
		return decide.Decision{}, fmt.Errorf("the policy at commit %s cannot be read", short)
	}
	res := compiler.Compile(compiler.Input{Files: files, Source: table.Source{PolicyPath: rel}})
	if res.Table == nil {
		return decide.Decision{}, fmt.Errorf("the policy at commit %s does not compile", short)
	}
	t, err := decide.LoadForInspection(res.Table)
	if err != nil {
		return decide.Decision{}, fmt.Errorf("the policy at commit %s does not load", short)
	}
	return t.Decide(it.principal, it.server, it.kind, it.name), nil
}

// dirIn returns the directory the policy at dir in commit from has in
// target, an ancestor on from's first-parent line, following its moves
// (at most maxMoveWalk commits).
func dirIn(repo *gitsrc.Repo, from *object.Commit, dir string, target *object.Commit) (string, bool) {
	c := from
	for range maxMoveWalk {
		if c.Hash == target.Hash {
			return dir, true
		}
		if c.NumParents() == 0 {
			return "", false
		}
		p, err := c.Parent(0)
		if err != nil {
			return "", false
		}
		if _, err := repo.Tree(p, "", dir); err != nil {
			moved, ok := movedFrom(p, c, dir)
			if !ok {
				return "", false
			}
			dir = moved
		}
		c = p
	}
	return "", false
}

// maxMoveWalk bounds dirIn's walk.
const maxMoveWalk = 10000

// movedFrom returns the directory the policy at dir in commit c had in
// its parent, when c moved it: a file under dir that c renamed (by
// go-git's rename detection) names the old place.
func movedFrom(parent, c *object.Commit, dir string) (string, bool) {
	pt, err1 := parent.Tree()
	ct, err2 := c.Tree()
	if err1 != nil || err2 != nil {
		return "", false
	}
	changes, err := object.DiffTreeWithOptions(context.Background(), pt, ct, &object.DiffTreeOptions{DetectRenames: true, RenameScore: 60, RenameLimit: 1000})
	if err != nil {
		return "", false
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	if dir == "." || dir == "" {
		prefix = ""
	}
	for _, ch := range changes {
		from, to := ch.From.Name, ch.To.Name
		if from == "" || to == "" || from == to || !strings.HasPrefix(to, prefix) {
			continue
		}
		inside := strings.TrimPrefix(to, prefix)
		if old, ok := strings.CutSuffix(from, inside); ok {
			if old = strings.TrimSuffix(old, "/"); old == "" {
				old = "."
			}
			return old, true
		}
	}
	return "", false
}

// blameItem is the item blame asks about.
type blameItem struct {
	principal, server string
	kind              table.Kind
	name              string
}

// sameDecider tells whether a and b are one decision by one rule (or
// default) of the same scope.
func sameDecider(a, b decide.Decision) bool {
	if a.Effect != b.Effect || a.Reason != b.Reason || a.Scope != b.Scope || (a.Rule == nil) != (b.Rule == nil) || b.Origin == "" {
		return false
	}
	return a.Rule == nil || a.Rule.Effect == b.Rule.Effect && a.Rule.Pattern == b.Rule.Pattern
}

type blameRule struct {
	List    string `json:"list"`
	Pattern string `json:"pattern"`
}

type blameCommit struct {
	Hash    string `json:"hash"`
	Author  string `json:"author"`
	Email   string `json:"email"`
	Date    string `json:"date"`
	Subject string `json:"subject"`
}

type blameResult struct {
	Rev       string     `json:"rev"`
	Commit    string     `json:"commit"`
	Principal string     `json:"principal"`
	Groups    []string   `json:"groups,omitempty"`
	Server    string     `json:"server"`
	Kind      string     `json:"kind"`
	Name      string     `json:"name"`
	Decision  string     `json:"decision"`
	Reason    string     `json:"reason"`
	Scope     string     `json:"scope,omitempty"`
	Rule      *blameRule `json:"rule"`
	// Origin is the deciding line, repository-relative; empty when no line
	// decides.
	Origin     string       `json:"origin,omitempty"`
	Line       string       `json:"line,omitempty"`
	Introduced *blameCommit `json:"introduced"`
	// Stopped says why the search for an older commit stopped short:
	// the rule may be older than Introduced.
	Stopped string `json:"stopped,omitempty"`
}

// splitOrigin splits a table origin "file:line".
func splitOrigin(origin string) (string, int, error) {
	i := strings.LastIndexByte(origin, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("origin %q has no line number", origin)
	}
	line, err := strconv.Atoi(origin[i+1:])
	if err != nil || line < 1 {
		return "", 0, fmt.Errorf("origin %q has no line number", origin)
	}
	return origin[:i], line, nil
}

func writeBlameText(w io.Writer, b blameResult) {
	who := b.Principal
	if who == "" {
		who = "(any principal)"
	}
	if len(b.Groups) > 0 {
		who += " (groups " + strings.Join(b.Groups, ", ") + ")"
	}
	fmt.Fprintf(w, "%s %s %q on %s for %s at %s (commit %s)\n", b.Decision, b.Kind, b.Name, b.Server, who, b.Rev, b.Commit[:12])
	scope := ""
	if b.Scope != "" && b.Scope != decide.ServerScope {
		scope = " (" + b.Scope + " scope)"
	}
	switch {
	case b.Rule != nil:
		fmt.Fprintf(w, "  decided by: %s %q%s at %s\n", b.Rule.List, b.Rule.Pattern, scope, b.Origin)
	case b.Origin != "" && (b.Scope == decide.ServerScope || b.Scope == ""):
		fmt.Fprintf(w, "  decided by: the %s default of %s at %s\n", b.Kind, b.Server, b.Origin)
	case b.Origin != "":
		fmt.Fprintf(w, "  decided by: not on the allow_list%s at %s\n", scope, b.Origin)
	default:
		fmt.Fprintf(w, "  decided by: %s; no line of the policy decides this, so there is no commit to name\n", describeReason(b.Reason))
		return
	}
	fmt.Fprintf(w, "  line:       %s\n", strings.TrimSpace(b.Line))
	in := b.Introduced
	fmt.Fprintf(w, "  introduced: %s %s %s <%s>\n", in.Hash[:12], in.Date, in.Author, in.Email)
	fmt.Fprintf(w, "              %s\n", in.Subject)
	if b.Stopped != "" {
		fmt.Fprintf(w, "  (the rule may be older: %s)\n", b.Stopped)
	}
}

func describeReason(reason string) string {
	if reason == decide.ByDefault.String() {
		return "the built-in default (deny)"
	}
	return reason
}
