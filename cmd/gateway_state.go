package cmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/cobra"

	"github.com/policyc/policyc/internal/termsafe"
	"github.com/policyc/policyc/runtime/approval"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/gateway/config"
)

// openState opens the state database the configuration's state.postgres
// names, nil without one.
func openState(ctx context.Context, st *config.State, logger *slog.Logger) (*approval.PostgresStore, error) {
	if st == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pg, err := approval.OpenPostgres(ctx, approval.PostgresOptions{DSN: st.DSN, Replica: st.Replica, Logger: logger})
	if err != nil {
		return nil, failuref("state.postgres (the database in %s): %v", st.DSNEnv, err)
	}
	return pg, nil
}

// sharedTables checks every table the loader accepts against the last one
// any replica accepted, and records it (unless check): the rollback
// high-water mark is the fleet's.
func sharedTables(load func(func(*decide.Table) error) (*decide.Table, error), pg *approval.PostgresStore, check bool) func(func(*decide.Table) error) (*decide.Table, error) {
	return func(accept func(*decide.Table) error) (*decide.Table, error) {
		return load(func(t *decide.Table) error {
			if err := accept(t); err != nil {
				return err
			}
			return pg.AcceptTable(context.Background(), t, check)
		})
	}
}

// staleAfter is how long a replica may go unheard of before status says
// so: it tells the database it is alive every few seconds.
const staleAfter = 30 * time.Second

func newGatewayStatusCmd() *cobra.Command {
	var cfgPath string
	o := &approvalsOptions{tokenEnv: defaultTokenEnv, timeout: 30 * time.Second}
	c := &cobra.Command{
		Use:   "status [--config PATH] [--admin URL] [--format text|json]",
		Short: "Show the gateway replicas' tables, and a running gateway's audit servers and drift",
		Long: `Show what the gateway serves.

With --config, the replicas that share the state database of the
configuration's state.postgres (its connection string is read from the
variable dsn_env names): each replica's name, host and process, the serial
and digest of the table it serves and since when, and when it was last heard
of; then the last table any replica accepted (the rollback high-water mark).
Replicas serving different serials are a mixed fleet, which status points
out; a replica not heard of for 30 s is marked stale (stopped, or cut off from
the database).

With --admin, one running gateway, asked through its admin API (the admin
listener, with an approver token read from the variable --token-env names,
as policyc approvals does): its serving table's serial, digest and expiry,
its servers in audit mode (what their rules deny or hold is served, and
logged as would_deny or would_hold), and its drift: each listed item whose
definition is not the one the table pins, with the pinned and live digests,
whether it is hidden, and what changed. Drift is resolved by reviewing the
change, pulling the catalogue (policyc catalog pull) and deploying a new
table. Without --config, --admin defaults to $POLICYC_ADMIN_URL.

Give both to see the fleet and one gateway together.

Exit codes: 0 shown (drift and audit included); 1 the configuration has
problems or has no state.postgres; 2 usage; 3 the database or the admin API
cannot be reached; 5 the admin API refused the token.

Examples:
  POLICYC_STATE_DSN=postgres://gateway@db.internal/policyc policyc gateway status --config /etc/policyc/gateway
  POLICYC_ADMIN_TOKEN=... policyc gateway status --admin https://gateway.internal:8443
  POLICYC_ADMIN_TOKEN=... policyc gateway status --admin https://gateway.internal:8443 --format json | jq '.gateway.drift'`,
		Args: argsRange(0, 0),
		PreRunE: func(*cobra.Command, []string) error {
			return checkFormat(o.format, "text", "json")
		},
		RunE: func(c *cobra.Command, args []string) error {
			if cfgPath == "" && o.admin == "" {
				o.admin = os.Getenv("POLICYC_ADMIN_URL")
			}
			if cfgPath == "" && o.admin == "" {
				return usageErrorf("give --config PATH (the replicas in the configuration's state database), --admin URL (a running gateway's table, audit servers and drift), or both")
			}
			var fleet *fleetStatus
			if cfgPath != "" {
				f, err := readFleet(c, cfgPath)
				if err != nil {
					return err
				}
				fleet = f
			}
			var gw *approval.GatewayStatus
			if o.admin != "" {
				gw = &approval.GatewayStatus{}
				if err := o.call(c, "GET", "/status", nil, gw); err != nil {
					return err
				}
			}
			w := c.OutOrStdout()
			if o.format == "json" {
				return writeStatusJSON(w, fleet, gw)
			}
			if fleet != nil {
				writeStatus(w, fleet.replicas, fleet.accepted, fleet.now)
			}
			if gw != nil {
				if fleet != nil {
					fmt.Fprintln(w)
				}
				return writeGatewayStatus(w, o.admin, gw)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&cfgPath, "config", "", "the gateway configuration: a `PATH` to a directory of CUE files in package gateway, or one file")
	f.StringVar(&o.admin, "admin", "", "a running gateway's admin listener, a `URL` such as https://gateway.internal:8443 (without --config, default $POLICYC_ADMIN_URL)")
	f.StringVar(&o.tokenEnv, "token-env", defaultTokenEnv, "the environment variable `VAR` holding the approver token")
	f.DurationVar(&o.timeout, "timeout", o.timeout, "give up on the admin API after this `DURATION`")
	addFormatFlag(f, &o.format, "text", "json")
	addOldJSONFlag(f, &o.format)
	return c
}

// fleetStatus is what the state database says of the replicas.
type fleetStatus struct {
	replicas []approval.ReplicaStatus
	accepted *approval.AcceptedTable
	now      time.Time
}

// readFleet reads the replicas from the state database of the
// configuration at cfgPath.
func readFleet(c *cobra.Command, cfgPath string) (*fleetStatus, error) {
	s, _, err := readGatewayConfig(gatewayOptions{config: cfgPath}, config.ForPull, c.ErrOrStderr())
	if err != nil {
		return nil, err
	}
	if s.State == nil {
		return nil, withCode(ExitProblems, fmt.Errorf("%s has no state.postgres: a single gateway keeps its state in state_dir, and has no replicas to show (ask it with --admin URL instead)", cfgPath))
	}
	dsn, ok := os.LookupEnv(s.State.DSNEnv)
	if !ok || dsn == "" {
		return nil, withCode(ExitProblems, fmt.Errorf("state.postgres.dsn_env: %s is not set: export the state database's connection string in it", s.State.DSNEnv))
	}
	st := *s.State
	st.DSN = dsn
	pg, err := openState(c.Context(), &st, nil)
	if err != nil {
		return nil, err
	}
	defer pg.Close()
	replicas, accepted, now, err := pg.Status(c.Context())
	if err != nil {
		return nil, failuref("%v", err)
	}
	return &fleetStatus{replicas, accepted, now}, nil
}

func writeStatusJSON(w io.Writer, fleet *fleetStatus, gw *approval.GatewayStatus) error {
	type replica struct {
		approval.ReplicaStatus
		Stale bool `json:"stale"`
	}
	// Replicas and serials are there with --config (empty lists when there
	// are none), gateway with --admin.
	out := struct {
		Replicas []replica               `json:"replicas,omitzero"`
		Accepted *approval.AcceptedTable `json:"accepted,omitempty"`
		Serials  []uint64                `json:"serials,omitzero"`
		Gateway  *approval.GatewayStatus `json:"gateway,omitempty"`
	}{Gateway: gw}
	if fleet != nil {
		out.Replicas, out.Accepted, out.Serials = []replica{}, fleet.accepted, serials(fleet.replicas, fleet.now)
		for _, r := range fleet.replicas {
			out.Replicas = append(out.Replicas, replica{r, fleet.now.Sub(r.Seen) > staleAfter})
		}
	}
	return writeJSONOut(w, out)
}

// serials are the distinct serials live replicas serve, ascending.
func serials(replicas []approval.ReplicaStatus, now time.Time) []uint64 {
	seen := map[uint64]bool{}
	out := []uint64{}
	for _, r := range replicas {
		if now.Sub(r.Seen) <= staleAfter && !seen[r.Serial] {
			seen[r.Serial] = true
			out = append(out, r.Serial)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func writeStatus(w io.Writer, replicas []approval.ReplicaStatus, accepted *approval.AcceptedTable, now time.Time) {
	if len(replicas) == 0 {
		fmt.Fprintln(w, "no replica has served a table yet")
	}
	for _, r := range replicas {
		state := "live"
		if d := now.Sub(r.Seen); d > staleAfter {
			state = fmt.Sprintf("stale: not heard of for %s", d.Round(time.Second))
		}
		fmt.Fprintf(w, "%s (%s, pid %d): serial %d %s since %s, %s\n", r.Name, r.Host, r.PID, r.Serial, r.Digest, r.Loaded.UTC().Format(time.RFC3339), state)
	}
	if accepted != nil {
		fmt.Fprintf(w, "last accepted: serial %d %s, by %s at %s\n", accepted.Serial, accepted.Digest, accepted.By, accepted.At.UTC().Format(time.RFC3339))
	}
	if s := serials(replicas, now); len(s) > 1 {
		parts := make([]string, len(s))
		for i, v := range s {
			parts[i] = fmt.Sprint(v)
		}
		fmt.Fprintf(w, "mixed fleet: live replicas serve serials %s; reload the older ones (SIGHUP) once the newer table is deployed to them\n", strings.Join(parts, ", "))
	}
}

// writeGatewayStatus prints what the admin API at admin answered of its
// gateway. What an upstream wrote (item names, the difference) is printed
// through termsafe.String.
func writeGatewayStatus(w io.Writer, admin string, st *approval.GatewayStatus) error {
	tb := st.Table
	expiry := "no expiry"
	if tb.Expires != nil {
		expiry = "expires " + stamp(*tb.Expires)
		if tb.Expired {
			expiry = "EXPIRED at " + stamp(*tb.Expires) + ": everything is denied until a renewed table is deployed"
		}
	}
	fmt.Fprintf(w, "gateway %s: serial %d %s, %s\n", termsafe.String(admin), tb.Serial, termsafe.String(tb.Digest), expiry)
	if len(st.Audit) > 0 {
		names := make([]string, len(st.Audit))
		for i, n := range st.Audit {
			names[i] = termsafe.String(n)
		}
		fmt.Fprintf(w, "audit mode: %s (what the rules deny or hold is served, and logged as would_deny or would_hold)\n", strings.Join(names, ", "))
	}
	if len(st.Drift) == 0 {
		if st.Pinned != nil && len(st.Pinned) == 0 {
			// Not of an earlier build, whose status has no pinned list.
			fmt.Fprintln(w, "pins off: the table pins no definition (it was compiled without a catalogue snapshot), so drift is not looked for")
			return nil
		}
		fmt.Fprintln(w, "no drift: every listed item is the one the table pins")
		return nil
	}
	items := "items differ"
	if len(st.Drift) == 1 {
		items = "item differs"
	}
	fmt.Fprintf(w, "drift: %d %s from the table's pins; review the change, pull the catalogue (policyc catalog pull) and deploy a new table\n", len(st.Drift), items)
	t := tablewriter.NewTable(w,
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
	)
	t.Header("Server", "Kind", "Name", "Action", "Pinned", "Live", "Since", "Difference")
	for _, d := range st.Drift {
		action := "served (" + d.Mode + ")"
		if d.Hidden {
			action = "hidden (" + d.Mode + ")"
		}
		pinned := "not catalogued"
		if d.Pinned != "" {
			pinned = shortDigest(d.Pinned)
		}
		if err := t.Append(termsafe.String(d.Server), d.Kind, termsafe.String(d.Name), termsafe.String(action), termsafe.String(pinned),
			termsafe.String(shortDigest(d.Live)), stamp(d.Time), termsafe.String(d.Difference)); err != nil {
			return err
		}
	}
	return t.Render()
}

// shortDigest is a digest's algorithm and first 12 hex digits, enough to
// tell two apart in a table; --format json has them whole.
func shortDigest(d string) string {
	algo, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) <= 12 {
		return d
	}
	return algo + ":" + hex[:12]
}
