package cmd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/catalog/pull"
	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/fileio"
	"github.com/policyc/policyc/runtime/gateway/config"
)

func init() { register(newCatalogCmd) }

func newCatalogCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "catalog",
		Short: "Keep catalogue snapshots of the upstream MCP servers in the policy repository",
		Long: `A catalogue snapshot records what an upstream MCP server offers: its tools
(with their annotations and input schemas), prompts (with their arguments),
resources and resource templates. There is one file per server,
catalog/<server>.json in the policy directory, reviewed and versioned like the
policy. docs/catalog.md describes the format.

Examples:
  policyc catalog pull --config gateway.cue
  policyc catalog pull --config deploy/gateway --dir policy --check`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("catalog has no subcommand %q: use pull (see 'policyc catalog --help')", args[0])
			}
			return usageErrorf("catalog needs a subcommand: pull (see 'policyc catalog --help')")
		},
	}
	c.AddCommand(newCatalogPullCmd())
	return c
}

type catalogPullOptions struct {
	config, dir string
	timeout     time.Duration
	check       bool
}

func newCatalogPullCmd() *cobra.Command {
	o := catalogPullOptions{dir: ".", timeout: pull.DefaultTimeout}
	c := &cobra.Command{
		Use:   "pull --config PATH [--timeout DURATION] [--check] [DIR]",
		Short: "List every upstream server and write its catalogue snapshot",
		Long: `Connect to every upstream of the gateway configuration (stdio commands and
streamable HTTP URLs, as 'policyc gateway' would), list its tools, prompts,
resources and resource templates, and write one snapshot per server to
DIR/catalog/<server>.json, DIR the policy directory (default ".", or --dir).

The configuration is checked as 'policyc gateway' checks it (every key and
value, every upstream: its program found, the variables it needs set), but
the files and secrets only the running gateway uses (the table, the trust
keys, the state directory, the decision log, the webhook secret) need not
be there.

Servers are pulled concurrently, each within --timeout (starting it, the
handshake and every listing). A line on standard error reports each server
as it finishes, with what it offers and how long it took. A server that
fails (it will not start, times out, or answers with malformed listings) is
reported and its old snapshot is kept: a failed pull never overwrites one.
Snapshots are canonical JSON without timestamps: pulling an unchanged server
leaves its file byte for byte as it was. A snapshot whose server is no longer
in the configuration is left alone and reported.

With --check nothing is written: the upstreams are compared with the
snapshots and every difference is printed on standard output (a tool added
or removed, an input schema or an annotation changed, ...). Use it in CI to
notice servers that changed under a reviewed policy.

Annotations are hints the servers give about their own tools, recorded as
stated; they are not trusted.

Exit codes: 0 all servers pulled (with --check: no drift); 4 --check found
drift (a snapshot that reads but does not decode is drift: a pull replaces
it); 3 a server could not be pulled, or the snapshots could not be read or
written; 1 the gateway configuration has problems; 2 usage.

Examples:
  policyc catalog pull --config gateway.cue
  policyc catalog pull --config deploy/gateway --timeout 10s policy
  policyc catalog pull --config gateway.cue --check   # in CI`,
		Args: argsRange(0, 1),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				// The policy directory is an argument, as for every other
				// command; --dir says the same.
				if c.Flags().Changed("dir") && o.dir != args[0] {
					return usageErrorf("the policy directory is given twice, as %s and as --dir %s: give it once", args[0], o.dir)
				}
				o.dir = args[0]
			}
			if o.config == "" {
				return usageErrorf("--config PATH is required: the gateway configuration that names the upstreams (see 'policyc catalog pull --help')")
			}
			if o.timeout <= 0 {
				return usageErrorf("--timeout must be positive, got %s", o.timeout)
			}
			return runCatalogPull(c, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.config, "config", "", "the gateway configuration whose upstreams are pulled: a `PATH` to a directory of CUE files in package gateway, or one file")
	f.StringVar(&o.dir, "dir", ".", "the policy `DIR`ectory, as the argument DIR gives it; snapshots live in DIR/catalog")
	f.DurationVar(&o.timeout, "timeout", pull.DefaultTimeout, "how long one server may take (a `DURATION`), from start to its last listing")
	addCheckFlag(f, &o.check, "exit 4 when an upstream differs from its snapshot")
	return c
}

// catalogUpstreams reads the upstreams of a gateway configuration, with the
// gateway's own reader, so that pull starts exactly what the gateway would.
// The whole configuration is checked, but not the files and secrets only
// the running gateway uses.
func catalogUpstreams(path string, stderr io.Writer) ([]pull.Upstream, error) {
	s, _, err := readGatewayConfig(gatewayOptions{config: path}, config.ForPull, stderr)
	if err != nil {
		return nil, err
	}
	ups := make([]pull.Upstream, 0, len(s.Gateway.Upstreams))
	for _, u := range s.Gateway.Upstreams {
		switch {
		case u.URL != "":
			ups = append(ups, pull.HTTP(u.Name, u.URL, u.Header))
		case u.Command != "":
			ups = append(ups, pull.Command(u.Name, u.Command, u.Args, u.Env, u.Dir))
		default:
			return nil, failuref("upstream %s: neither a command nor a url", u.Name)
		}
	}
	return ups, nil
}

// oldSnapshot is what catalog/<server>.json held before the pull.
type oldSnapshot struct {
	snap      *catalog.Snapshot
	canonical bool
	// err is why the file could not be read as a snapshot; nil when it
	// does not exist. readErr is set when it could not be read at all (an
	// I/O error, not a snapshot that does not decode).
	err     error
	readErr bool
}

func readOldSnapshot(dir, server string) oldSnapshot {
	b, err := fileio.ReadRegular(filepath.Join(dir, catalog.FileName(server)))
	if errors.Is(err, fs.ErrNotExist) {
		return oldSnapshot{}
	}
	if err != nil {
		return oldSnapshot{err: err, readErr: true}
	}
	s, canonical, err := catalog.Decode(b)
	if err == nil && s.Server != server {
		err = fmt.Errorf("holds the snapshot of server %q", s.Server)
	}
	if err != nil {
		return oldSnapshot{err: err}
	}
	return oldSnapshot{snap: s, canonical: canonical}
}

func runCatalogPull(c *cobra.Command, o catalogPullOptions) error {
	stdout, stderr := c.OutOrStdout(), c.ErrOrStderr()
	ups, err := catalogUpstreams(o.config, stderr)
	if err != nil {
		return err
	}
	dir := filepath.Join(o.dir, catalog.Dir)
	rel := filepath.ToSlash(filepath.Join(filepath.Clean(o.dir), catalog.Dir))
	if st, err := os.Stat(o.dir); err != nil || !st.IsDir() {
		return usageErrorf("--dir %s: not a directory (the policy directory, where catalog/ lives)", o.dir)
	}
	if len(ups) == 0 {
		return withCode(ExitProblems, fmt.Errorf("%s has no upstreams: nothing to pull", o.config))
	}
	width := 0
	old := map[string]oldSnapshot{}
	for _, u := range ups {
		width = max(width, len(u.Name))
		old[u.Name] = readOldSnapshot(dir, u.Name)
	}

	verb := "pulling"
	if o.check {
		verb = "checking"
	}
	fmt.Fprintf(stderr, "%s %s from %s\n", verb, count(len(ups), "server"), o.config)
	var failed, written, drifted int
	drift := map[string][]string{}
	progress := func(r pull.Result) {
		took := fmt.Sprintf("(%.2fs)", r.Duration.Round(10*time.Millisecond).Seconds())
		prev := old[r.Server]
		if r.Err != nil {
			failed++
			keep := "no snapshot written"
			if prev.snap != nil || prev.err != nil {
				keep = "old snapshot kept"
			}
			fmt.Fprintf(stderr, "  %-*s  FAILED  %v; %s %s\n", width, r.Server, r.Err, keep, took)
			return
		}
		status := ""
		if o.check && prev.readErr {
			// Not drift: the snapshot is there but cannot be read.
			failed++
			fmt.Fprintf(stderr, "  %-*s  FAILED  %s/%s cannot be read: %v %s\n", width, r.Server, rel, catalog.FileName(r.Server), unwrapPath(prev.err), took)
			return
		}
		if o.check {
			lines := snapshotDrift(rel, prev, r.Snapshot)
			if len(lines) > 0 {
				drifted++
				drift[r.Server] = lines
				status = fmt.Sprintf("drift (%s)", count(len(lines), "difference"))
			} else {
				status = "no drift"
			}
		} else {
			changed, err := catalog.WriteFile(dir, r.Snapshot)
			switch {
			case err != nil:
				failed++
				fmt.Fprintf(stderr, "  %-*s  FAILED  %v %s\n", width, r.Server, err, took)
				return
			case !changed:
				status = "unchanged"
			case prev.err != nil:
				written++
				status = "replaced a snapshot that did not read"
			case prev.snap == nil:
				written++
				status = "new snapshot"
			default:
				written++
				status = fmt.Sprintf("updated (%s)", count(len(catalog.Diff(prev.snap, r.Snapshot)), "change"))
			}
		}
		fmt.Fprintf(stderr, "  %-*s  ok      %s: %s %s\n", width, r.Server, r.Snapshot.Counts(), status, took)
	}
	// An interrupt cancels every pull, so no upstream outlives the command.
	ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results := pull.Pull(ctx, ups, pull.Options{Timeout: o.timeout, Progress: progress, Version: compiler.Version})

	orphans := orphanSnapshots(dir, ups)
	for _, name := range orphans {
		fmt.Fprintf(stderr, "  %s/%s: no upstream %s in %s; left as it is\n", rel, catalog.FileName(name), name, o.config)
	}
	if o.check {
		for _, r := range results {
			for _, line := range drift[r.Server] {
				fmt.Fprintf(stdout, "%s: %s\n", r.Server, line)
			}
		}
	}
	switch {
	case o.check && drifted > 0:
		verb := "differ"
		if drifted == 1 {
			verb = "differs"
		}
		fmt.Fprintf(stderr, "%s of %d %s from %s: run 'policyc catalog pull' and review the change\n", count(drifted, "server"), len(ups), verb, rel)
		if failed > 0 {
			fmt.Fprintf(stderr, "%s could not be checked\n", count(failed, "server"))
		}
		return withCode(ExitChanged, errSilent)
	case failed > 0:
		what := "nothing was written for it (a snapshot already there is left as it was)"
		if failed > 1 {
			what = "nothing was written for them (snapshots already there are left as they were)"
		}
		if o.check {
			what = "it could not be checked"
			if failed > 1 {
				what = "they could not be checked"
			}
		}
		return withCode(ExitFailure, fmt.Errorf("%d of %d servers failed; %s", failed, len(ups), what))
	case o.check:
		fmt.Fprintf(stderr, "%s match %s\n", count(len(ups), "server"), rel)
	default:
		fmt.Fprintf(stderr, "%s pulled, %d written to %s\n", count(len(ups), "server"), written, rel)
	}
	return nil
}

// snapshotDrift says how a fresh pull differs from the file it would
// replace, one line per difference.
func snapshotDrift(rel string, prev oldSnapshot, now *catalog.Snapshot) []string {
	file := rel + "/" + catalog.FileName(now.Server)
	switch {
	case prev.err != nil:
		return []string{fmt.Sprintf("%s cannot be read (%v)", file, prev.err)}
	case prev.snap == nil:
		return []string{fmt.Sprintf("no snapshot yet (%s): the server offers %s", file, now.Counts())}
	}
	var lines []string
	for _, ch := range catalog.Diff(prev.snap, now) {
		lines = append(lines, ch.String())
	}
	if len(lines) == 0 && !prev.canonical {
		lines = append(lines, fmt.Sprintf("%s is not in canonical form (edited by hand?)", file))
	}
	return lines
}

// orphanSnapshots lists the snapshots of servers no upstream names.
func orphanSnapshots(dir string, ups []pull.Upstream) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	known := map[string]bool{}
	for _, u := range ups {
		known[u.Name] = true
	}
	var out []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if ok && !e.IsDir() && !known[name] && !strings.HasPrefix(name, ".") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
