package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

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
	var asJSON bool
	c := &cobra.Command{
		Use:   "status --config PATH [--json]",
		Short: "Show each gateway replica's serving table, from the shared state database",
		Long: `Show the gateway replicas that share the state database of the configuration's
state.postgres (its connection string is read from the variable dsn_env
names): each replica's name, host and process, the serial and digest of the
table it serves and since when, and when it was last heard of; then the last
table any replica accepted (the rollback high-water mark). Replicas serving
different serials are a mixed fleet, which status points out; a replica not
heard of for 30 s is marked stale (stopped, or cut off from the database).

Exit codes: 0 shown; 1 the configuration has problems or has no
state.postgres; 3 the database cannot be reached.

Example:
  POLICYC_STATE_DSN=postgres://gateway@db.internal/policyc policyc gateway status --config /etc/policyc/gateway`,
		Args: argsRange(0, 0),
		RunE: func(c *cobra.Command, args []string) error {
			if cfgPath == "" {
				return usageErrorf("--config PATH is required: the gateway's configuration, whose state.postgres names the database")
			}
			s, _, err := readGatewayConfig(gatewayOptions{config: cfgPath}, config.ForPull, c.ErrOrStderr())
			if err != nil {
				return err
			}
			if s.State == nil {
				return withCode(ExitProblems, fmt.Errorf("%s has no state.postgres: a single gateway keeps its state in state_dir, and has no replicas to show", cfgPath))
			}
			dsn, ok := os.LookupEnv(s.State.DSNEnv)
			if !ok || dsn == "" {
				return withCode(ExitProblems, fmt.Errorf("state.postgres.dsn_env: %s is not set: export the state database's connection string in it", s.State.DSNEnv))
			}
			st := *s.State
			st.DSN = dsn
			pg, err := openState(c.Context(), &st, nil)
			if err != nil {
				return err
			}
			defer pg.Close()
			replicas, accepted, now, err := pg.Status(c.Context())
			if err != nil {
				return failuref("%v", err)
			}
			if asJSON {
				return writeStatusJSON(c.OutOrStdout(), replicas, accepted, now)
			}
			writeStatus(c.OutOrStdout(), replicas, accepted, now)
			return nil
		},
	}
	c.Flags().StringVar(&cfgPath, "config", "", "the gateway configuration: a `PATH` to a directory of CUE files in package gateway, or one file")
	c.Flags().BoolVar(&asJSON, "json", false, "print the status as one JSON object")
	return c
}

func writeStatusJSON(w io.Writer, replicas []approval.ReplicaStatus, accepted *approval.AcceptedTable, now time.Time) error {
	type replica struct {
		approval.ReplicaStatus
		Stale bool `json:"stale"`
	}
	out := struct {
		Replicas []replica               `json:"replicas"`
		Accepted *approval.AcceptedTable `json:"accepted,omitempty"`
		Serials  []uint64                `json:"serials"`
	}{Replicas: []replica{}, Accepted: accepted, Serials: serials(replicas, now)}
	for _, r := range replicas {
		out.Replicas = append(out.Replicas, replica{r, now.Sub(r.Seen) > staleAfter})
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
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
