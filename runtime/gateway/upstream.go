package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/internal/httpheader"
	"github.com/policyc/policyc/internal/procexit"
)

// upstreamProtocol is the protocol version the gateway asks its upstreams
// for: the handshake version every current server speaks.
const upstreamProtocol = "2025-11-25"

// upstream is one upstream server: a supervisor keeps a client session to
// it, restarts it with backoff when it fails, and keeps its catalogue.
type upstream struct {
	g      *Gateway
	name   string
	dial   func(ctx context.Context) (mcp.Transport, error)
	client *mcp.Client
	// proc is the transport of a command upstream's current connection,
	// which knows how its process ended; set by run's goroutine, read by
	// Close too, which ends the process when it does not stop in time.
	proc atomic.Pointer[procexit.Transport]
	// stream is set for an upstream that is not reached over HTTP: output
	// that is not JSON-RPC ends its connection.
	stream bool

	state atomic.Pointer[upState]
	// started is closed when the first connection attempt has finished,
	// whether it succeeded or not.
	started chan struct{}

	// dirty holds the list kinds an upstream announced changes of; kick
	// wakes the refresher.
	dirty atomic.Uint32
	kick  chan struct{}
}

// upState is an upstream's state: immutable, replaced as a whole.
type upState struct {
	// session is nil while the upstream is down.
	session *mcp.ClientSession
	// cat is the last catalogue listed, kept while down so that calls to
	// known items say "unavailable" rather than "unknown"; nil until the
	// first successful listing.
	cat *catalogue
	// down says why the upstream is unavailable.
	down error
}

func newUpstream(g *Gateway, cfg Upstream) *upstream {
	u := &upstream{g: g, name: cfg.Name, stream: cfg.URL == "", started: make(chan struct{}), kick: make(chan struct{}, 1)}
	u.dial = cfg.Dial
	if u.dial == nil {
		u.dial = u.dialConfigured(cfg)
	}
	u.state.Store(&upState{down: errors.New("not connected yet")})
	changed := func(which int) {
		u.dirty.Or(uint32(which))
		select {
		case u.kick <- struct{}{}:
		default:
		}
	}
	u.client = mcp.NewClient(&mcp.Implementation{Name: "policyc-gateway", Version: g.cfg.Version}, &mcp.ClientOptions{
		Logger:       g.sdkLogger,
		Capabilities: &mcp.ClientCapabilities{},
		// Notifications are handled on the connection's read loop: the
		// handlers only flag the change, the refresher lists.
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { changed(listTools) },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { changed(listPrompts) },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { changed(listResources) },
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			g.forwardProgress(ctx, u, req.Params)
		},
	})
	return u
}

// dialConfigured returns the dialer of a command or URL upstream.
func (u *upstream) dialConfigured(cfg Upstream) func(ctx context.Context) (mcp.Transport, error) {
	if cfg.URL != "" {
		// Every client session of the gateway shares this upstream session,
		// so concurrent calls need more than the default two idle
		// connections.
		base := http.DefaultTransport.(*http.Transport).Clone()
		base.MaxIdleConnsPerHost = 64
		client := httpheader.Client(cfg.Header, base)
		return func(ctx context.Context) (mcp.Transport, error) {
			return &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: client, MaxRetries: -1}, nil
		}
	}
	return func(ctx context.Context) (mcp.Transport, error) {
		cmd := exec.Command(cfg.Command, cfg.Args...)
		cmd.Env = cfg.Env
		cmd.Dir = cfg.Dir
		cmd.Stderr = &lineLogger{logger: u.g.logger, upstream: u.name}
		return procexit.New(cmd, u.g.cfg.TerminateTimeout), nil
	}
}

// lineLogger passes an upstream's stderr to the gateway's log, line by line.
type lineLogger struct {
	logger   *slog.Logger
	upstream string
	mu       sync.Mutex
	partial  []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.logger.Info("upstream stderr", "upstream", l.upstream, "line", string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	if len(l.partial) > 64<<10 { // a very long line without a newline
		l.logger.Info("upstream stderr", "upstream", l.upstream, "line", string(l.partial))
		l.partial = l.partial[:0]
	}
	return len(p), nil
}

// snapshot returns the upstream's current state.
func (u *upstream) snapshot() *upState { return u.state.Load() }

// run keeps the upstream connected until ctx is done: connect and list,
// serve until the connection ends, then wait a backoff and start again.
func (u *upstream) run(ctx context.Context) {
	backoff := u.g.cfg.MinBackoff
	first := true
	for {
		cs, cat, err := u.connect(ctx)
		// Both are logged before started is closed: the gateway waits for
		// started before it serves, so they come before anything a client
		// sees, however soon the gateway is then stopped.
		if err != nil {
			prev := u.snapshot()
			u.state.Store(&upState{cat: prev.cat, down: err})
			if ctx.Err() == nil {
				u.g.obs.restarted(u.name)
				u.g.logger.Warn("upstream unavailable", "upstream", u.name, "error", err.Error(), "retry_in", backoff.String())
			}
		} else {
			u.state.Store(&upState{session: cs, cat: cat})
			u.g.logger.Info("upstream connected", "upstream", u.name, "tools", len(cat.tools), "prompts", len(cat.prompts), "resources", len(cat.resources), "templates", len(cat.templates))
		}
		if first {
			close(u.started)
			first = false
		}
		if err != nil && ctx.Err() != nil {
			return
		}
		if err == nil {
			u.g.listsChanged(listAll)
			up := time.Now()
			refreshDone := make(chan struct{})
			go u.refresher(ctx, cs, refreshDone)
			werr := cs.Wait()
			close(refreshDone)
			cs.Close()
			if ctx.Err() != nil {
				return
			}
			why := "the connection ended"
			var syntax *json.SyntaxError
			switch {
			case errors.As(werr, &syntax):
				why = "it wrote output that is not JSON-RPC (" + werr.Error() + ")"
			case u.proc.Load().Exited() != nil: // known once Close has waited for it
				why = "it exited (" + u.proc.Load().Exited().String() + ")"
			case werr != nil:
				why = "the connection failed: " + werr.Error()
			}
			u.state.Store(&upState{cat: u.snapshot().cat, down: errors.New(why)})
			u.g.listsChanged(listAll)
			if time.Since(up) >= backoffReset {
				backoff = u.g.cfg.MinBackoff
			}
			u.g.obs.restarted(u.name)
			u.g.logger.Warn("upstream down; restarting", "upstream", u.name, "reason", why, "retry_in", backoff.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, u.g.cfg.MaxBackoff)
	}
}

// backoffReset: a connection that stayed up this long resets the backoff.
const backoffReset = 10 * time.Second

// connect dials the upstream, initializes a session and lists everything.
func (u *upstream) connect(ctx context.Context) (*mcp.ClientSession, *catalogue, error) {
	cctx, cancel := context.WithTimeout(ctx, u.g.cfg.ConnectTimeout)
	defer cancel()
	t, err := u.dial(cctx)
	if err != nil {
		return nil, nil, fmt.Errorf("start: %w", err)
	}
	proc, _ := t.(*procexit.Transport)
	u.proc.Store(proc)
	cs, err := u.client.Connect(cctx, t, &mcp.ClientSessionOptions{ProtocolVersion: upstreamProtocol})
	if err != nil {
		switch {
		case procexit.NotStarted(err):
			return nil, nil, fmt.Errorf("start: %w", err)
		case cctx.Err() != nil && ctx.Err() == nil:
			err = fmt.Errorf("no answer to initialize within %s", u.g.cfg.ConnectTimeout)
		case ctx.Err() == nil && procexit.ConnectionEnded(err) && proc.Exited() != nil:
			// The server went away before it answered, and exited by
			// itself. The SDK words a closed pipe in several ways; how the
			// process ended is what the operator needs.
			err = fmt.Errorf("the server exited (%s) before it answered", proc.Exited())
		}
		return nil, nil, fmt.Errorf("initialize: %w", err)
	}
	u.dirty.Store(0)
	cat, err := fetch(cctx, cs, listAll, nil)
	if err != nil {
		cs.Close()
		if cctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("no complete listing within %s", u.g.cfg.ConnectTimeout)
		}
		return nil, nil, fmt.Errorf("list: %w", err)
	}
	return cs, cat, nil
}

// relistInterval is the least time from the end of one re-listing of an
// upstream to the start of the next. A notification after a quiet spell is
// acted on at once; those that follow within the interval are coalesced
// into one re-listing at its end, so an upstream that announces changes in
// a storm is listed about once an interval, not once a notification.
const relistInterval = time.Second

// refresher re-lists what the upstream announced as changed, until done.
func (u *upstream) refresher(ctx context.Context, cs *mcp.ClientSession, done <-chan struct{}) {
	var last time.Time // when the last re-listing ended
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-u.kick:
		}
		if wait := relistInterval - time.Since(last); !last.IsZero() && wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-time.After(wait):
			}
		}
		which := int(u.dirty.Swap(0))
		if which == 0 {
			continue
		}
		st := u.snapshot()
		if st.session != cs {
			return
		}
		lctx, cancel := context.WithTimeout(ctx, u.g.cfg.CallTimeout)
		cat, err := fetch(lctx, cs, which, st.cat)
		cancel()
		last = time.Now()
		if err != nil {
			u.g.logger.Warn("upstream list refresh failed; keeping the previous list", "upstream", u.name, "error", err.Error())
			continue
		}
		// Store only if the session is still the current one.
		if cur := u.snapshot(); cur.session == cs {
			u.state.CompareAndSwap(cur, &upState{session: cs, cat: cat})
		}
		u.g.listsChanged(which)
	}
}

// unavailable is the error of a call to an upstream that is down.
func (u *upstream) unavailable(st *upState) error {
	return fmt.Errorf("upstream %q is unavailable (%v); the gateway restarts it with backoff, try again later", u.name, st.down)
}

// callError describes a failed upstream call for the client. A call that
// failed because the connection ended marks the upstream down at once, so
// the next calls say "unavailable" while the supervisor restarts it. On a
// stream (stdio), output that is not JSON-RPC ends the connection too (the
// supervisor restarts the upstream for it), and the calls in flight fail
// with the syntax error; over HTTP one bad response ends nothing else.
func (u *upstream) callError(ctx context.Context, st *upState, method string, err error) error {
	var syntax *json.SyntaxError
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return fmt.Errorf("upstream %q did not answer %s within %s; the call was cancelled", u.name, method, u.g.cfg.CallTimeout)
	case procexit.ConnectionEnded(err), // EOF, a closed session, a write to a stdio upstream that has exited
		u.stream && errors.As(err, &syntax):
		u.state.CompareAndSwap(st, &upState{cat: st.cat, down: errors.New("the connection ended")})
		return fmt.Errorf("upstream %q closed its connection during %s (it is restarted with backoff); the call may or may not have taken effect", u.name, method)
	}
	return fmt.Errorf("upstream %q failed %s: %v", u.name, method, err)
}

// BaseEnv is the environment every stdio upstream gets before its own:
// enough to find and run a program, nothing else of the gateway's.
func BaseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG", "SYSTEMROOT"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}
