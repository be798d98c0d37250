package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/approval"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/gateway"
	"github.com/policyc/policyc/runtime/gateway/config"
	"github.com/policyc/policyc/runtime/gateway/identity"
)

func init() { register(newGatewayCmd) }

func newGatewayCmd() *cobra.Command {
	var o gatewayOptions
	c := &cobra.Command{
		Use:   "gateway --config PATH [--table FILE] [--trust KEY.pub ...] [--state DIR] [--decision-log FILE] [--check]",
		Short: "Run the MCP gateway that enforces a signed decision table",
		Long: `Run the runtime gateway: an MCP server in front of the upstream MCP servers of
the configuration, enforcing a signed decision table on every request.

The configuration (--config: a directory of CUE files in package gateway, or
one file) names the signed table, the trusted public keys, a state directory,
the upstreams (stdio commands or streamable HTTP URLs) and the front (stdio
for one principal, or streamable HTTP with bearer tokens stored as SHA-256
hashes, access tokens of identity providers, or both). It is checked like a policy: an unknown or misspelt key, a wrong
value or a program that cannot be found is an error with its position, the
code gateway-config (docs/rules/gateway-config.md) and, where it helps, a
suggestion. --table, --trust, --state and --decision-log replace the
configuration's table, trust, state_dir and decision_log.

The gateway starts only with a table signed by a trusted key, not expired and
not older than the last one it accepted; otherwise it says why and exits
with the code 'policyc verify' uses (10-16). It also refuses a table it
cannot enforce as configured: tool calls held for approval need the
approval gate (the approvals block, docs/approvals.md), and every approval
and consent channel of a served server must reach someone through it. The
gate's admin listener serves the approvals page and the admin API that
'policyc approvals' uses, with approver tokens of its own, an identity
provider's access tokens of approvers (approvals.admin.oauth: issuer,
audience, approver_groups), or both; with approvals.admin.oauth.sign_in the
page signs approvers in with the provider (authorization code with PKCE).

With front.http.oauth the HTTP front is an OAuth 2.1 resource server: it
serves its protected resource metadata at /.well-known/oauth-protected-resource,
admits JWT access tokens of the configured issuers (RS256, ES256, EdDSA; their
keys fetched at start, and again when they rotate) that name its resource in
aud, and decides for the principal and the policy groups their claims map to.
A provider that cannot be reached at start stops the gateway.

Clients see tools and prompts as <upstream>__<name>; listings hold only what
the table allows for the principal, and a denied item is answered exactly as
a missing one. Every decision is written as one JSON line to the decision
log (standard error by default; a listing is one line of counts), and SIGUSR1
reopens a decision log file, and the approvals audit log, after they were
rotated. The observe block serves
Prometheus metrics at /metrics and exports OpenTelemetry traces over
OTLP/HTTP (docs/gateway.md, Observability). SIGHUP reloads the table: a table that
fails verification, or is older than the serving one, is refused and the
serving table stays. SIGINT or SIGTERM stop the gateway; calls still held
for approval then end as expired (with state.postgres, their requests stay
pending for the other replicas and the agent's retry). docs/gateway.md has
the details.

With state.postgres, replicas share the approval state and the last accepted
table in PostgreSQL (docs/approvals.md, Replicas); 'policyc gateway status'
shows each replica's serving table.

Memory: unless GOGC is set, the gateway collects garbage at GOGC=400, and
with an HTTP front lets about 64 MiB of garbage build up between collections
while its live heap is small, for throughput; set GOMEMLIMIT to cap its
memory, or GOGC to turn this off (docs/gateway.md, "Performance").

With --check, the configuration and the table are checked, and that the
gateway could append to its decision log and create files in its state
directory (nothing is left written); a summary is printed, with the
approval gate's timings, and a warning for each address another process
listens on now (the gateway the check is for, before a reload, among them).

Exit codes: 0 stopped normally (or --check passed); 1 the configuration has
problems, including a trust key file that is missing or not a public key, a
state directory that does not exist, a decision log the gateway could not
append to and an identity provider whose keys could not be fetched, or the
table cannot be enforced here (a group the configuration maps tokens to that
it lacks, among others); 2 usage, including a
--trust, --state or --decision-log path that cannot be used; 3 the gateway failed (an unreadable configuration or table
file, an address in use); 10-16 the table was refused (see 'policyc verify
--help').

Examples:
  policyc gateway --config examples/local/gateway --check   # after the steps in examples/local/README.md
  policyc gateway --config gateway.cue --check --format json   # the summary for scripts
  policyc gateway --config /etc/policyc/gateway
  policyc gateway --config gateway.cue --table team.signed.json --trust ci.pub --state /var/lib/policyc
  pkill -HUP -f 'policyc gateway --config /etc/policyc/gateway'   # reload this gateway after deploying a new signed table

examples/local runs on a developer's machine (stdio upstreams from npm, a
key made there); examples/team/gateway is shaped for production.`,
		Args: argsRange(0, 0),
		RunE: func(c *cobra.Command, args []string) error {
			if o.config == "" {
				return usageErrorf("--config PATH is required: the gateway's configuration (see 'policyc gateway --help')")
			}
			if err := checkGatewayFormat(o); err != nil {
				return err
			}
			return runGateway(c, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.config, "config", "", "the gateway configuration: a `PATH` to a directory of CUE files in package gateway, or one file")
	f.StringVar(&o.table, "table", "", "serve the signed table in `FILE` instead of the configuration's")
	addTrustFlag(f, &o.trust, " instead of the configuration's keys")
	f.StringVar(&o.state, "state", "", "keep the last accepted serial in `DIR` instead of the configuration's state_dir")
	f.StringVar(&o.decisionLog, "decision-log", "", "append the decision log to `FILE` (\"-\": standard error) instead of the configuration's decision_log")
	addCheckFlag(f, &o.check, "exit 1 when the configuration or the table has problems; prints a summary when it passes")
	addFormatFlag(f, &o.format, "text", "json")
	c.AddCommand(newGatewayStatusCmd())
	return c
}

type gatewayOptions struct {
	config, table, state string
	decisionLog          string
	trust                []string
	check                bool
	format               string // of --check's summary
}

func runGateway(c *cobra.Command, o gatewayOptions) error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	stderr := gateway.NewSyncWriter(c.ErrOrStderr())
	s, dir, err := readGatewayConfig(o, config.ForGateway, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	s.Gateway.Logger = logger
	var frontLn net.Listener
	if s.Address != "" && !o.check {
		// The front listens before anything starts, so that an address
		// in use stops the gateway before it connects the upstreams or
		// accepts a table.
		ln, err := net.Listen("tcp", s.Address)
		if err != nil {
			return failuref("front.http.address: %v", err)
		}
		defer ln.Close()
		frontLn = ln
	}
	from := "--table"
	if s.TablePos.File != "" {
		pos := s.TablePos
		pos.File = filepath.ToSlash(filepath.Join(dir, pos.File))
		from = "the configuration's table (" + pos.String() + ")"
	}
	s.Gateway.Tables = tableLoader(s.Table, from, s.Trust, s.StateDir, o.check)
	pg, err := openState(c.Context(), s.State, logger)
	if err != nil {
		return err
	}
	if pg != nil {
		// After the gate (deferred later, closed first).
		defer pg.Close()
		s.Gateway.Tables = sharedTables(s.Gateway.Tables, pg, o.check)
	}
	var serving atomic.Pointer[gateway.Gateway]
	var gate *approval.Gate
	var adminLn net.Listener
	if s.Approvals != nil {
		cfg := *s.Approvals
		cfg.StateDir, cfg.Logger = s.StateDir, logger
		if pg != nil && !o.check {
			cfg.Store = pg
		}
		if s.AdminAddress != "" && !o.check {
			// Listen before the gate opens, so that links to requests
			// name the address the listener really has (a port of 0 is
			// chosen by the system).
			ln, err := net.Listen("tcp", s.AdminAddress)
			if err != nil {
				return failuref("approvals.admin.address: %v", err)
			}
			defer ln.Close()
			adminLn = ln
			if cfg.PageURL == "" {
				cfg.PageURL = "http://" + ln.Addr().String()
			}
		}
		if o.check {
			// A check must not take the running gateway's lock on the
			// state directory: the gate only answers CheckChannel here.
			dir, err := os.MkdirTemp("", "policyc-gateway-check-")
			if err != nil {
				return failuref("%v", err)
			}
			defer os.RemoveAll(dir)
			cfg.StateDir = dir
		}
		cfg.Channels = func(name string) (approval.Channel, bool) {
			g := serving.Load()
			if g == nil {
				return approval.Channel{}, false
			}
			ch, ok := g.Table().Source().Channels[name]
			return approval.Channel{Name: name, Kind: ch.Kind, URL: ch.URL}, ok
		}
		var err error
		if gate, err = approval.Open(cfg); err != nil {
			return failuref("approval gate: %v", err)
		}
		defer gate.Close()
		s.Gateway.Approvals, s.Gateway.Consent = gate.Approvals(), gate.Consents()
		names := make([]string, len(s.Gateway.Upstreams))
		for i, u := range s.Gateway.Upstreams {
			names[i] = u.Name
		}
		s.Gateway.Check = func(t *decide.Table) error { return checkChannels(t, gate, names) }
	}
	if s.OAuth != nil {
		// The issuers' keys are fetched now, for a check too: a gateway
		// that cannot verify tokens does not start.
		cfg := *s.OAuth
		cfg.Logger = logger
		ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
		v, err := identity.New(ctx, cfg)
		cancel()
		if err != nil {
			return gatewayDiagnostics(stderr, dir, []compiler.Diagnostic{s.IssuerDiagnostic(err)}, config.ForGateway)
		}
		s.HTTP.OAuth = &gateway.OAuthOptions{Verifier: v, Scopes: s.OAuthScopes}
		enforceable := s.Gateway.Check
		s.Gateway.Check = func(t *decide.Table) error {
			if err := s.CheckGroups(t); err != nil {
				return err
			}
			if enforceable != nil {
				return enforceable(t)
			}
			return nil
		}
	}
	if s.AdminOAuth != nil && s.AdminAddress != "" {
		// The approvers' provider is reached now too: its keys, and its
		// discovery document for the page's sign-in.
		cfg := *s.AdminOAuth
		cfg.Identity.Logger = logger
		ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
		ao, err := approval.NewAdminOAuth(ctx, cfg)
		cancel()
		if err != nil {
			return gatewayDiagnostics(stderr, dir, []compiler.Diagnostic{s.AdminOAuthDiagnostic(err)}, config.ForGateway)
		}
		s.Admin.OAuth = ao
	}
	if o.check {
		s.Gateway.Log = gateway.NewJSONLog(io.Discard)
		t, err := gateway.Check(s.Gateway)
		if err != nil {
			return gatewayRefusal(err)
		}
		return printGatewayCheck(c.OutOrStdout(), o, s, t)
	}
	ob, err := newObserver(s.Observe, func() *approval.Gate { return gate })
	if err != nil {
		return withCode(ExitProblems, err)
	}
	defer ob.stop()
	ob.configure(&s.Gateway)
	var logOut io.Writer = stderr
	var logFile *gateway.LogFile
	if s.DecisionLog != "" {
		// The decision log is appended to, line by line, for as long as
		// the gateway runs: it is a log, not an output written at once.
		// SIGUSR1 reopens it, for rotation.
		f, err := gateway.OpenLogFile(s.DecisionLog)
		if err != nil {
			if s.DecisionLogOverridden {
				return usageErrorf("--decision-log: %v", unwrapPath(err))
			}
			return gatewayDiagnostics(stderr, dir, []compiler.Diagnostic{s.DecisionLogDiagnostic(err)}, config.ForGateway)
		}
		defer func() {
			// The gate first: closing it answers the calls still held,
			// whose verdicts go to this log.
			if gate != nil {
				gate.Close()
			}
			f.Close()
		}()
		logOut, logFile = f, f
	}
	ob.reopenOnSIGUSR1(logFile, gate, logger)
	s.Gateway.Log = gateway.NewJSONLog(logOut)

	// SIGHUP is caught from here on, before the upstreams are connected,
	// which can take a while: its default action would end the process.
	// One that arrives while the gateway starts is kept, and reloads the
	// table once it serves.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if gate != nil {
		// Stopping ends the calls still held: their requests expire
		// ("the gateway stopped") and the calls are answered, so the
		// fronts need not wait out the approval timeout.
		go func() {
			<-ctx.Done()
			gate.Close()
		}()
	}
	g, err := gateway.New(ctx, s.Gateway)
	if err != nil {
		return gatewayRefusal(err)
	}
	defer g.Close()
	serving.Store(g)
	for _, warn := range append(listenerWarnings(s), gatewayWarnings(s, g.Table())...) {
		logger.Warn(warn)
	}
	if pg != nil {
		pg.Serving(ctx, g.Table())
	}
	if adminLn != nil {
		s.Admin.Status = func() approval.GatewayStatus { return approval.StatusOf(g, time.Now()) }
		h, err := gate.AdminHandler(s.Admin)
		if err != nil {
			return withCode(ExitProblems, fmt.Errorf("approvals.admin: %v", err))
		}
		admin := newHTTPServer(ob.withMetrics(h, gate))
		go admin.Serve(adminLn)
		defer func() {
			// A decision being answered as the gateway stops is still
			// answered: it has been taken.
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			admin.Shutdown(sctx)
		}()
		logger.Info("serving the approvals page and admin API", "address", adminLn.Addr().String())
	}
	if err := ob.serveMetrics(s.Observe.MetricsAddress, logger); err != nil {
		return err
	}
	go func() {
		for range hup {
			// A refusal is logged; the serving table stays.
			if g.Reload() != nil {
				continue
			}
			if pg != nil {
				pg.Serving(ctx, g.Table())
			}
			// A new table may no longer name the configured principal.
			for _, warn := range gatewayWarnings(s, g.Table()) {
				logger.Warn(warn)
			}
		}
	}()

	if s.Address == "" {
		logger.Info("serving on standard input and output", "principal", s.Principal)
		if err := g.ServeIO(ctx, s.Principal, c.InOrStdin(), c.OutOrStdout()); err != nil && ctx.Err() == nil {
			return failuref("stdio front: %v", err)
		}
		return nil
	}
	h, err := g.HTTPHandler(s.HTTP)
	if err != nil {
		return withCode(ExitProblems, err)
	}
	ln := frontLn
	if os.Getenv("GOGC") == "" {
		// Concurrent clients: let garbage build up to the floor
		// (docs/gateway.md, "Performance").
		defer tuneGC(heapFloor, time.Second)()
	}
	srv := newHTTPServer(h)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("serving streamable HTTP", "address", ln.Addr().String())
	select {
	case err := <-errc:
		return failuref("front.http: %v", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	return nil
}

// gatewayRefusal maps a boot refusal to its exit code.
func gatewayRefusal(err error) error {
	code := verifyExitCode(err)
	if errors.Is(err, gateway.ErrApprovalsWithoutGate) || errors.Is(err, gateway.ErrCannotEnforce) || errors.Is(err, config.ErrUnknownGroup) {
		code = ExitProblems
	}
	return withCode(code, fmt.Errorf("gateway not started: %w", err))
}
