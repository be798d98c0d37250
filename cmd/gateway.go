package cmd

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"cuelang.org/go/cue"
	"github.com/spf13/cobra"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/approval"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/envelope"
	"github.com/policyc/policyc/runtime/gateway"
	"github.com/policyc/policyc/runtime/table"
)

func init() { register(newGatewayCmd) }

// gatewayPackage is the CUE package of gateway configuration files.
const gatewayPackage = "gateway"

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
hashes). It is checked like a policy: an unknown or misspelt key, a wrong
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
'policyc approvals' uses, with approver tokens of its own.

Clients see tools and prompts as <upstream>__<name>; listings hold only what
the table allows for the principal, and a denied item is answered exactly as
a missing one. Every decision is written as one JSON line to the decision
log (standard error by default). SIGHUP reloads the table: a table that
fails verification, or is older than the serving one, is refused and the
serving table stays. SIGINT or SIGTERM stop the gateway; calls still held
for approval then end as expired. docs/gateway.md has the details.

Memory: unless GOGC is set, the gateway collects garbage at GOGC=400, and
with an HTTP front lets about 64 MiB of garbage build up between collections
while its live heap is small, for throughput; set GOMEMLIMIT to cap its
memory, or GOGC to turn this off (docs/gateway.md, "Performance").

With --check, the configuration and the table are checked, and that the
gateway could append to its decision log (the log is left untouched); a
summary is printed, with the approval gate's timings; nothing is started.

Exit codes: 0 stopped normally (or --check passed); 1 the configuration has
problems, including a trust key file that is missing or not a public key and
a decision log the gateway could not append to, or the table cannot be
enforced here; 2 usage, including a --trust or --decision-log file that
cannot be used; 3 the gateway failed (an unreadable configuration or table
file, an address in use); 10-16 the table was refused (see 'policyc verify
--help').

Examples:
  policyc gateway --config /etc/policyc/gateway
  policyc gateway --config gateway.cue --table team.signed.json --trust ci.pub --state /var/lib/policyc
  policyc gateway --config examples/team/gateway --check
  kill -HUP $(pidof policyc)   # reload after deploying a new signed table`,
		Args: argsRange(0, 0),
		RunE: func(c *cobra.Command, args []string) error {
			if o.config == "" {
				return usageErrorf("--config PATH is required: the gateway's configuration (see 'policyc gateway --help')")
			}
			return runGateway(c, o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.config, "config", "", "the gateway configuration: a `PATH` to a directory of CUE files in package gateway, or one file")
	f.StringVar(&o.table, "table", "", "serve the signed table in `FILE` instead of the configuration's")
	f.StringArrayVar(&o.trust, "trust", nil, "trust tables signed by the Ed25519 public key in `FILE` instead of the configuration's keys (repeatable)")
	f.StringVar(&o.state, "state", "", "keep the last accepted serial in `DIR` instead of the configuration's state_dir")
	f.StringVar(&o.decisionLog, "decision-log", "", "append the decision log to `FILE` (\"-\": standard error) instead of the configuration's decision_log")
	f.BoolVar(&o.check, "check", false, "check the configuration and the table, print a summary and exit")
	return c
}

type gatewayOptions struct {
	config, table, state string
	decisionLog          string
	trust                []string
	check                bool
	use                  configUse
}

// configUse is what a gateway configuration is read for.
type configUse int

const (
	// forGateway: running the gateway, or checking that it would start.
	forGateway configUse = iota
	// forPull: catalog pull, which starts the upstreams and nothing else.
	// The configuration is checked all the same, but the files and secrets
	// only the running gateway uses (trust keys, table, state directory,
	// decision log, webhook secret) need not be there.
	forPull
)

// environment is how problems with the environment an upstream needs are
// worded: where the variable is missing, and when to export it.
func (u configUse) environment() (where, when string) {
	if u == forPull {
		return "the environment", "export it before pulling"
	}
	return "the gateway's environment", "export it before starting the gateway"
}

// notDone says what a configuration with errors stopped.
func (u configUse) notDone() string {
	if u == forPull {
		return "nothing was pulled"
	}
	return "the gateway cannot start"
}

// gatewayFile is a gateway configuration as written, decoded after the
// schema accepted it.
type gatewayFile struct {
	Table                 string                  `json:"table"`
	Trust                 []string                `json:"trust"`
	StateDir              string                  `json:"state_dir"`
	DecisionLog           string                  `json:"decision_log"`
	Upstreams             map[string]upstreamFile `json:"upstreams"`
	Front                 frontFile               `json:"front"`
	Approvals             *approvalsFile          `json:"approvals"`
	CallTimeoutSeconds    int                     `json:"call_timeout_seconds"`
	ConnectTimeoutSeconds int                     `json:"connect_timeout_seconds"`
}

type approvalsFile struct {
	Admin *struct {
		Address   string `json:"address"`
		PublicURL string `json:"public_url"`
		Approvers map[string]struct {
			TokenSHA256 []string `json:"token_sha256"`
		} `json:"approvers"`
	} `json:"admin"`
	WebhookSecretEnv         string `json:"webhook_secret_env"`
	ConsentWaitSeconds       int    `json:"consent_wait_seconds"`
	ApproveOnceWindowSeconds int    `json:"approve_once_window_seconds"`
	ProgressIntervalSeconds  int    `json:"progress_interval_seconds"`
	Servers                  map[string]struct {
		MaxApproval string `json:"max_approval"`
		Preview     *bool  `json:"preview"`
	} `json:"servers"`
}

type upstreamFile struct {
	Command        []string          `json:"command"`
	Env            map[string]string `json:"env"`
	PassEnv        []string          `json:"pass_env"`
	Dir            string            `json:"dir"`
	URL            string            `json:"url"`
	BearerTokenEnv string            `json:"bearer_token_env"`
}

type frontFile struct {
	Stdio *struct {
		Principal string `json:"principal"`
	} `json:"stdio"`
	HTTP *struct {
		Address    string `json:"address"`
		Principals map[string]struct {
			TokenSHA256 []string `json:"token_sha256"`
		} `json:"principals"`
		IdleTimeoutMinutes int `json:"idle_timeout_minutes"`
		MaxSessions        int `json:"max_sessions"`
	} `json:"http"`
}

// gatewaySetup is a checked configuration, ready to start.
type gatewaySetup struct {
	cfg      gateway.Config
	table    string
	trust    []ed25519.PublicKey
	stateDir string
	logPath  string
	// logFlag says logPath came from --decision-log; else logPos is where
	// the configuration in configDir sets it.
	logFlag   bool
	logPos    compiler.Position
	configDir string
	// principal is the stdio front's; http the HTTP front's options.
	principal string
	address   string
	http      gateway.HTTPOptions
	kinds     map[string]string // upstream → "stdio: npx" or "http: URL"
	// gate is the approval gate's configuration (StateDir is filled in
	// when it opens), nil without an approvals block; adminAddress and
	// admin its listener's.
	gate         *approval.Config
	adminAddress string
	admin        approval.AdminOptions
}

func runGateway(c *cobra.Command, o gatewayOptions) error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gateway.GCPercent)
	}
	stderr := &lockedWriter{w: c.ErrOrStderr()}
	s, err := readGatewayConfig(o, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	s.cfg.Logger = logger
	s.cfg.Tables = tableLoader(s.table, s.trust, s.stateDir, o.check)
	var serving atomic.Pointer[gateway.Gateway]
	var gate *approval.Gate
	var adminLn net.Listener
	if s.gate != nil {
		cfg := *s.gate
		cfg.StateDir, cfg.Logger = s.stateDir, logger
		if s.adminAddress != "" && !o.check {
			// Listen before the gate opens, so that links to requests
			// name the address the listener really has (a port of 0 is
			// chosen by the system).
			ln, err := net.Listen("tcp", s.adminAddress)
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
		s.cfg.Approvals, s.cfg.Consent = gate.Approvals(), gate.Consents()
		names := make([]string, len(s.cfg.Upstreams))
		for i, u := range s.cfg.Upstreams {
			names[i] = u.Name
		}
		s.cfg.Check = func(t *decide.Table) error { return checkChannels(t, gate, names) }
	}
	if o.check {
		s.cfg.Log = gateway.NewJSONLog(io.Discard)
		t, err := gateway.Check(s.cfg)
		if err != nil {
			return gatewayRefusal(err)
		}
		writeGatewayCheck(c.OutOrStdout(), o.config, s, t)
		return nil
	}
	var logOut io.Writer = stderr
	if s.logPath != "" {
		// The decision log is appended to, line by line, for as long as
		// the gateway runs: it is a log, not an output written at once.
		f, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			if s.logFlag {
				return usageErrorf("--decision-log: %v", unwrapPath(err))
			}
			return gatewayDiagnostics(stderr, s.configDir, []compiler.Diagnostic{{Pos: s.logPos, Code: compiler.CodeGatewayConfig, Severity: compiler.Error,
				Path: "decision_log", Message: fmt.Sprintf("decision_log: cannot open %s: %v", s.logPath, unwrapPath(err)),
				Suggestion: `give a file in an existing directory the gateway may write to, or "-" for standard error`}}, o.use)
		}
		defer func() {
			// The gate first: closing it answers the calls still held,
			// whose verdicts go to this log.
			if gate != nil {
				gate.Close()
			}
			f.Close()
		}()
		logOut = f
	}
	s.cfg.Log = gateway.NewJSONLog(logOut)

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
	g, err := gateway.New(ctx, s.cfg)
	if err != nil {
		return gatewayRefusal(err)
	}
	defer g.Close()
	serving.Store(g)
	if adminLn != nil {
		h, err := gate.AdminHandler(s.admin)
		if err != nil {
			return withCode(ExitProblems, fmt.Errorf("approvals.admin: %v", err))
		}
		admin := newHTTPServer(h)
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
	go func() {
		for range hup {
			g.Reload() // a refusal is logged; the serving table stays
		}
	}()

	if s.address == "" {
		logger.Info("serving on standard input and output", "principal", s.principal)
		if err := g.ServeIO(ctx, s.principal, c.InOrStdin(), c.OutOrStdout()); err != nil && ctx.Err() == nil {
			return failuref("stdio front: %v", err)
		}
		return nil
	}
	h, err := g.HTTPHandler(s.http)
	if err != nil {
		return withCode(ExitProblems, err)
	}
	ln, err := net.Listen("tcp", s.address)
	if err != nil {
		return failuref("front.http.address: %v", err)
	}
	if os.Getenv("GOGC") == "" {
		// Concurrent clients: let garbage build up to the floor
		// (docs/gateway.md, "Performance").
		defer gateway.TuneGC(gateway.HeapFloor, time.Second)()
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

// keepAliveIdle is how long an HTTP listener keeps a connection open
// between requests. A stream the SDK holds open (an event stream) is a
// request in progress, not an idle connection.
var keepAliveIdle = 2 * time.Minute

// newHTTPServer serves h with bounds on connections that send nothing: a
// request's headers must arrive within 10 s, and a connection idle
// between requests is closed after keepAliveIdle, so connections left
// open (by a client that was answered 401, say) do not pile up.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: keepAliveIdle}
}

// lockedWriter serializes writes: the operational log and the decision
// log share standard error, and each writes whole lines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// tableLoader reads the signed table and verifies it, every time: at boot
// and on every reload. It is the gateway's only way to a table.
func tableLoader(path string, trusted []ed25519.PublicKey, stateDir string, check bool) func(func(*decide.Table) error) (*decide.Table, error) {
	return func(accept func(*decide.Table) error) (*decide.Table, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read the signed table: %w", err)
		}
		// The state records a table only once the gateway accepts it, and
		// never for --check, which must not change what a start accepts.
		t, _, err := decide.LoadVerified(b, decide.VerifyOptions{Trusted: trusted, StateDir: stateDir, Accept: accept, ReadOnly: check})
		if err != nil {
			return nil, fmt.Errorf("%s refused: %w", path, err)
		}
		return t, nil
	}
}

// checkChannels reports every approval or consent channel of a served
// server that cannot reach anyone through the gate as configured.
func checkChannels(t *decide.Table, gate *approval.Gate, upstreams []string) error {
	src := t.Source()
	approves := func(a *table.Access) bool {
		if a == nil {
			return false
		}
		for _, r := range a.Rules {
			if r.Effect == table.Approve.String() {
				return true
			}
		}
		return false
	}
	var errs []error
	checked := map[string]bool{}
	check := func(server, what, name string) {
		if name == "" {
			errs = append(errs, fmt.Errorf("server %s %s but names no channel", server, what))
			return
		}
		if checked[name] {
			return
		}
		checked[name] = true
		ch, ok := src.Channels[name]
		if !ok {
			errs = append(errs, fmt.Errorf("server %s %s through channel %q, which the table does not define", server, what, name))
			return
		}
		if err := gate.CheckChannel(name, approval.Channel{Name: name, Kind: ch.Kind, URL: ch.URL}); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range upstreams {
		s, ok := src.Servers[name]
		if !ok {
			continue
		}
		held := approves(s.Tool)
		for _, sc := range src.Scopes {
			for _, key := range []string{name, table.AllServers} {
				if ss, ok := sc.Servers[key]; ok {
					held = held || approves(ss.Tool)
				}
			}
		}
		if held {
			check(name, "holds tool calls for approval", s.Tool.ApprovalChannel)
		}
		if s.UI != nil && len(s.UI.AllowList) > 0 {
			check(name, "asks consent for ui:// resources", s.UI.ConsentChannel)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}

// missingKeyPos is where to report the missing key dotted: the nearest
// enclosing key that is set, else the one file, else the directory of
// files.
func missingKeyPos(ev *compiler.Evaluation, dotted string, files []compiler.File) compiler.Position {
	for p := dotted; ; {
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			break
		}
		p = p[:i]
		if pos := ev.KeyPos(p); pos.File != "" {
			return pos
		}
	}
	if len(files) == 1 {
		return compiler.Position{File: files[0].Name}
	}
	return compiler.Position{File: "."}
}

// gatewayRefusal maps a boot refusal to its exit code.
func gatewayRefusal(err error) error {
	code := verifyExitCode(err)
	if errors.Is(err, gateway.ErrApprovalsWithoutGate) || errors.Is(err, gateway.ErrCannotEnforce) {
		code = ExitProblems
	}
	return withCode(code, fmt.Errorf("gateway not started: %w", err))
}

// readGatewayConfig reads and checks the configuration and everything it
// points at. Problems are printed as diagnostics, all of them.
func readGatewayConfig(o gatewayOptions, stderr io.Writer) (*gatewaySetup, error) {
	files, dir, err := readConfigFiles(o.config)
	if err != nil {
		return nil, err
	}
	ev := compiler.Evaluate(files, gatewayPackage, "#Gateway")
	var schema []compiler.Diagnostic
	if compiler.HasErrors(ev.Diagnostics) {
		// The policy codes (unknown-key, type-error, ...) and their pages
		// speak of policy files; here they are the configuration's.
		for i := range ev.Diagnostics {
			d := &ev.Diagnostics[i]
			d.Code = compiler.CodeGatewayConfig
			wholeUnits(d, ev.Value)
			valueWording(d)
			if strings.HasSuffix(d.Message, "field is required but not present") {
				// A missing key has no position of its own: name the file.
				d.Message = d.Path + ": required, and not set"
				d.Suggestion = "add " + d.Path + " (docs/gateway.md, Configuration, lists every key)"
				if d.Pos.File == "" {
					d.Pos = missingKeyPos(ev, d.Path, files)
				}
			}
		}
		// A value refused by each branch of an enum is one problem, now
		// worded once.
		schema = slices.CompactFunc(ev.Diagnostics, func(a, b compiler.Diagnostic) bool {
			return a.Pos == b.Pos && a.Message == b.Message
		})
		if !ev.Value.Exists() || slices.ContainsFunc(schema, func(d compiler.Diagnostic) bool { return d.Path == "" }) {
			// Nothing evaluated, or a problem that is not at a key:
			// the checks below would have nothing sound to read.
			return nil, gatewayDiagnostics(stderr, dir, schema, o.use)
		}
	}
	// The checks below run even when the schema found problems, on the
	// keys it found none in, so that every problem is reported at once.
	// What is read then is never used: the problems are returned.
	brokenKeys := map[string]bool{}
	for _, d := range schema {
		brokenKeys[d.Path] = true
	}
	// broken says whether the schema found a problem at key, inside it,
	// or at a key that holds it.
	broken := func(key string) bool {
		for b := range brokenKeys {
			if b == key || under(b, key) || under(key, b) {
				return true
			}
		}
		return false
	}
	var file gatewayFile
	if len(schema) == 0 {
		if err := ev.Value.Decode(&file); err != nil {
			return nil, failuref("decode the gateway configuration: %v", err)
		}
	} else {
		file = decodeSound(ev.Value, broken, brokenKeys)
	}
	var diags []compiler.Diagnostic
	bad := func(key, msg, suggestion string) {
		if broken(key) {
			return // reported by the schema, or read from a key it refused
		}
		diags = append(diags, compiler.Diagnostic{Pos: ev.KeyPos(key), Code: compiler.CodeGatewayConfig, Severity: compiler.Error,
			Path: key, Message: key + ": " + msg, Suggestion: suggestion})
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	s := &gatewaySetup{kinds: map[string]string{}}
	s.table, s.stateDir, s.logPath = abs(file.Table), abs(file.StateDir), ""
	switch {
	case o.decisionLog != "":
		if o.decisionLog != "-" {
			s.logPath = o.decisionLog
			s.logFlag = true
			if o.use == forGateway {
				if err := checkDecisionLog(s.logPath, o.check); err != nil {
					return nil, usageErrorf("--decision-log: %v", err)
				}
			}
		}
	case file.DecisionLog != "" && file.DecisionLog != "-":
		s.logPath = abs(file.DecisionLog)
		s.logPos, s.configDir = ev.KeyPos("decision_log"), dir
		if o.use == forGateway {
			if err := checkDecisionLog(s.logPath, o.check); err != nil {
				bad("decision_log", err.Error(), `give a file in an existing directory the gateway may write to, or "-" for standard error`)
			}
		}
	}
	if o.table != "" {
		s.table = o.table
	}
	if o.state != "" {
		s.stateDir = o.state
	}
	envWhere, envWhen := o.use.environment()
	switch {
	case len(o.trust) > 0:
		if s.trust, _, err = readTrustedKeys(o.trust); err != nil {
			return nil, err
		}
	case len(file.Trust) == 0:
		bad("trust", "no public key: the gateway loads only a table signed by a trusted key", `list the public key CI signs with, e.g. trust: ["ci.pub"] (written by 'policyc keygen')`)
	case o.use == forPull:
		// The keys verify the table, which a pull never reads.
	default:
		for i, p := range file.Trust {
			b, err := os.ReadFile(abs(p))
			if err != nil {
				bad("trust", fmt.Sprintf("key %d: %v", i+1, err), "give the path of a public key written by 'policyc keygen' (relative to the configuration)")
				continue
			}
			k, err := envelope.ParsePublicKey(b)
			if err != nil {
				bad("trust", fmt.Sprintf("key %d: %s: %v", i+1, p, err), "give the path of a public key written by 'policyc keygen' (the .pub file)")
				continue
			}
			s.trust = append(s.trust, k)
		}
	}

	names := slices.Sorted(maps.Keys(file.Upstreams))
	if len(names) == 0 && o.use == forGateway {
		// The gateway would refuse to start without naming the file or
		// the key: say it while reading, for --check too. (A catalog pull
		// says it has nothing to pull.)
		bad("upstreams", "no upstream: the gateway would serve nothing",
			`add at least one server, e.g. upstreams: memory: command: ["npx", "-y", "@modelcontextprotocol/server-memory"]`)
	}
	for _, name := range names {
		u := file.Upstreams[name]
		key := "upstreams." + name
		if err := gateway.CheckUpstreamName(name); err != nil {
			bad(key, err.Error(), "")
			continue
		}
		up := gateway.Upstream{Name: name}
		if u.Command != nil && len(u.Command) == 0 {
			bad(key+".command", "the command is empty", `give the program and its arguments, e.g. ["npx", "-y", "@modelcontextprotocol/server-memory"]`)
			continue
		}
		switch {
		case len(u.Command) > 0 && u.URL != "":
			bad(key, "both command and url are set; an upstream is either a stdio command or a streamable HTTP url", "keep one of them")
			continue
		case len(u.Command) == 0 && u.URL == "":
			bad(key, "neither command nor url is set", `give command: ["program", "arg", ...] for a stdio server or url: "https://..." for a streamable HTTP one`)
			continue
		case u.URL != "":
			if len(u.Env) > 0 || len(u.PassEnv) > 0 || u.Dir != "" {
				bad(key, "env, pass_env and dir apply to a stdio command, not to a url", "remove them, or use bearer_token_env for the url's credentials")
			}
			up.URL = u.URL
			s.kinds[name] = "http: " + withoutUserinfo(u.URL)
			if u.BearerTokenEnv != "" {
				tok := os.Getenv(u.BearerTokenEnv)
				if tok == "" {
					bad(key+".bearer_token_env", fmt.Sprintf("%s is not set in %s", varName(u.BearerTokenEnv), envWhere), envWhen)
				}
				up.Header = http.Header{"Authorization": {"Bearer " + tok}}
			}
		default:
			if u.BearerTokenEnv != "" {
				bad(key+".bearer_token_env", "bearer_token_env applies to a url, not to a stdio command", "pass the token with pass_env instead")
			}
			up.Dir = abs(u.Dir)
			if up.Dir != "" {
				if st, err := os.Stat(up.Dir); err != nil || !st.IsDir() {
					bad(key+".dir", fmt.Sprintf("%s is not a directory", u.Dir), "")
				}
			}
			if slices.ContainsFunc(u.Command, func(a string) bool { return strings.ContainsRune(a, 0) }) {
				// The start would fail, and be retried, forever.
				bad(key+".command", "an argument contains a NUL character, which no program argument can hold", "remove it")
				continue
			}
			prog, err := findProgram(u.Command[0], dir)
			if err != nil {
				bad(key+".command", err.Error(), "install it, or give its full path")
			}
			up.Command, up.Args = prog, u.Command[1:]
			up.Env = gateway.BaseEnv()
			for _, v := range u.PassEnv {
				val, ok := os.LookupEnv(v)
				if !ok {
					bad(key+".pass_env", fmt.Sprintf("%s is not set in %s", varName(v), envWhere), envWhen+", or remove it from pass_env")
				}
				up.Env = append(up.Env, v+"="+val)
			}
			envNames := make([]string, 0, len(u.Env))
			for k := range u.Env {
				envNames = append(envNames, k)
			}
			sort.Strings(envNames)
			for _, k := range envNames {
				if strings.ContainsRune(u.Env[k], 0) {
					// The value is not repeated: it may be a secret.
					bad(key+".env."+k, "the value contains a NUL character, which no environment variable can hold", "remove it")
				}
				up.Env = append(up.Env, k+"="+u.Env[k])
			}
			s.kinds[name] = "stdio: " + u.Command[0]
		}
		s.cfg.Upstreams = append(s.cfg.Upstreams, up)
	}

	switch fr := file.Front; {
	case fr.Stdio != nil && fr.HTTP != nil:
		bad("front", "both stdio and http are set; the gateway has one front", "keep one of them")
	case fr.Stdio == nil && fr.HTTP == nil:
		bad("front", "no front is set", `give stdio: principal: "NAME" or http: {address: "127.0.0.1:8080", principals: ...}`)
	case fr.Stdio != nil:
		s.principal = fr.Stdio.Principal
	default:
		h := fr.HTTP
		if err := checkListenAddress(h.Address); err != nil {
			bad("front.http.address", fmt.Sprintf("%q is not host:port (%v)", h.Address, err), `for example "127.0.0.1:8080"`)
		}
		s.address = h.Address
		s.http.Tokens = map[string]string{}
		s.http.IdleTimeout = time.Duration(h.IdleTimeoutMinutes) * time.Minute
		s.http.MaxSessions = h.MaxSessions
		principals := make([]string, 0, len(h.Principals))
		for p := range h.Principals {
			principals = append(principals, p)
		}
		sort.Strings(principals)
		if len(principals) == 0 {
			// The front would refuse to start, after the upstreams were
			// connected: say it while reading, for --check too.
			bad("front.http.principals", "no principal: the HTTP front admits only clients with a configured token, so no client could connect",
				`add a principal with the SHA-256 of its bearer token, e.g. principals: alice: token_sha256: ["..."] (printf %s "$TOKEN" | sha256sum)`)
		}
		for _, p := range principals {
			if len(h.Principals[p].TokenSHA256) == 0 {
				bad("front.http.principals."+p+".token_sha256", "no token: this principal could never connect", "add the SHA-256 of its bearer token, or remove the principal")
			}
			for _, hash := range h.Principals[p].TokenSHA256 {
				if q, dup := s.http.Tokens[hash]; dup && q != p {
					bad("front.http.principals."+p+".token_sha256", fmt.Sprintf("token hash %s… is also %s's: a token identifies one principal", hash[:12], q), "give each principal its own token")
				}
				s.http.Tokens[hash] = p
			}
		}
	}
	if a := file.Approvals; a != nil {
		s.gate = &approval.Config{
			Servers:          map[string]approval.ServerOptions{},
			ConsentWait:      seconds(a.ConsentWaitSeconds, defaultConsentWait),
			OnceWindow:       seconds(a.ApproveOnceWindowSeconds, defaultOnceWindow),
			ProgressInterval: seconds(a.ProgressIntervalSeconds, defaultProgressInterval),
		}
		upstreams := slices.Sorted(maps.Keys(file.Upstreams))
		for _, name := range slices.Sorted(maps.Keys(a.Servers)) {
			so := a.Servers[name]
			// A server that is not an upstream would take the settings
			// silently: a misspelt preview: false would leave previews on.
			if _, ok := file.Upstreams[name]; !ok && !broken("upstreams."+name) {
				hint := "name a server of upstreams: " + strings.Join(upstreams, ", ")
				if near := compiler.Suggest(name, upstreams); near != "" {
					hint = fmt.Sprintf("did you mean %q? The upstreams: %s", near, strings.Join(upstreams, ", "))
				}
				bad("approvals.servers."+name, fmt.Sprintf("%q is not an upstream: its settings would apply to nothing", name), hint)
				continue
			}
			s.gate.Servers[name] = approval.ServerOptions{MaxDuration: so.MaxApproval, NoPreview: so.Preview != nil && !*so.Preview}
		}
		// A pull sends no webhook: the secret need not be set for it.
		if a.WebhookSecretEnv != "" && o.use == forGateway {
			secret, set := os.LookupEnv(a.WebhookSecretEnv)
			switch {
			case !set:
				bad("approvals.webhook_secret_env", fmt.Sprintf("%s must hold at least 16 bytes and is not set in %s", varName(a.WebhookSecretEnv), envWhere),
					envWhen+", e.g. with: openssl rand -hex 32 (webhook receivers verify deliveries with the same secret)")
			case len(secret) < 16:
				bad("approvals.webhook_secret_env", fmt.Sprintf("%s must hold at least 16 bytes (it holds %d)", varName(a.WebhookSecretEnv), len(secret)), "export it before starting the gateway, e.g. with: openssl rand -hex 32")
			}
			s.gate.Webhook.Secret = []byte(secret)
		}
		if ad := a.Admin; ad != nil {
			if err := checkListenAddress(ad.Address); err != nil {
				bad("approvals.admin.address", fmt.Sprintf("%q is not host:port (%v)", ad.Address, err), `for example "127.0.0.1:8443"`)
			} else if sameListener(ad.Address, s.address) {
				// The second listener would fail to start, after the
				// upstreams were connected: say it while reading.
				bad("approvals.admin.address", fmt.Sprintf("%q is also where front.http.address (%q) listens: the admin listener needs an address of its own", ad.Address, s.address),
					"give it a port of its own, on an internal address")
			}
			s.adminAddress = ad.Address
			s.gate.PageServed = true
			// Without public_url, links name the listener's address once
			// it listens.
			s.gate.PageURL = ad.PublicURL
			s.admin.Approvers = map[string]string{}
			s.admin.ClientTokens = map[string]string{}
			for hash, p := range s.http.Tokens {
				s.admin.ClientTokens[hash] = p
			}
			names := slices.Sorted(maps.Keys(ad.Approvers))
			if len(names) == 0 {
				// The listener would refuse to start, after the upstreams
				// were connected: say it while reading, for --check too.
				bad("approvals.admin.approvers", "no approver: the approvals page and the admin API admit approvers only, so no one could decide a held call",
					`add an approver with the SHA-256 of its token, e.g. approvers: carol: token_sha256: ["..."] (printf %s "$TOKEN" | sha256sum), or remove admin`)
			}
			for _, n := range names {
				key := "approvals.admin.approvers." + n + ".token_sha256"
				if len(ad.Approvers[n].TokenSHA256) == 0 {
					bad(key, "no token: this approver could never sign in", "add the SHA-256 of its token, or remove the approver")
				}
				for _, hash := range ad.Approvers[n].TokenSHA256 {
					if q, dup := s.admin.Approvers[hash]; dup && q != n {
						bad(key, fmt.Sprintf("token hash %s… is also %s's: a token identifies one approver", hash[:12], q), "give each approver its own token")
					}
					if p, dup := s.http.Tokens[hash]; dup {
						bad(key, fmt.Sprintf("token hash %s… is also the MCP client token of %s: an agent must not be able to approve", hash[:12], p), "give approvers tokens of their own")
					}
					s.admin.Approvers[hash] = n
				}
			}
		}
	}
	s.cfg.CallTimeout = time.Duration(file.CallTimeoutSeconds) * time.Second
	s.cfg.ConnectTimeout = time.Duration(file.ConnectTimeoutSeconds) * time.Second
	s.cfg.Version = compiler.Version
	if len(schema) > 0 || len(diags) > 0 {
		all := append(schema, diags...)
		compiler.SortDiagnostics(all)
		return nil, gatewayDiagnostics(stderr, dir, all, o.use)
	}
	return s, nil
}

// checkListenAddress checks that addr is host:port with a port a listener
// can use: a number from 0 to 65535 (0 or none: any free port) or a
// service name such as "http". The host is left to the listener, which
// may have to resolve it.
func checkListenAddress(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if port == "" {
		return nil
	}
	if strings.Trim(port, "0123456789") == "" {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return fmt.Errorf("port %s is out of range: ports are 0 to 65535", port)
		}
		return nil
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("port %q is neither a number from 0 to 65535 nor a known service name", port)
	}
	return nil
}

// sameListener says whether listeners on a and b would take the same port
// of an address they share: the same port (not 0 or empty, which pick a
// free one) on the same host, or on a host where either listens on every
// address.
func sameListener(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil {
		return false
	}
	na, err1 := net.LookupPort("tcp", pa)
	nb, err2 := net.LookupPort("tcp", pb)
	if err1 != nil || err2 != nil || na == 0 || na != nb {
		return false
	}
	// Go listens on every address of both families for "", "::" and
	// 0.0.0.0 alike. One address written two ways is one address; a name
	// is compared as written.
	wildcard := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	if wildcard(ha) || wildcard(hb) {
		return true
	}
	if ipa, ipb := net.ParseIP(ha), net.ParseIP(hb); ipa != nil && ipb != nil {
		return ipa.Equal(ipb)
	}
	return ha == hb
}

// under says whether key names something inside parent: a field
// (parent.x) or an element (parent[0]).
func under(key, parent string) bool {
	rest, ok := strings.CutPrefix(key, parent)
	return ok && rest != "" && (rest[0] == '.' || rest[0] == '[')
}

// decodeSound decodes the keys of a configuration the schema refused that
// broken says are sound: each top-level key as far as it is sound (see
// decodeFields), and each upstream on its own (a broken one is listed,
// empty). A key that does not decode is added to brokenKeys.
func decodeSound(v cue.Value, broken func(string) bool, brokenKeys map[string]bool) gatewayFile {
	var f gatewayFile
	rv := reflect.ValueOf(&f).Elem()
	for i := range rv.NumField() {
		key := jsonName(rv.Type().Field(i))
		fv := v.LookupPath(cue.MakePath(cue.Str(key)))
		if !fv.Exists() {
			continue
		}
		if key == "upstreams" {
			it, err := fv.Fields()
			if err != nil {
				brokenKeys[key] = true
				continue
			}
			f.Upstreams = map[string]upstreamFile{}
			for it.Next() {
				// A broken upstream is kept, empty, so that other keys
				// may name it; checks of its own keys are suppressed.
				name := it.Selector().Unquoted()
				var u upstreamFile
				if k := key + "." + name; broken(k) || it.Value().Decode(&u) != nil {
					brokenKeys[k] = true
					u = upstreamFile{}
				}
				f.Upstreams[name] = u
			}
			continue
		}
		decodeFields(fv, key, rv.Field(i), broken, brokenKeys)
	}
	return f
}

// decodeFields decodes v, the value at key, into dst as far as it is sound:
// whole when nothing at or under key is broken; else, for a struct (or a
// pointer to one) or a map of them, each field or entry on its own, so that
// a refused fraction in approvals does not hide a misspelt server beside it.
// A refused map entry is kept, empty, as a broken upstream is: other keys
// may name it, and checks of its own keys are suppressed by broken. What
// is refused, or of another kind, is left unset; a value that does not
// decode is added to brokenKeys.
func decodeFields(v cue.Value, key string, dst reflect.Value, broken func(string) bool, brokenKeys map[string]bool) {
	if !broken(key) {
		if v.Decode(dst.Addr().Interface()) != nil {
			brokenKeys[key] = true
		}
		return
	}
	if brokenKeys[key] {
		return // refused as a whole
	}
	switch t := dst.Type(); {
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
		p := reflect.New(t.Elem())
		decodeFields(v, key, p.Elem(), broken, brokenKeys)
		dst.Set(p)
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			name := jsonName(t.Field(i))
			if fv := v.LookupPath(cue.MakePath(cue.Str(name))); fv.Exists() {
				decodeFields(fv, key+"."+name, dst.Field(i), broken, brokenKeys)
			}
		}
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		it, err := v.Fields()
		if err != nil {
			brokenKeys[key] = true
			return
		}
		m := reflect.MakeMap(t)
		for it.Next() {
			name := it.Selector().Unquoted()
			e := reflect.New(t.Elem()).Elem()
			decodeFields(it.Value(), key+"."+name, e, broken, brokenKeys)
			m.SetMapIndex(reflect.ValueOf(name), e)
		}
		dst.Set(m)
	}
}

// jsonName is the key a configuration struct field is read from.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// The approval gate's timings when the configuration leaves them out (the
// schema's defaults). They are passed to the gate explicitly, so that
// --check prints what the gate runs with.
const (
	defaultConsentWait      = 60 * time.Second
	defaultOnceWindow       = 30 * time.Second
	defaultProgressInterval = 15 * time.Second
)

// seconds is a configured number of seconds, or def when it is not set
// (the schema admits only positive values).
func seconds(n int, def time.Duration) time.Duration {
	if n == 0 {
		return def
	}
	return time.Duration(n) * time.Second
}

// checkDecisionLog tells whether the gateway will be able to append to its
// decision log, without creating the file or writing to it: its directory
// exists, a regular file can be opened for appending and, with probe (for
// --check), one that does not exist yet can be created in that directory
// (tried with a temporary file, removed at once). A pipe or a device is
// not opened: that could block, or end a reader's input.
func checkDecisionLog(path string, probe bool) error {
	// A symbolic link is appended to through its target, which the
	// gateway creates when it does not exist yet.
	for range 8 {
		st, err := os.Lstat(path)
		if err != nil || st.Mode()&fs.ModeSymlink == 0 {
			break
		}
		target, err := os.Readlink(path)
		if err != nil {
			return err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the directory %s does not exist", dir)
	case err != nil:
		return err
	case !st.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	st, err = os.Stat(path)
	switch {
	case err == nil && st.IsDir():
		return fmt.Errorf("%s is a directory, not a file", path)
	case err == nil && !st.Mode().IsRegular():
		// A pipe or a device: opening it may block until a reader comes,
		// or consume the reader's end of file. The start opens it.
		return nil
	case err == nil:
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Errorf("cannot append to %s: %w", path, unwrapPath(err))
		}
		return f.Close()
	case !errors.Is(err, fs.ErrNotExist):
		return err
	case !probe:
		return nil // the start creates it, and says so if it cannot
	}
	// The file does not exist yet: the gateway creates it. Whether it may
	// is only known by trying, in the directory, under another name.
	f, err := os.CreateTemp(dir, ".policyc-gateway-check-")
	if err != nil {
		return fmt.Errorf("cannot create %s: %w", path, unwrapPath(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// unwrapPath drops the operation and path of a *fs.PathError, for a
// message that names the path itself.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// wholeUnits rewords a type error on a timing key (*_seconds, *_minutes)
// or a count (max_sessions):
// CUE's "conflicting values 1.5 and int (mismatched types float and int)"
// becomes what the key needs, a whole number of its unit. src is the
// configuration as written.
func wholeUnits(d *compiler.Diagnostic, src cue.Value) {
	key := d.Path[strings.LastIndex(d.Path, ".")+1:]
	var unit string
	switch {
	case strings.HasSuffix(key, "_seconds"):
		unit = "seconds"
	case strings.HasSuffix(key, "_minutes"):
		unit = "minutes"
	case key == "max_sessions":
		unit = "sessions"
	default:
		return
	}
	if !strings.Contains(d.Message, "mismatched types") || !src.Exists() {
		return
	}
	v := src.LookupPath(cue.ParsePath(d.Path))
	if !v.Exists() || v.Kind() == cue.IntKind {
		return
	}
	written := fmt.Sprint(v)
	d.Message = fmt.Sprintf("%s: a whole number of %s is required, not %s", d.Path, unit, written)
	// The example is the value written, made whole, when every timing key
	// allows it (1 to 600); else 30.
	n := int64(30)
	if f, err := v.Float64(); err == nil && f > 0 && f <= 600 {
		n = int64(max(1, math.Trunc(f)))
	} else if s, err := v.String(); err == nil {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil && i >= 1 && i <= 600 {
			n = i
		}
	}
	d.Suggestion = fmt.Sprintf("write an integer, without a decimal point or quotes, e.g. %s: %d", key, n)
}

// The schema's patterns (schema/gateway.cue) whose bounds valueWording
// rewords.
const (
	boundSHA256  = `=~"^[0-9a-f]{64}$"`
	boundURL     = `=~"^https?://"`
	boundEnvName = `=~"^[A-Za-z_][A-Za-z0-9_]*$"`
)

var (
	boundRE    = regexp.MustCompile(`^invalid value (".*") \(out of bound (.+)\)$`)
	mismatchRE = regexp.MustCompile(`^conflicting values (.+) and (.+) \(mismatched types (\w+) and (\w+)\)$`)
	badNameRE  = regexp.MustCompile(`^(".*") is not a valid name$`)
)

// maxApprovals are the values of approvals.servers.NAME.max_approval.
const maxApprovals = `"once", "1h", "8h" or "7d"`

// valueWording rewords CUE's refusal of a value (a pattern's bound, a
// type) as what the key needs and how to write it. The value of a
// token_sha256 is never repeated: it may be the token itself.
func valueWording(d *compiler.Diagnostic) {
	raw := strings.TrimPrefix(d.Message, d.Path+": ")
	key := d.Path[strings.LastIndex(d.Path, ".")+1:]
	if i := strings.IndexByte(key, '['); i >= 0 {
		key = key[:i]
	}
	if m := boundRE.FindStringSubmatch(raw); m != nil {
		v, err := strconv.Unquote(m[1])
		if err != nil {
			return
		}
		switch m[2] {
		case boundSHA256:
			d.Message, d.Suggestion = tokenHashWording(d.Path, v)
		case boundURL:
			// A URL may carry a password: it is not repeated.
			v = withoutUserinfo(v)
			d.Message = fmt.Sprintf("%s: %q must start with http:// or https://", d.Path, v)
			d.Suggestion = "the gateway speaks HTTP: give an http:// or https:// URL"
			if !strings.Contains(v, "://") {
				d.Suggestion = fmt.Sprintf("write %s: %q", key, "https://"+v)
			}
		case boundEnvName:
			if strings.HasSuffix(d.Path, "]") {
				key = ""
			}
			d.Message, d.Suggestion = envNameWording(d.Path, key, v)
		}
		return
	}
	if m := badNameRE.FindStringSubmatch(raw); m != nil && strings.HasPrefix(d.Path, "upstreams.") {
		// An env key is a variable's name, not a policy name.
		if v, err := strconv.Unquote(m[1]); err == nil && strings.HasSuffix(d.Path, ".env."+v) {
			d.Message, d.Suggestion = envNameWording(d.Path, "", v)
		}
		return
	}
	m := mismatchRE.FindStringSubmatch(raw)
	if m == nil {
		return
	}
	// One side is the schema's (a kind, a list or pattern type); the
	// other is the value written.
	schemaSide := func(s, kind string) bool {
		return s == kind || strings.HasPrefix(s, "[...") || strings.HasPrefix(s, "=~") || strings.HasPrefix(s, "#")
	}
	given, givenKind, want := m[1], m[3], m[4]
	if schemaSide(m[1], m[3]) {
		given, givenKind, want = m[2], m[4], m[3]
	}
	switch givenKind {
	case "list", "struct":
		given = "a " + givenKind
	}
	if key == "token_sha256" && givenKind == "string" {
		given = "a string"
	}
	switch {
	case key == "max_approval":
		if strings.HasPrefix(given, `"`) {
			return // the compiler lists the allowed values
		}
		d.Message = fmt.Sprintf("%s: one of %s is required, not %s", d.Path, maxApprovals, given)
		d.Suggestion = `write it in quotes, e.g. max_approval: "8h"`
	case want == "bool":
		d.Message = fmt.Sprintf("%s: true or false is required, not %s", d.Path, given)
		d.Suggestion = fmt.Sprintf("write %s: true or %s: false, without quotes", key, key)
		if given == `"true"` || given == `"false"` {
			d.Suggestion = fmt.Sprintf("write %s: %s, without quotes", key, strings.Trim(given, `"`))
		}
	case want == "string":
		d.Message = fmt.Sprintf("%s: a string in double quotes is required, not %s", d.Path, given)
		switch key {
		case "url", "public_url":
			d.Message = fmt.Sprintf("%s: an http:// or https:// URL in double quotes is required, not %s", d.Path, given)
			d.Suggestion = fmt.Sprintf(`for example %s: "https://gateway.internal:8443"`, key)
		case "address":
			d.Message = fmt.Sprintf("%s: host:port in double quotes is required, not %s", d.Path, given)
			d.Suggestion = `for example address: "127.0.0.1:8443"`
			if strings.HasPrefix(d.Path, "front.") {
				d.Suggestion = `for example address: "127.0.0.1:8080"`
			}
		default:
			// An env value is a string like any other, and may be a
			// secret: its kind is named, never the value.
			if strings.Contains(d.Path, ".env.") {
				d.Message = fmt.Sprintf("%s: a string in double quotes is required, not %s", d.Path, compiler.KindName(givenKind))
				if givenKind != "list" && givenKind != "struct" {
					d.Suggestion = fmt.Sprintf("write the value in double quotes, as written: %s: \"...\" (an environment value may be a secret, so it is not repeated here)", key)
				}
			}
		}
	case want == "list":
		d.Message = fmt.Sprintf("%s: a list in brackets is required, not %s", d.Path, given)
		v, err := strconv.Unquote(given)
		switch {
		case key == "token_sha256":
			d.Suggestion = `write it in brackets: token_sha256: ["<64 hex digits>", ...]`
		case err != nil:
		case key == "command":
			d.Suggestion = fmt.Sprintf("write the program and each argument as an element: command: %s", quotedList(strings.Fields(v)))
		default:
			d.Suggestion = fmt.Sprintf("write it in brackets: %s: %s", key, quotedList([]string{v}))
		}
	}
}

// tokenHashWording says why a token_sha256 is refused, without repeating
// it, and how to compute one.
func tokenHashWording(path, v string) (msg, suggestion string) {
	const how = `compute it with: printf %s "$TOKEN" | sha256sum (the 64 digits before " -"); the token itself is never written in the configuration`
	hex := v != "" && strings.Trim(strings.ToLower(v), "0123456789abcdef") == ""
	switch {
	case hex && len(v) == 64:
		// Uppercase is refused rather than folded: the hash is compared
		// as written, and a hash is one spelling everywhere.
		return path + ": a token hash is written in lowercase hex; this one has uppercase letters", "write it in lowercase, as sha256sum prints it"
	case hex:
		return fmt.Sprintf("%s: not the hex SHA-256 of a token: it has %d hex digits, a SHA-256 has 64", path, len(v)), how
	}
	return path + ": not the hex SHA-256 of a token (64 lowercase hex digits); the token itself, or a placeholder, is refused", how
}

// envNameWording says why v is not the name of an environment variable,
// and suggests the name it may mean. key is the key to write it under,
// "" for a list element or an env key.
func envNameWording(path, key, v string) (msg, suggestion string) {
	// The value is never repeated: what was written where a variable's
	// name belongs is often the secret the variable should hold.
	msg = fmt.Sprintf("%s: not the name of an environment variable (letters, digits and '_', not starting with a digit)", path)
	written := func(name string) string { // how to write it, under key when there is one
		if key == "" {
			return strconv.Quote(name)
		}
		return key + ": " + strconv.Quote(name)
	}
	if name := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(v, "$"), "{"), "}"); strings.HasPrefix(v, "$") && validEnvName(name) {
		return msg, "give the variable's name, without $: " + written(name)
	}
	// A name in capitals with a '-' or '.' for a '_' is a misspelt name;
	// anything else may be a value, and nothing is built from it.
	if upperName.MatchString(v) {
		return msg, "for example " + written(strings.NewReplacer("-", "_", ".", "_").Replace(v))
	}
	return msg, "if this is the secret itself, move it to the gateway's environment and give the variable's name here (and rotate it if this file is shared)"
}

var upperName = regexp.MustCompile(`^[A-Z][A-Z0-9_.-]{0,31}$`)

// varName is how an error names the variable a *_env key gives: by its
// name when that is written as variables' names are (capitals, digits and
// '_'), else "the variable it names". A valid name can still be a secret
// pasted in by mistake (ghp_..., whsec_...), and an error must not print
// one.
func varName(v string) string {
	if conventionalName.MatchString(v) {
		return v
	}
	return "the variable it names"
}

var conventionalName = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

func validEnvName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// quotedList writes strings as a CUE list.
func quotedList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// readConfigFiles reads a configuration directory's .cue files, or one
// file, and returns them with the directory positions are relative to.
func readConfigFiles(path string) ([]compiler.File, string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, "", failuref("--config: %v", err)
	}
	if !st.IsDir() {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, "", failuref("--config: %v", err)
		}
		return []compiler.File{{Name: filepath.Base(path), Data: b}}, filepath.Dir(path), nil
	}
	files, err := compiler.ReadDir(path)
	if err != nil {
		return nil, "", failuref("--config: %v", err)
	}
	if len(files) == 0 {
		return nil, "", failuref("--config: no .cue files in %s (the configuration is CUE in package %s; see docs/gateway.md)", path, gatewayPackage)
	}
	return files, path, nil
}

// findProgram resolves an upstream's program: a bare name in PATH, or a
// path (relative ones to the configuration's directory).
func findProgram(prog, dir string) (string, error) {
	if !strings.ContainsRune(prog, filepath.Separator) && !strings.Contains(prog, "/") {
		p, err := exec.LookPath(prog)
		if err != nil {
			return prog, fmt.Errorf("program %q is not found in PATH", prog)
		}
		return p, nil
	}
	p, err := filepath.Abs(filepath.Join(dir, prog))
	if filepath.IsAbs(prog) {
		p, err = prog, nil
	}
	if err != nil {
		return prog, err
	}
	st, err := os.Stat(p)
	switch {
	case err != nil:
		return p, fmt.Errorf("program %s does not exist (a relative path is relative to the configuration's directory)", prog)
	case st.IsDir() || st.Mode()&0o111 == 0:
		return p, fmt.Errorf("%s is not an executable program", prog)
	}
	return p, nil
}

// gatewayDiagnostics prints configuration problems and a summary.
func gatewayDiagnostics(w io.Writer, root string, ds []compiler.Diagnostic, use configUse) error {
	n := 0
	for _, d := range ds {
		fmt.Fprintln(w, d.Format(filepath.ToSlash(root)))
		if d.Severity == compiler.Error {
			n++
		}
	}
	fmt.Fprintf(w, "%s in the gateway configuration: %s\n", count(n, "error"), use.notDone())
	return withCode(ExitProblems, errSilent)
}

func writeGatewayCheck(w io.Writer, config string, s *gatewaySetup, t *decide.Table) {
	fmt.Fprintf(w, "gateway configuration %s: OK\n", config)
	fmt.Fprintf(w, "  table:     %s (serial %d, %s)\n", s.table, t.Serial(), t.Digest())
	for i, u := range s.cfg.Upstreams {
		label := "upstreams:"
		if i > 0 {
			label = "          "
		}
		note := ""
		if _, ok := t.Source().Servers[u.Name]; !ok {
			note = " (not in the table: everything it offers is denied)"
		}
		fmt.Fprintf(w, "  %s %s (%s)%s\n", label, u.Name, s.kinds[u.Name], note)
	}
	if s.address == "" {
		fmt.Fprintf(w, "  front:     stdio, principal %s\n", s.principal)
	} else {
		principals := map[string]bool{}
		for _, p := range s.http.Tokens {
			principals[p] = true
		}
		fmt.Fprintf(w, "  front:     http on %s, %s\n", s.address, count(len(principals), "principal"))
		h := s.http.WithDefaults()
		fmt.Fprintf(w, "  sessions:  at most %d open per principal; closed after %s without a request\n", h.MaxSessions, count(int(h.IdleTimeout/time.Minute), "minute"))
	}
	if s.gate == nil {
		fmt.Fprintf(w, "  approvals: no approval gate; ui:// resources stay denied\n")
		return
	}
	var channels []string
	for _, name := range sortedChannelNames(t) {
		channels = append(channels, fmt.Sprintf("%s (%s)", name, t.Source().Channels[name].Kind))
	}
	line := strings.Join(channels, ", ")
	if line == "" {
		line = "no channels in the table"
	}
	if s.adminAddress != "" {
		line += "; admin on " + s.adminAddress
	}
	fmt.Fprintf(w, "  approvals: %s\n", line)
	fmt.Fprintf(w, "  holds:     progress every %ds; approve once used within %ds; consent waits %ds\n",
		s.gate.ProgressInterval/time.Second, s.gate.OnceWindow/time.Second, s.gate.ConsentWait/time.Second)
}

// sortedChannelNames lists the channels a table defines, those of the
// served servers first as the table names them.
func sortedChannelNames(t *decide.Table) []string {
	names := make([]string, 0, len(t.Source().Channels))
	for name := range t.Source().Channels {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		ki, kj := t.Source().Channels[names[i]].Kind, t.Source().Channels[names[j]].Kind
		if ki != kj {
			return ki < kj
		}
		return names[i] < names[j]
	})
	return names
}

// withoutUserinfo is URL u with any user name and password before its host
// replaced by "…", so that a message can quote it.
func withoutUserinfo(u string) string {
	rest, scheme := u, ""
	if i := strings.Index(u, "://"); i >= 0 {
		scheme, rest = u[:i+3], u[i+3:]
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
		return scheme + "…" + rest[at:]
	}
	return u
}
