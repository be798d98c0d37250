// Package gateway is the runtime gateway: an MCP server in front of
// upstream MCP servers that enforces a verified decision table on every
// request, built on the official Go SDK.
//
// It never evaluates CUE and never loads a table on its own: Config.Tables
// hands it tables (in a deployment, decide.LoadVerified over the signed
// envelope; nothing else), and New refuses to start without one. What it
// enforces:
//
//   - listings (tools, prompts, resources, resource templates) show only
//     items the table allows or holds for approval, per principal;
//   - a denied tools/call, prompts/get or resources/read is answered by the
//     same code as a name that does not exist, so denial leaks nothing;
//   - ui:// resources are denied unless the table admits them and a consent
//     gate grants consent; tool _meta UI links to denied ones are dropped;
//   - tool calls on approval go to an ApprovalGate; without one, a table
//     that can hold calls is refused;
//   - every decision is written to the DecisionLog, and a decision that
//     cannot be recorded is not acted on.
//
// Upstream faults (a crash, a hang, malformed output) make that upstream's
// items unavailable with clear errors; the others keep serving, and stdio
// upstreams are restarted with backoff.
package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/policyc/policyc/internal/procexit"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// Config is everything the gateway needs, already read and checked by the
// command layer (which reads the CUE configuration).
type Config struct {
	// Upstreams are the servers behind the gateway, by the name the table
	// knows them under. Listings follow this order; a resource URI listed
	// by two upstreams is routed to the first.
	Upstreams []Upstream
	// Tables returns the table to serve, at boot and on every Reload. In a
	// deployment it reads the signed envelope and calls
	// decide.LoadVerified; an error means no table. accept is the
	// gateway's own judgement of a table (can it enforce it, may it
	// replace the serving one): a loader that records anything about the
	// tables it loads (the rollback state) must call it first, and record
	// nothing when it refuses. The gateway judges the table again itself.
	Tables func(accept func(*decide.Table) error) (*decide.Table, error)
	// Approvals decides tool calls the table holds for approval. Nil means
	// none: New and Reload then refuse a table with approval rules for any
	// configured upstream. When it is also an ApprovalWaiter, the gateway
	// lists the wait tool (WaitToolName) to principals with held tools.
	Approvals ApprovalGate
	// Holds says how long a held call waits in place before it is
	// answered with a checkpoint (the request goes on).
	Holds HoldOptions
	// Consent grants reads of ui:// resources the table admits. Nil means
	// none: every ui:// resource stays denied (fail closed).
	Consent ConsentGate
	// Check, when set, is asked about every table before it serves, at
	// boot and on every reload, after the gateway's own checks: an error
	// (wrapped in ErrCannotEnforce) refuses the table. The command uses it
	// to check that every approval and consent channel the table names
	// reaches someone through the approval gate.
	Check func(t *decide.Table) error
	// Log receives every decision. Required.
	Log DecisionLog
	// Logger receives operational messages: upstream restarts, reloads.
	// Nil discards them.
	Logger *slog.Logger
	// CallTimeout bounds every call to an upstream. Default 30s.
	CallTimeout time.Duration
	// ConnectTimeout bounds starting, initializing and listing an
	// upstream. Default 10s.
	ConnectTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before restarting a failed
	// upstream; it doubles from MinBackoff on every failure in a row.
	// Defaults 250ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// TerminateTimeout is how long a stdio upstream whose connection ends
	// has to exit after its stdin is closed before it is sent SIGTERM
	// (then SIGKILL). Default 5s. Close gives it less (closeGrace).
	TerminateTimeout time.Duration
	// Version is reported as the gateway's version to clients and
	// upstreams.
	Version string
	// Now is the gateway's clock: the time of decision records, and when
	// the serving table has expired. nil means time.Now.
	Now func() time.Time
	// Metrics, when set, count the gateway's decisions, calls, upstreams,
	// holds, reloads and sessions (NewMetrics); one Metrics per gateway.
	Metrics *Metrics
	// Tracer, when set, traces every MCP request a client sends with a
	// span (the child of the W3C trace context in the request's _meta),
	// and every request forwarded to an upstream, whose _meta carries the
	// trace context on.
	Tracer trace.TracerProvider
}

// Upstream is one server behind the gateway: exactly one of Command, URL
// and Dial.
type Upstream struct {
	// Name is the server's name in the table (mcp_servers); see
	// CheckUpstreamName.
	Name string
	// Command and Args start a stdio upstream. Env is its whole
	// environment; Dir its working directory (empty: the gateway's).
	Command string
	Args    []string
	Env     []string
	Dir     string
	// URL is a streamable HTTP upstream; Header is sent with every
	// request (for example a bearer token).
	URL    string
	Header http.Header
	// Dial returns a fresh transport for every connection attempt. It is
	// for upstreams in the same process (tests, benchmarks).
	Dial func(ctx context.Context) (mcp.Transport, error)
}

// ErrCannotEnforce is the refusal of a table Config.Check rejects.
var ErrCannotEnforce = errors.New("the table cannot be enforced as configured")

// ErrApprovalsWithoutGate is the refusal of a table that can hold tool
// calls for approval when no ApprovalGate is configured.
var ErrApprovalsWithoutGate = errors.New("approval rules without an approval gate")

// Gateway is a running gateway. Connect clients to it with Connect,
// ServeIO or HTTPHandler.
type Gateway struct {
	cfg    Config
	logger *slog.Logger
	// sdkLogger is logger for the SDK's own messages, warnings and up: it
	// reports every session at info level.
	sdkLogger *slog.Logger
	// undeliverable counts the SDK's warnings about notifications no
	// stream could carry, which sdkLogger leaves out.
	undeliverable atomic.Int64
	now           func() time.Time
	// obs and tracer are Config.Metrics and Config.Tracer's tracer; nil
	// when off.
	obs    *Metrics
	tracer trace.Tracer

	table    atomic.Pointer[decide.Table]
	reloadMu sync.Mutex
	// expiry fires when the serving table expires; closed is set by
	// Close, after which no timer is armed (both under reloadMu).
	expiry *time.Timer
	closed bool

	ups    []*upstream
	byName map[string]*upstream

	mu      sync.Mutex
	servers map[string]*principalServer // one per principal
	// nextDrop is when serverFor next lets go of idle servers
	// (dropIdleLocked); unshown are principals whose servers went while
	// their listing digests could not, shownMu being held.
	nextDrop time.Time
	unshown  []string

	// shown holds, per principal, the digests of the listings it was last
	// told of (listsChanged).
	shownMu sync.Mutex
	shown   map[string][len(listBits)]string

	progress sync.Map // gateway progress token (string) → progressTarget

	pins pinState // the serving table's pins and the drift found

	held heldCalls // the holds of each HTTP session, to end when it does

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New loads the table, checks it can be enforced as configured, starts the
// upstreams and waits (until ctx is done) for each one's first connection
// attempt, so that the first listing a client asks for is complete. An
// upstream that fails to start does not stop the gateway: it is retried
// with backoff and its items are unavailable meanwhile.
func New(ctx context.Context, cfg Config) (*Gateway, error) {
	g, t, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Metrics != nil {
		if err := cfg.Metrics.attach(g); err != nil {
			return nil, err
		}
		g.obs = cfg.Metrics
	}
	if cfg.Tracer != nil {
		g.tracer = cfg.Tracer.Tracer(tracerName)
	}
	g.table.Store(t)
	g.obs.serving(g.now())
	g.reloadMu.Lock()
	g.watchExpiry(t)
	g.reloadMu.Unlock()
	for _, name := range g.upstreamNames() {
		if _, ok := t.Source().Servers[name]; !ok {
			g.logger.Warn("upstream is not in the table: everything it offers is denied", "upstream", name, "table_serial", t.Serial())
		}
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	for _, uc := range cfg.Upstreams {
		u := newUpstream(g, uc)
		g.ups = append(g.ups, u)
		g.byName[u.name] = u
	}
	// Every upstream is in g.ups before any supervisor runs: a supervisor
	// that connects reads them all (listsChanged).
	for _, u := range g.ups {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			u.run(g.ctx)
		}()
	}
	for _, u := range g.ups {
		select {
		case <-u.started:
		case <-ctx.Done():
		}
	}
	g.logger.Info("gateway ready", "table_serial", t.Serial(), "table_digest", t.Digest(), "upstreams", len(g.ups))
	return g, nil
}

// Check does what New does before it starts anything: it checks the
// configuration, loads the table and checks that it can be enforced as
// configured. It returns the table New would serve.
func Check(cfg Config) (*decide.Table, error) {
	_, t, err := prepare(cfg)
	return t, err
}

func prepare(cfg Config) (*Gateway, *decide.Table, error) {
	if err := cfg.check(); err != nil {
		return nil, nil, err
	}
	cfg.setDefaults()
	g := &Gateway{cfg: cfg, logger: cfg.Logger, now: cfg.Now, byName: map[string]*upstream{}, servers: map[string]*principalServer{}, shown: map[string][len(listBits)]string{}}
	if g.logger == nil {
		g.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	g.sdkLogger = slog.New(minLevel{g.logger.Handler(), slog.LevelWarn, &g.undeliverable})
	if g.now == nil {
		g.now = time.Now
	}
	var refused error // the gateway's own refusal, through the loader
	t, err := cfg.Tables(func(t *decide.Table) error {
		refused = g.enforceable(t)
		return refused
	})
	if err == nil && t == nil {
		err = errors.New("the table loader returned no table")
	}
	if err != nil {
		if refused != nil && errors.Is(err, refused) {
			return nil, nil, refused
		}
		return nil, nil, fmt.Errorf("no table to serve, so no service: %w", err)
	}
	if err := g.enforceable(t); err != nil {
		return nil, nil, err
	}
	return g, t, nil
}

func (c *Config) check() error {
	var errs []error
	if c.Tables == nil {
		errs = append(errs, errors.New("no table loader: the gateway serves only a verified table"))
	}
	if c.Log == nil {
		errs = append(errs, errors.New("no decision log: every decision must be recorded"))
	}
	if len(c.Upstreams) == 0 {
		errs = append(errs, errors.New("no upstreams: configure at least one server behind the gateway"))
	}
	seen := map[string]bool{}
	for i, u := range c.Upstreams {
		if err := CheckUpstreamName(u.Name); err != nil {
			errs = append(errs, fmt.Errorf("upstreams[%d]: %w", i, err))
		}
		if seen[u.Name] {
			errs = append(errs, fmt.Errorf("upstream %q is configured twice", u.Name))
		}
		seen[u.Name] = true
		n := 0
		for _, set := range []bool{u.Command != "", u.URL != "", u.Dial != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, fmt.Errorf("upstream %q: give exactly one of a command or a URL", u.Name))
		}
	}
	return errors.Join(errs...)
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.CallTimeout, 30*time.Second)
	def(&c.ConnectTimeout, 10*time.Second)
	def(&c.MinBackoff, 250*time.Millisecond)
	def(&c.MaxBackoff, 30*time.Second)
	def(&c.TerminateTimeout, 5*time.Second)
	c.MaxBackoff = max(c.MaxBackoff, c.MinBackoff)
	if c.Version == "" {
		c.Version = "dev"
	}
}

func (g *Gateway) upstreamNames() []string {
	names := make([]string, len(g.cfg.Upstreams))
	for i, u := range g.cfg.Upstreams {
		names[i] = u.Name
	}
	return names
}

// enforceable reports why t cannot be served as configured, or nil.
func (g *Gateway) enforceable(t *decide.Table) error {
	if err := checkAudit(t); err != nil {
		return err
	}
	if err := g.checkApprovals(t); err != nil {
		return err
	}
	if g.cfg.Check != nil {
		if err := g.cfg.Check(t); err != nil {
			return fmt.Errorf("%w: table serial %d: %w", ErrCannotEnforce, t.Serial(), err)
		}
	}
	return nil
}

// checkApprovals refuses a table that can hold a call to a configured
// upstream for approval when there is no gate to decide it. Only tool
// approvals count: prompts and resources never hold.
func (g *Gateway) checkApprovals(t *decide.Table) error {
	if g.cfg.Approvals != nil {
		return nil
	}
	src := t.Source()
	var found []string
	add := func(where string, a *table.Access) {
		if a == nil {
			return
		}
		for _, r := range a.Rules {
			if r.Effect == table.Approve.String() {
				found = append(found, fmt.Sprintf("%s %q at %s", where, r.Pattern, r.Origin))
			}
		}
	}
	served := false
	for _, name := range g.upstreamNames() {
		s, ok := src.Servers[name]
		if !ok {
			continue
		}
		served = true
		add(name, s.Tool)
		for _, sc := range src.Scopes {
			if s, ok := sc.Servers[name]; ok {
				add(sc.Name+" "+name, s.Tool)
			}
		}
	}
	if served {
		for _, sc := range src.Scopes {
			if s, ok := sc.Servers[table.AllServers]; ok {
				add(sc.Name+" (every server)", s.Tool)
			}
		}
	}
	if len(found) == 0 {
		return nil
	}
	list := found
	if len(list) > 3 {
		list = append(list[:3:3], fmt.Sprintf("and %d more", len(found)-3))
	}
	return fmt.Errorf("%w: table serial %d holds tool calls for approval (%s), but no approval gate is configured, so a held call could never be decided; serve a table without approval_list entries for these servers, or add an approval gate to the gateway configuration, at the least approvals: admin: {address: \"127.0.0.1:8443\", approvers: NAME: token_sha256: [\"<sha256 of the approver's token>\"]} (docs/approvals.md#configuration; examples/team/gateway/gateway.cue has one)",
		ErrApprovalsWithoutGate, t.Serial(), strings.Join(list, "; "))
}

// Table returns the table being served.
func (g *Gateway) Table() *decide.Table { return g.table.Load() }

// Reload loads a new table through Config.Tables and serves it when it is
// acceptable: verified (the loader's job), not older than the serving one,
// and enforceable as configured (see New). Otherwise the serving table
// stays and the refusal is logged and returned. The SIGHUP handler calls
// it.
func (g *Gateway) Reload() error {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	cur := g.table.Load()
	var refused error // the gateway's own refusal, through the loader
	t, err := g.cfg.Tables(func(t *decide.Table) error {
		refused = g.replaces(t, cur)
		return refused
	})
	switch {
	case err != nil && refused != nil && errors.Is(err, refused):
		err = refused
	case err == nil && t == nil:
		err = errors.New("the table loader returned no table")
	case err == nil:
		err = g.replaces(t, cur)
	}
	if err != nil {
		g.obs.reloaded("refused")
		g.logger.Error("reload refused; the previous table keeps serving", "error", err.Error(), "table_serial", cur.Serial(), "table_digest", cur.Digest())
		return fmt.Errorf("reload refused, table serial %d (%s) keeps serving: %w", cur.Serial(), cur.Digest(), err)
	}
	if t.Digest() == cur.Digest() {
		g.obs.reloaded("unchanged")
		g.logger.Info("reload: the table is unchanged", "table_serial", cur.Serial(), "table_digest", cur.Digest())
		return nil
	}
	g.table.Store(t)
	g.obs.serving(g.now())
	g.obs.reloaded("loaded")
	g.watchExpiry(t)
	g.logger.Info("table reloaded", "table_serial", t.Serial(), "table_digest", t.Digest(), "previous_serial", cur.Serial())
	g.listsChanged(listAll)
	return nil
}

// watchExpiry arms the timer for t's expiry, replacing the serving one's.
// From that instant every decision is a deny (tableDecide); the timer says
// so in the log and tells clients their listings changed, as they are now
// empty. The caller holds reloadMu.
func (g *Gateway) watchExpiry(t *decide.Table) {
	if g.expiry != nil {
		g.expiry.Stop()
		g.expiry = nil
	}
	at, ok := t.Expires()
	if !ok {
		return
	}
	var expired func()
	expired = func() {
		if g.table.Load() != t {
			return
		}
		if left := at.Sub(g.now()); left > 0 { // the clock was behind the timer
			g.reloadMu.Lock()
			if g.table.Load() == t && !g.closed {
				g.expiry = time.AfterFunc(left, expired)
			}
			g.reloadMu.Unlock()
			return
		}
		g.logger.Error("the serving table has expired: every request is denied until a newer signed table is loaded (SIGHUP)",
			"table_serial", t.Serial(), "table_digest", t.Digest(), "expired", at.UTC().Format(time.RFC3339))
		g.listsChanged(listAll)
	}
	g.expiry = time.AfterFunc(max(at.Sub(g.now()), 0), expired)
}

// replaces reports why t may not replace cur, the serving table, or nil.
// A table with cur's serial must be cur, or cur re-signed with another
// expiry (a renewal); any other change must carry a newer serial.
func (g *Gateway) replaces(t, cur *decide.Table) error {
	switch {
	case t.Serial() < cur.Serial():
		return fmt.Errorf("%w: table serial %d is older than serial %d, which is serving; deploy a table built from the current commit%s", decide.ErrRollback, t.Serial(), cur.Serial(), decide.WorkTreeHint(t.Serial(), ""))
	case t.Serial() == cur.Serial() && t.Digest() != cur.Digest() && !table.Renews(t.Source(), cur.Source()):
		return fmt.Errorf("table serial %d is the serving table's serial but its content differs (%s, serving %s): a changed table must carry a newer serial%s", t.Serial(), t.Digest(), cur.Digest(), decide.WorkTreeHint(t.Serial(), ""))
	case t.Serial() == cur.Serial() && t.Digest() != cur.Digest() && !table.ExtendsExpiry(t.Source().Expires, cur.Source().Expires):
		// A renewal extends the expiry: going back to an earlier one, or
		// to none, would undo a shortened expiry with an older envelope.
		return fmt.Errorf("table serial %d is the serving table re-signed with %s, which does not extend the serving one's (%s): a renewal must extend it", t.Serial(), decide.ExpiryText(t.Source().Expires), decide.ExpiryText(cur.Source().Expires))
	}
	return g.enforceable(t)
}

// Close stops the upstreams and waits for their supervisors. A stdio
// upstream's input is closed; one still running closeGrace later gets
// SIGTERM, and SIGKILL after another closeGrace (with what it started, its
// process group): Close returns within about twice closeGrace however the
// upstreams behave, so that a gateway whose host closed its input exits
// before the host's own deadline, and takes its upstreams with it.
func (g *Gateway) Close() error {
	g.reloadMu.Lock()
	g.closed = true
	if g.expiry != nil {
		g.expiry.Stop()
	}
	g.reloadMu.Unlock()
	g.cancel()
	var closing sync.WaitGroup
	for _, u := range g.ups {
		if cs := u.snapshot().session; cs != nil {
			closing.Go(func() { cs.Close() })
		}
	}
	stopped := make(chan struct{})
	go func() {
		closing.Wait()
		g.wg.Wait()
		close(stopped)
	}()
	for _, end := range []func(*procexit.Transport){(*procexit.Transport).Terminate, (*procexit.Transport).Kill} {
		t := time.NewTimer(closeGrace)
		select {
		case <-stopped:
			t.Stop()
			return nil
		case <-t.C:
		}
		for _, u := range g.ups {
			if p := u.proc.Load(); p != nil {
				end(p)
			}
		}
	}
	<-stopped
	return nil
}

// closeGrace is how long Close lets a stdio upstream take to exit after
// its input is closed, and then after SIGTERM.
const closeGrace = 300 * time.Millisecond

// Upstream reports whether the named upstream is connected, and if not,
// why. It is for health checks and tests.
func (g *Gateway) Upstream(name string) (up bool, reason error) {
	u := g.byName[name]
	if u == nil {
		return false, fmt.Errorf("no upstream %q", name)
	}
	st := u.snapshot()
	return st.session != nil, st.down
}

// Connect serves one client session for principal over t.
func (g *Gateway) Connect(ctx context.Context, principal string, t mcp.Transport) (*mcp.ServerSession, error) {
	if !table.ValidPrincipal(principal) {
		return nil, fmt.Errorf("principal %q: a principal is a name of letters, digits and '.', '_', '@', '+', ':', '/', '-', starting with a letter or digit", principal)
	}
	return g.sessionServer(principal).Connect(ctx, t, nil)
}

// sessionServer returns the server a new session of principal connects
// to. When the principal has no session yet, what its first listings show
// is taken as what any later change is compared with (listsChanged).
func (g *Gateway) sessionServer(principal string) *mcp.Server {
	s, fresh := g.serverFor(principal)
	if fresh {
		digests := g.listingDigests(g.table.Load(), g.now(), principal, listAll)
		g.shownMu.Lock()
		g.shown[principal] = digests
		g.shownMu.Unlock()
	}
	return s
}

// serverFor returns the MCP server of principal's sessions: the principal
// is fixed per server, so no request can speak for another. fresh is set
// when the server has no session yet.
func (g *Gateway) serverFor(principal string) (_ *mcp.Server, fresh bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if ps := g.servers[principal]; ps != nil {
		ps.handed = now
		return ps.s, !hasSession(ps.s)
	}
	g.dropIdleLocked(now)
	s := mcp.NewServer(&mcp.Implementation{Name: "policyc-gateway", Version: g.cfg.Version}, &mcp.ServerOptions{
		Logger: g.sdkLogger,
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Prompts:   &mcp.PromptCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true},
		},
	})
	s.AddReceivingMiddleware(g.middleware(principal))
	if g.tracer != nil {
		s.AddReceivingMiddleware(g.traceMiddleware) // outermost: added last
	}
	g.servers[principal] = &principalServer{s: s, handed: now}
	return s, true
}

// principalServer is the MCP server of one principal's sessions.
type principalServer struct {
	s *mcp.Server
	// handed is when s was last handed out, to a session about to connect
	// or a request of the sessionless protocol.
	handed time.Time
}

// serverIdle is how long a principal's server with no session is kept
// after it was last handed out. The SDK connects the session a server is
// handed out for at once, so one that long without a session has none
// coming; dropping it loses nothing, as the next session takes its
// listings afresh (sessionServer).
const serverIdle = 10 * time.Minute

// dropIdleLocked lets go of the servers idle for serverIdle, and of their
// listing digests, at most once a minute: new servers are made as
// principals come, so without it a gateway whose identity provider issues
// tokens to ever new subjects (or groups) would keep a server for each
// one it ever served.
func (g *Gateway) dropIdleLocked(now time.Time) {
	if now.Before(g.nextDrop) {
		return
	}
	g.nextDrop = now.Add(time.Minute)
	for p, ps := range g.servers {
		if now.Sub(ps.handed) >= serverIdle && !hasSession(ps.s) {
			delete(g.servers, p)
			g.unshown = append(g.unshown, p)
		}
	}
	// The digests go too, unless listsChanged holds shownMu (while it
	// lists for every class): waiting for it here would hold up every new
	// server meanwhile, so they go at a later drop. A principal whose
	// server is back by then keeps the digests its new server took.
	if len(g.unshown) == 0 || !g.shownMu.TryLock() {
		return
	}
	for _, p := range g.unshown {
		if g.servers[p] == nil {
			delete(g.shown, p)
		}
	}
	g.shownMu.Unlock()
	g.unshown = g.unshown[:0]
}

// hasSession reports whether s serves a session.
func hasSession(s *mcp.Server) bool {
	for range s.Sessions() {
		return true
	}
	return false
}

// The SDK sends list_changed notifications when a server's own feature set
// changes, and offers no other way to send them. So every principal's
// server holds one placeholder item of each kind, re-added to announce a
// change. The gateway answers every method that could reveal them itself
// (see middleware), so clients never see them.
var (
	placeholderTool     = &mcp.Tool{Name: "policyc.list-changed", InputSchema: map[string]any{"type": "object"}}
	placeholderPrompt   = &mcp.Prompt{Name: "policyc.list-changed"}
	placeholderResource = &mcp.Resource{URI: "policyc-gateway:list-changed", Name: "policyc.list-changed"}
)

func placeholderToolHandler(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return nil, errors.New("not served")
}

func placeholderPromptHandler(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	return nil, errors.New("not served")
}

func placeholderResourceHandler(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return nil, errors.New("not served")
}

// listsChanged tells the clients whose listings of which changed that they
// did: an upstream came or went or re-listed, the table changed or
// expired. A principal is told only when what it would be listed differs
// from what it was when it was last told (or when its first session
// came), so that changes to items it may not see tell it nothing. (A
// listing that changes and changes back before this runs tells nothing;
// a client that listed in between keeps a stale listing until the next
// change. Every request is decided on its own, so nothing hidden becomes
// reachable by it.)
func (g *Gateway) listsChanged(which int) {
	g.checkPins()
	g.mu.Lock()
	servers := make(map[string]*mcp.Server, len(g.servers))
	for p, ps := range g.servers {
		servers[p] = ps.s
	}
	g.mu.Unlock()
	// g.mu is never taken while shownMu is held.
	g.shownMu.Lock()
	defer g.shownMu.Unlock()
	// Principals of one class are listed alike: each class's listings
	// are made once, from one table at one time.
	t, at := g.table.Load(), g.now()
	byClass := map[decide.Class][len(listBits)]string{}
	for p, s := range servers {
		if !hasSession(s) {
			// No one to tell; its next first session takes the digests
			// afresh (Connect).
			continue
		}
		c := t.ClassOf(p)
		now, done := byClass[c]
		if !done {
			now = g.listingDigests(t, at, p, which)
			byClass[c] = now
		}
		last := g.shown[p]
		for i, bit := range listBits {
			if which&bit == 0 || now[i] != "" && now[i] == last[i] {
				continue
			}
			switch bit {
			case listTools:
				s.AddTool(placeholderTool, placeholderToolHandler)
			case listPrompts:
				s.AddPrompt(placeholderPrompt, placeholderPromptHandler)
			case listResources:
				s.AddResource(placeholderResource, placeholderResourceHandler)
			}
			last[i] = now[i]
		}
		g.shown[p] = last
	}
}

// listBits are the listings listsChanged tracks, in the order of a
// listingDigests.
var listBits = [...]int{listTools, listPrompts, listResources}

// listingDigests returns, for each listing of which, a digest of what
// principal would be listed by table t at now (resources with templates),
// or "" when it could not be taken; the others are empty. The listings are
// made dry: no decision of theirs is logged.
func (g *Gateway) listingDigests(t *decide.Table, now time.Time, principal string, which int) (out [len(listBits)]string) {
	for i, bit := range listBits {
		if which&bit == 0 {
			continue
		}
		ls := &listing{g: g, t: t, now: now, principal: principal, dry: true}
		var v any
		var err error
		switch bit {
		case listTools:
			v, err = g.tools(ls)
		case listPrompts:
			v, err = g.prompts(ls)
		case listResources:
			var rs []*mcp.Resource
			var ts []*mcp.ResourceTemplate
			if rs, err = g.resources(ls); err == nil {
				ts, err = g.templates(ls)
			}
			v = []any{rs, ts}
		}
		b, jerr := json.Marshal(v)
		if err != nil || jerr != nil {
			continue // unknown, "": counted as changed (listsChanged)
		}
		sum := sha256.Sum256(b)
		out[i] = string(sum[:])
	}
	return out
}

// progressTarget is where progress of one forwarded request goes back to.
type progressTarget struct {
	session *mcp.ServerSession
	token   any
	// upstream is the one the request went to, the only one whose
	// progress for it is passed on.
	upstream *upstream
}

// forwardProgress passes progress notification p of upstream from to the
// client whose request it is about, under the client's own token. Progress
// for a token the gateway did not hand out, or did not hand to from, is
// dropped.
func (g *Gateway) forwardProgress(ctx context.Context, from *upstream, p *mcp.ProgressNotificationParams) {
	tok, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := g.progress.Load(tok)
	if !ok {
		return
	}
	t := v.(progressTarget)
	if t.upstream != from {
		return
	}
	nctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_ = t.session.NotifyProgress(nctx, &mcp.ProgressNotificationParams{ProgressToken: t.token, Progress: p.Progress, Total: p.Total, Message: p.Message})
}

// minLevel passes on the SDK's records at or above a level, except the
// warning that a notification could not be delivered for want of a stream
// to carry it: a client that keeps no standalone stream open gets no
// notifications, which is its choice, and every listing change would
// otherwise log one warning per such session; and the warning that tells
// whoever builds a stateful server with the SDK to make it stateless, which
// a client asking the HTTP front for protocol 2026-07-28 sets off.
type minLevel struct {
	slog.Handler
	level slog.Level
	// dropped counts the warnings left out.
	dropped *atomic.Int64
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}

func (h minLevel) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "calling notifications/") && strings.Contains(r.Message, "rejected by transport") {
		h.dropped.Add(1)
		return nil
	}
	if strings.HasPrefix(r.Message, "rejecting request with protocol version") && strings.Contains(r.Message, "set StreamableHTTPOptions.Stateless") {
		// A client asked the HTTP front for the sessionless protocol; it
		// is answered -32022 with the versions the front serves, and
		// falls back to one of them. The warning is advice to whoever
		// builds a server with the SDK, not to an operator.
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.level, h.dropped}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.level, h.dropped}
}
