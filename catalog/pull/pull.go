// Package pull connects to upstream MCP servers with the MCP Go SDK client
// and lists what they offer into catalogue snapshots.
//
// Servers are pulled concurrently, each within its own timeout, so pulling
// many servers takes about as long as the slowest one. A server that fails
// (will not start, times out, answers with malformed listings) yields an
// error naming it and what it was doing; it never yields a partial snapshot.
// This package writes nothing: the caller decides what to keep.
package pull

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/internal/clip"
	"github.com/policyc/policyc/internal/httpheader"
	"github.com/policyc/policyc/internal/mcplist"
	"github.com/policyc/policyc/internal/procexit"
	"github.com/policyc/policyc/internal/termsafe"
	"github.com/policyc/policyc/runtime/table"
)

// protocolVersion is the version asked for in the handshake: the one every
// current server speaks (the gateway asks for the same).
const protocolVersion = "2025-11-25"

// DefaultTimeout bounds one server's pull when Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Upstream is one server to pull.
type Upstream struct {
	// Name is the server's name in the policy's mcp_servers.
	Name string
	// Dial returns a fresh transport to the server.
	Dial func(ctx context.Context) (mcp.Transport, error)
	// stderr holds the end of a command's standard error, for error
	// messages; nil for other upstreams.
	stderr *tail
}

// Command is an upstream started as a subprocess speaking MCP on its
// standard input and output. env is its whole environment; dir its working
// directory ("" for the current one).
func Command(name, program string, args, env []string, dir string) Upstream {
	t := &tail{}
	return Upstream{Name: name, stderr: t, Dial: func(ctx context.Context) (mcp.Transport, error) {
		cmd := exec.Command(program, args...)
		cmd.Env = env
		cmd.Dir = dir
		cmd.Stderr = t
		// A server that leaves children holding its pipes must not keep
		// Wait (and so the pull) blocked.
		cmd.WaitDelay = time.Second
		return procexit.New(cmd, time.Second), nil
	}}
}

// HTTP is an upstream reached over streamable HTTP; header is sent with
// every request (for example a bearer token).
func HTTP(name, url string, header http.Header) Upstream {
	client := httpheader.Client(header, nil)
	return Upstream{Name: name, Dial: func(ctx context.Context) (mcp.Transport, error) {
		return &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: client, MaxRetries: -1}, nil
	}}
}

// Options tune a pull.
type Options struct {
	// Timeout bounds each server's pull: starting it, the handshake and
	// every listing. Zero means DefaultTimeout.
	Timeout time.Duration
	// Progress, when set, is called once per server as soon as it
	// finishes, with its result. Calls never overlap.
	Progress func(Result)
	// Version is reported to servers as the client's version.
	Version string
}

// Result is the outcome of pulling one server.
type Result struct {
	Server string
	// Snapshot is what the server offers; nil when Err is set.
	Snapshot *catalog.Snapshot
	Err      error
	// Duration is the wall time of this server's pull.
	Duration time.Duration
}

// Pull pulls every upstream concurrently and returns their results in the
// order of ups. Each result is reported to Progress as soon as it is known;
// Pull returns once every subprocess it started has been stopped.
func Pull(ctx context.Context, ups []Upstream, opts Options) []Result {
	results := make([]Result, len(ups))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, up := range ups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, stopped := one(ctx, up, opts)
			results[i] = r
			if opts.Progress != nil {
				mu.Lock()
				opts.Progress(r)
				mu.Unlock()
			}
			waitStopped(stopped)
		}()
	}
	wg.Wait()
	return results
}

// One pulls a single upstream. A subprocess it started has been stopped
// when it returns.
func One(ctx context.Context, up Upstream, opts Options) Result {
	r, stopped := one(ctx, up, opts)
	waitStopped(stopped)
	return r
}

// stopLimit bounds the wait for a subprocess to be stopped once its result
// is known. The SDK stops one within three of its TerminateDurations (one
// second each here: after closing its input, after SIGTERM, after SIGKILL).
const stopLimit = 5 * time.Second

func waitStopped(stopped <-chan struct{}) {
	select {
	case <-stopped:
	case <-time.After(stopLimit):
	}
}

// one pulls a single upstream and returns its result as soon as it is
// known, at the latest shortly after the timeout. stopped is closed once
// the server has been stopped: a subprocess that ignores the end of its
// input gets SIGTERM, then SIGKILL, which may take a few seconds more. The
// teardown of a streamable HTTP session (its cancellation notice and
// DELETE) leaves nothing running, and is not waited for.
func one(ctx context.Context, up Upstream, opts Options) (r Result, stopped <-chan struct{}) {
	start := time.Now()
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p := &puller{up: up, logs: &sdkLog{}, version: opts.Version}
	type outcome struct {
		snap *catalog.Snapshot
		err  error
	}
	done := make(chan outcome, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		snap, err := p.pull(ctx)
		done <- outcome{snap, err}
	}()
	stopped = finished
	if up.stderr == nil {
		stopped = closedChan // not a subprocess
	}
	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		// Past the deadline the SDK may still spend seconds telling a server
		// that does not answer that the request is cancelled and the session
		// over. The timeout is the bound the user set: the result is known
		// here, and that teardown goes on after it (stopped says when it is
		// over).
		select {
		case o = <-done:
		case <-time.After(teardownGrace):
			o = outcome{err: ctx.Err()}
		}
	}
	if o.err != nil {
		return Result{Server: up.Name, Err: p.explain(ctx, o.err, timeout), Duration: time.Since(start)}, stopped
	}
	return Result{Server: up.Name, Snapshot: o.snap, Duration: time.Since(start)}, stopped
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// teardownGrace is how long a pull that timed out waits for the SDK to
// return before it reports the timeout anyway.
const teardownGrace = 250 * time.Millisecond

// puller is the state of one server's pull.
type puller struct {
	up   Upstream
	logs *sdkLog
	// stage says what the pull is doing, for error messages; a string,
	// read by One while the pull may still be tearing down.
	stage   atomic.Value
	version string
	// proc is a command server's transport, which knows how its process
	// ended; nil for other servers.
	proc atomic.Pointer[procexit.Transport]
}

func (p *puller) pull(ctx context.Context) (*catalog.Snapshot, error) {
	if !table.ValidName(p.up.Name) {
		return nil, fmt.Errorf("%q is not a server name", p.up.Name)
	}
	p.stage.Store("starting it")
	t, err := p.up.Dial(ctx)
	if err != nil {
		return nil, err
	}
	if pt, ok := t.(*procexit.Transport); ok {
		p.proc.Store(pt)
	}
	version := p.version
	if version == "" {
		version = "dev"
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "policyc-catalog", Version: version}, &mcp.ClientOptions{
		Logger:       slog.New(p.logs),
		Capabilities: &mcp.ClientCapabilities{},
	})
	p.stage.Store("initializing")
	cs, err := client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
	if err != nil {
		// A stdio transport starts its program when it connects.
		if procexit.NotStarted(err) {
			p.stage.Store("starting it")
		}
		return nil, err
	}
	defer cs.Close()
	caps := &mcp.ServerCapabilities{}
	if ir := cs.InitializeResult(); ir != nil && ir.Capabilities != nil {
		caps = ir.Capabilities
	}
	s := &catalog.Snapshot{Server: p.up.Name}
	if caps.Tools != nil {
		p.stage.Store("listing tools")
		tools, err := mcplist.Tools(ctx, cs)
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		if excluded := p.logs.excluded(); len(excluded) > 0 {
			return nil, fmt.Errorf("tools/list: malformed listing: %s", strings.Join(excluded, "; "))
		}
		for _, t := range tools {
			ct, err := convertTool(t)
			if err != nil {
				return nil, fmt.Errorf("tools/list: malformed listing: %w", err)
			}
			s.Tools = append(s.Tools, ct)
		}
	}
	if caps.Prompts != nil {
		p.stage.Store("listing prompts")
		prompts, err := mcplist.Prompts(ctx, cs)
		if err != nil {
			return nil, fmt.Errorf("prompts/list: %w", err)
		}
		for _, x := range prompts {
			cp, err := catalog.PromptFromMCP(x)
			if err != nil {
				return nil, fmt.Errorf("prompts/list: malformed listing: %w", err)
			}
			s.Prompts = append(s.Prompts, cp)
		}
	}
	if caps.Resources != nil {
		p.stage.Store("listing resources")
		resources, err := mcplist.Resources(ctx, cs)
		if err != nil {
			return nil, fmt.Errorf("resources/list: %w", err)
		}
		for _, x := range resources {
			if x == nil {
				return nil, errors.New("resources/list: malformed listing: a null resource")
			}
			s.Resources = append(s.Resources, catalog.ResourceFromMCP(x))
		}
		p.stage.Store("listing resource templates")
		templates, err := mcplist.Templates(ctx, cs)
		if err != nil {
			return nil, fmt.Errorf("resources/templates/list: %w", err)
		}
		for _, x := range templates {
			if x == nil {
				return nil, errors.New("resources/templates/list: malformed listing: a null template")
			}
			s.ResourceTemplates = append(s.ResourceTemplates, catalog.ResourceTemplate{URITemplate: x.URITemplate, Name: x.Name, Title: x.Title, Description: x.Description, MIMEType: x.MIMEType})
		}
	}
	// Encoding checks what the SDK does not: names present and unique,
	// schemas valid JSON.
	if _, err := catalog.Encode(s); err != nil {
		return nil, fmt.Errorf("malformed listing: %w", err)
	}
	return s, nil
}

// explain turns a failure into an error that says what was happening, and
// what the server said on its standard error.
func (p *puller) explain(ctx context.Context, err error, timeout time.Duration) error {
	// The SDK's error carries what the server chose to say (a JSON-RPC
	// error's message): escaped, so that it cannot steer the terminal or
	// start a line of its own.
	msg := termsafe.String(err.Error())
	stage, _ := p.stage.Load().(string)
	// A stream of bytes that is not JSON, or JSON that is not JSON-RPC
	// (the MCP Go SDK v1.8.0's "invalid message version tag", which has
	// no error value; TestSDKVersionTagWording in internal/procexit pins
	// it).
	notJSONRPC := strings.Contains(msg, "invalid character") || strings.Contains(msg, "invalid message version tag")
	// Over stdio the SDK may report the session closing instead of the
	// read error that closed it, depending on which it meets first; the
	// transport saw the read error itself.
	bad := p.proc.Load().BadOutput()
	if bad != nil && !notJSONRPC {
		notJSONRPC = true
		msg += " (" + bad.Error() + ")"
	}
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		msg = fmt.Sprintf("timed out after %s while %s", timeout, stage)
	case ctx.Err() == context.Canceled:
		msg = fmt.Sprintf("interrupted while %s", stage)
	case stage == "initializing" && ctx.Err() == nil && procexit.ConnectionEnded(err) && p.proc.Load().Exited() != nil:
		// The server went away before it answered, and exited by itself.
		// The SDK words a closed pipe in several ways, depending on
		// whether it was reading or writing when the process went; how
		// the process ended is what the user needs.
		msg = fmt.Sprintf("initializing: the server exited (%s) before it answered", p.proc.Load().Exited())
	case stage == "starting it" || stage == "initializing":
		msg = fmt.Sprintf("%s: %s", stage, msg)
	}
	if notJSONRPC {
		msg += " (the server wrote something that is not MCP's JSON-RPC)"
	}
	if p.up.stderr != nil {
		if last := p.up.stderr.lastLine(); last != "" {
			msg += fmt.Sprintf(" (its stderr: %q)", last)
		}
	}
	if logged := p.logs.first(); logged != "" && !strings.Contains(msg, logged) {
		msg += fmt.Sprintf(" (client: %s)", logged)
	}
	return errors.New(msg)
}

// tail keeps the last few kilobytes a subprocess wrote to its stderr.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 4096

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailSize:]...)
	}
	return len(p), nil
}

func (t *tail) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if len(last) > 200 {
		last = last[:200] + "…"
	}
	return last
}

// sdkLog collects what the SDK's client logs at error level: the tools it
// drops from a listing as invalid, and wire errors it would otherwise only
// log. Attributes come from the server (a tool's name, its error's text):
// a string is quoted, anything else escaped, so that none reaches the
// terminal raw.
type sdkLog struct {
	mu   sync.Mutex
	msgs []string
	excl []string
}

func (l *sdkLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelError }
func (l *sdkLog) WithAttrs([]slog.Attr) slog.Handler            { return l }
func (l *sdkLog) WithGroup(string) slog.Handler                 { return l }

func (l *sdkLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(termsafe.String(r.Message))
	r.Attrs(func(a slog.Attr) bool {
		v := a.Value.Resolve()
		if v.Kind() == slog.KindString {
			fmt.Fprintf(&b, " %s=%s", termsafe.String(a.Key), clip.Quote(v.String()))
		} else {
			fmt.Fprintf(&b, " %s=%s", termsafe.String(a.Key), termsafe.String(v.String()))
		}
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if strings.HasPrefix(r.Message, "excluding") {
		l.excl = append(l.excl, b.String())
	} else if len(l.msgs) < 3 {
		l.msgs = append(l.msgs, b.String())
	}
	return nil
}

func (l *sdkLog) excluded() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.excl...)
}

func (l *sdkLog) first() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.msgs) == 0 {
		return ""
	}
	return l.msgs[0]
}
