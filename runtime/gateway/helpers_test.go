package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/internal/policytest"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/envelope"
	"github.com/policyc/policyc/runtime/gateway/internal/testupstream"
	"github.com/policyc/policyc/runtime/table"
)

// debugLogger, when set, receives the gateway's operational log.
var debugLogger *slog.Logger

// testPolicy is the policy most tests serve: two upstreams, deny by
// default; bob may not create issues; a ui:// allowlist with a consent
// channel. "list_*" names are allowed but exist nowhere, to compare denial
// with true absence.
const testPolicy = `package policy

defaults: {tool: "deny", prompt: "deny", resource: "deny"}

approval_channels: page: approvals_page: {}

mcp_servers: github: {
	access: {
		tool: {
			allow_list: ["echo", "create_issue", "slow", "wait", "hang", "crash", "garbage", "pid", "show_app", "show_secret_app", "list_*", "a__*"]
			deny_list: ["delete_repo"]
		}
		prompt: allow_list: ["summarize", "list_*"]
		resource: {
			allow_list: ["file:///srv/projects/*", "repo://acme/*", "ui://github/*"]
			deny_list: ["file:///srv/projects/*/.env"]
		}
	}
	ui: {
		allow_list: ["ui://github/app.html"]
		consent_channel: "page"
	}
}

mcp_servers: linear: access: tool: allow_list: ["echo", "pid", "crash"]

principals: bob: mcp_servers: github: access: tool: deny_list: ["create_issue"]
`

// approvalPolicy holds merge_pull_request for approval.
const approvalPolicy = `package policy

defaults: {tool: "deny", prompt: "deny", resource: "deny"}

approval_channels: page: approvals_page: {}

mcp_servers: github: access: tool: {
	allow_list: ["echo"]
	approval_list: ["merge_pull_request"]
	approval_timeout_seconds: 1
	approval_channel: "page"
}

mcp_servers: linear: access: tool: allow_list: ["echo"]
`

// loadTable compiles and loads a policy, as a developer tool would.
func loadTable(t testing.TB, src string, serial uint64) *decide.Table {
	t.Helper()
	rt, err := decide.Load(policytest.Compile(t, src, serial))
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// fixed returns a table loader that always hands out rt.
func fixed(rt *decide.Table) func(func(*decide.Table) error) (*decide.Table, error) {
	return func(func(*decide.Table) error) (*decide.Table, error) { return rt, nil }
}

// memLog is a decision log that keeps the records.
type memLog struct {
	mu      sync.Mutex
	records []Record
	fail    error
}

func (l *memLog) Log(r *Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return l.fail
	}
	l.records = append(l.records, *r)
	return nil
}

func (l *memLog) all() []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Record(nil), l.records...)
}

// memUpstream is an in-process upstream and the dialer the gateway uses
// for it; sessions lists the server side of every connection made.
type memUpstream struct {
	*testupstream.Upstream
	mu       sync.Mutex
	sessions []*mcp.ServerSession
}

func newMemUpstream(name string) *memUpstream {
	return &memUpstream{Upstream: testupstream.New(testupstream.Options{Name: name})}
}

func (m *memUpstream) dial(ctx context.Context) (mcp.Transport, error) {
	st, ct := mcp.NewInMemoryTransports()
	ss, err := m.Server.Connect(ctx, st, nil)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.sessions = append(m.sessions, ss)
	m.mu.Unlock()
	return ct, nil
}

// kill ends the upstream's current connection, as a crash would.
func (m *memUpstream) kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ss := range m.sessions {
		ss.Close()
	}
}

// testGateway starts a gateway over in-process upstreams "github" and
// "linear" serving testPolicy, with quick timeouts.
type testGateway struct {
	*Gateway
	log    *memLog
	github *memUpstream
	linear *memUpstream
	// oplog holds the gateway's operational log, when a test keeps it.
	oplog *syncBuffer
}

func startGateway(t testing.TB, mutate func(*Config)) *testGateway {
	t.Helper()
	tg := &testGateway{log: &memLog{}, github: newMemUpstream("github"), linear: newMemUpstream("linear")}
	cfg := Config{
		Upstreams: []Upstream{
			{Name: "github", Dial: tg.github.dial},
			{Name: "linear", Dial: tg.linear.dial},
		},
		Tables:      fixed(loadTable(t, testPolicy, 1)),
		Log:         tg.log,
		CallTimeout: 5 * time.Second,
		MinBackoff:  20 * time.Millisecond,
		MaxBackoff:  200 * time.Millisecond,
		Logger:      debugLogger,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	tg.Gateway = g
	// In-process upstreams always come up; on a loaded machine the first
	// attempt may not have finished when New returns.
	for _, u := range cfg.Upstreams {
		if u.Dial != nil {
			eventually(t, 30*time.Second, u.Name+" to be connected", func() bool { up, _ := g.Upstream(u.Name); return up })
		}
	}
	return tg
}

// client connects an SDK client for principal over in-memory transports.
func (tg *testGateway) client(t testing.TB, principal, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := tg.connect(t, principal, version, opts)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// connect is client for any goroutine: it returns its error rather than
// ending the test. The session is closed when the test ends.
func (tg *testGateway) connect(t testing.TB, principal, version string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := tg.Connect(ctx, principal, st); err != nil {
		return nil, err
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { cs.Close() })
	return cs, nil
}

// The protocol versions tests run under: the handshake versions and the
// per-request (sessionless) one.
const (
	legacyVersion = "2025-11-25"
	oldVersion    = "2024-11-05"
	newVersion    = "2026-07-28"
)

var allVersions = []string{oldVersion, legacyVersion, newVersion}

// rawClient speaks newline-delimited JSON-RPC to a gateway's stdio front
// and returns the bytes it answers.
type rawClient struct {
	t       testing.TB
	w       io.WriteCloser // the server's input: Close ends it
	r       *bufio.Reader
	version string
	stop    context.CancelFunc // cancels the context the server runs with
	served  <-chan error       // what the server returned, once it has
}

// rawSession starts ServeIO for principal and returns a client that has
// completed the handshake of version.
func rawSession(t testing.TB, g *Gateway, principal, version string) *rawClient {
	t.Helper()
	return rawServe(t, version, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return g.ServeIO(ctx, principal, in, out)
	})
}

// rawPlain is rawSession against a plain SDK server, for comparison.
func rawPlain(t testing.TB, s *mcp.Server, version string) *rawClient {
	t.Helper()
	return rawServe(t, version, func(ctx context.Context, in io.Reader, out io.Writer) error {
		ss, err := s.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}}, nil)
		if err != nil {
			return err
		}
		go func() {
			<-ctx.Done()
			ss.Close()
		}()
		return ss.Wait()
	})
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func rawServe(t testing.TB, version string, serve func(ctx context.Context, in io.Reader, out io.Writer) error) *rawClient {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		defer close(done)
		served <- serve(ctx, inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		cancel()
		<-done
	})
	c := &rawClient{t: t, w: inW, r: bufio.NewReader(outR), version: version, stop: cancel, served: served}
	if version < newVersion {
		c.call(0, "initialize", fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`, version))
		c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	return c
}

func (c *rawClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.w, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next line the gateway writes that is not a
// notification.
func (c *rawClient) next() []byte {
	c.t.Helper()
	type result struct {
		line []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		for {
			line, err := c.r.ReadBytes('\n')
			if err != nil {
				ch <- result{nil, err}
				return
			}
			var m struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(line, &m) == nil && m.Method != "" {
				continue // a notification
			}
			ch <- result{bytes.TrimSpace(line), nil}
			return
		}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			c.t.Fatalf("reading the gateway's answer: %v", r.err)
		}
		return r.line
	case <-time.After(10 * time.Second):
		c.t.Fatal("no answer from the gateway within 10s")
	}
	return nil
}

// call sends a request with params (JSON text) and returns the raw
// response line. Under the per-request protocol the _meta triple is added.
func (c *rawClient) call(id int, method, params string) []byte {
	c.t.Helper()
	if c.version >= newVersion {
		meta := fmt.Sprintf(`"_meta":{"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientCapabilities":{}}`, c.version)
		if params == "" || params == "{}" {
			params = "{" + meta + "}"
		} else {
			params = "{" + meta + "," + strings.TrimPrefix(params, "{")
		}
	}
	if params == "" {
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q}`, id, method))
	} else {
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	}
	return c.next()
}

// signer signs tables for the verification and reload tests.
type signer struct {
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
}

func newSigner(t testing.TB) signer {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return signer{pub, priv}
}

// sign returns the envelope bytes of a table signed by s.
func (s signer) sign(t testing.TB, tb *table.Table) []byte {
	t.Helper()
	b, err := table.Encode(tb)
	if err != nil {
		t.Fatal(err)
	}
	env := &envelope.Envelope{PayloadType: table.PayloadType, Payload: b}
	env.Sign(s.priv)
	return env.Marshal()
}

// verifiedLoader is what the command wires: read the envelope file, verify
// it against the trusted keys, keep state in stateDir.
func verifiedLoader(path string, trusted []ed25519.PublicKey, stateDir string) func(func(*decide.Table) error) (*decide.Table, error) {
	return func(accept func(*decide.Table) error) (*decide.Table, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		t, _, err := decide.LoadVerified(b, decide.VerifyOptions{Trusted: trusted, StateDir: stateDir, Accept: accept})
		return t, err
	}
}

// upstreamDir holds the built test upstream, removed by TestMain.
var upstreamDir string

// upstreamBinary builds cmd/testupstream once per test binary.
var upstreamBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "policyc-testupstream-")
	if err != nil {
		return "", err
	}
	upstreamDir = dir
	bin := filepath.Join(dir, "testupstream")
	out, err := exec.Command("go", "build", "-o", bin, "./internal/testupstream/cmd/testupstream").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build testupstream: %v\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	if role := os.Getenv(benchRoleEnv); role != "" {
		os.Exit(serveBenchRole(role))
	}
	if up := os.Getenv(stdioGatewayEnv); up != "" {
		os.Exit(serveStdioGateway(up))
	}
	code := m.Run()
	if upstreamDir != "" {
		os.RemoveAll(upstreamDir)
	}
	os.Exit(code)
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// text returns the text of a tool result's first content.
func text(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

func strconvItoa(i int) string { return fmt.Sprint(i) }

func encodeTable(tb *table.Table) ([]byte, error) { return table.Encode(tb) }
