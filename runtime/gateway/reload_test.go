package gateway

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/internal/policytest"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// denyEcho is testPolicy with github's echo denied.
var denyEcho = strings.Replace(testPolicy, `deny_list: ["delete_repo"]`, `deny_list: ["delete_repo", "echo"]`, 1)

func TestReload(t *testing.T) {
	key := newSigner(t)
	dir := t.TempDir()
	stateDir := t.TempDir()
	path := filepath.Join(dir, "table.dsse.json")
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(key.sign(t, policytest.Compile(t, testPolicy, 10)))
	tg := startGateway(t, func(c *Config) {
		c.Tables = verifiedLoader(path, []ed25519.PublicKey{key.pub}, stateDir)
	})
	changed := make(chan struct{}, 10)
	cs := tg.client(t, "alice", legacyVersion, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	echoAllowed := func() bool {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__echo"})
		return err == nil && !res.IsError
	}
	if !echoAllowed() {
		t.Fatal("echo is not allowed by the boot table")
	}

	t.Run("good", func(t *testing.T) {
		write(key.sign(t, policytest.Compile(t, denyEcho, 11)))
		if err := tg.Reload(); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		if s := tg.Table().Serial(); s != 11 {
			t.Errorf("serving serial %d, want 11", s)
		}
		if echoAllowed() {
			t.Error("echo is still allowed after reloading a table that denies it")
		}
		select {
		case <-changed:
		case <-time.After(5 * time.Second):
			t.Error("clients were not told that the lists changed")
		}
		for _, r := range tg.log.all() {
			if r.Op == OpCall && r.Name == "echo" && r.TableSerial == 11 && r.Decision.Effect != table.Deny {
				t.Errorf("table 11 logged %v for echo", r.Decision.Effect)
			}
		}
	})

	state := func() string {
		b, err := os.ReadFile(filepath.Join(stateDir, decide.StateFile))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	refused := func(t *testing.T, want error, wantText string) {
		t.Helper()
		before, recorded := tg.Table(), state()
		defer func() {
			if now := state(); now != recorded {
				t.Errorf("a refused table changed the recorded state from %s to %s", recorded, now)
			}
		}()
		err := tg.Reload()
		if err == nil || (want != nil && !errors.Is(err, want)) || !strings.Contains(err.Error(), wantText) {
			t.Errorf("Reload: got %v, want a refusal matching %v containing %q", err, want, wantText)
		}
		if tg.Table() != before {
			t.Error("a refused table replaced the serving one")
		}
		if echoAllowed() {
			t.Error("the refused table is being enforced")
		}
	}

	t.Run("tampered", func(t *testing.T) {
		b := key.sign(t, policytest.Compile(t, testPolicy, 12))
		// Flip one base64 character of the payload.
		i := bytes.Index(b, []byte(`"payload": "`)) + len(`"payload": "`) + 40
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		write(b)
		refused(t, decide.ErrBadSignature, "keeps serving")
	})
	t.Run("untrusted key", func(t *testing.T) {
		write(newSigner(t).sign(t, policytest.Compile(t, testPolicy, 12)))
		refused(t, decide.ErrUntrusted, "untrusted")
	})
	t.Run("unsigned", func(t *testing.T) {
		raw := policytest.Compile(t, testPolicy, 12)
		tb, err := encodeTable(raw)
		if err != nil {
			t.Fatal(err)
		}
		write(tb)
		refused(t, decide.ErrUnsigned, "bare decision table")
	})
	t.Run("missing file", func(t *testing.T) {
		os.Remove(path)
		refused(t, os.ErrNotExist, "no such file")
	})
	t.Run("rollback", func(t *testing.T) {
		write(key.sign(t, policytest.Compile(t, testPolicy, 9)))
		refused(t, decide.ErrRollback, "older")
	})
	t.Run("rollback without state", func(t *testing.T) {
		// The gateway refuses a rollback itself too, whatever the loader's
		// state directory says.
		tg.cfg.Tables = verifiedLoader(path, []ed25519.PublicKey{key.pub}, "")
		write(key.sign(t, policytest.Compile(t, testPolicy, 10)))
		refused(t, decide.ErrRollback, "older than serial 11, which is serving")
		tg.cfg.Tables = verifiedLoader(path, []ed25519.PublicKey{key.pub}, stateDir)
	})
	t.Run("same serial, other content", func(t *testing.T) {
		write(key.sign(t, policytest.Compile(t, testPolicy, 11)))
		refused(t, nil, "must carry a newer serial")
	})
	t.Run("approvals without a gate", func(t *testing.T) {
		write(key.sign(t, policytest.Compile(t, approvalPolicy, 13)))
		refused(t, ErrApprovalsWithoutGate, "merge_pull_request")
	})
	t.Run("unchanged", func(t *testing.T) {
		write(key.sign(t, policytest.Compile(t, denyEcho, 11)))
		if err := tg.Reload(); err != nil {
			t.Errorf("reloading the serving table: %v", err)
		}
	})
	t.Run("renewed expiry", func(t *testing.T) {
		// CI re-signs the same commit before the expiry lapses: the same
		// serial, a new expiry, so a new digest. That is a renewal.
		tg.cfg.Tables = verifiedLoader(path, []ed25519.PublicKey{key.pub}, stateDir)
		tb := policytest.Compile(t, denyEcho, 11)
		tb.Expires = time.Now().Add(30 * 24 * time.Hour).UTC().Format(time.RFC3339)
		write(key.sign(t, tb))
		before := tg.Table().Digest()
		if err := tg.Reload(); err != nil {
			t.Fatalf("reloading a renewed table: %v", err)
		}
		if got := tg.Table(); got.Serial() != 11 || got.Digest() == before {
			t.Errorf("serving serial %d digest %s; want the renewed table", got.Serial(), got.Digest())
		}
		if !strings.Contains(state(), tg.Table().Digest()) {
			t.Errorf("the state does not record the renewed table: %s", state())
		}
		// Going back to an earlier expiry, or to none, is not a renewal:
		// it would undo a shortened expiry with an older envelope.
		earlier := policytest.Compile(t, denyEcho, 11)
		earlier.Expires = time.Now().Add(10 * 24 * time.Hour).UTC().Format(time.RFC3339)
		write(key.sign(t, earlier))
		refused(t, nil, "a renewal must extend it")
		write(key.sign(t, policytest.Compile(t, denyEcho, 11)))
		refused(t, nil, "a renewal must extend it")
		// A renewal that also changes a rule is a change: refused.
		tb = policytest.Compile(t, testPolicy, 11)
		tb.Expires = time.Now().Add(60 * 24 * time.Hour).UTC().Format(time.RFC3339)
		write(key.sign(t, tb))
		refused(t, nil, "must carry a newer serial")
	})
}

func TestBootRefusals(t *testing.T) {
	ctx := context.Background()
	base := func() Config {
		return Config{
			Upstreams: []Upstream{{Name: "github", Dial: newMemUpstream("github").dial}, {Name: "linear", Dial: newMemUpstream("linear").dial}},
			Log:       &memLog{},
		}
	}
	t.Run("no table", func(t *testing.T) {
		cfg := base()
		cfg.Tables = func(func(*decide.Table) error) (*decide.Table, error) { return nil, os.ErrNotExist }
		if _, err := New(ctx, cfg); err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "no table to serve") {
			t.Errorf("New without a table: %v", err)
		}
	})
	t.Run("no loader", func(t *testing.T) {
		cfg := base()
		if _, err := New(ctx, cfg); err == nil || !strings.Contains(err.Error(), "verified table") {
			t.Errorf("New without a loader: %v", err)
		}
	})
	t.Run("untrusted table", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "t.json")
		os.WriteFile(path, newSigner(t).sign(t, policytest.Compile(t, testPolicy, 1)), 0o644)
		cfg := base()
		cfg.Tables = verifiedLoader(path, []ed25519.PublicKey{newSigner(t).pub}, dir)
		if _, err := New(ctx, cfg); !errors.Is(err, decide.ErrUntrusted) {
			t.Errorf("New with a table signed by an untrusted key: %v", err)
		}
	})
	t.Run("approvals without a gate", func(t *testing.T) {
		cfg := base()
		cfg.Tables = fixed(loadTable(t, approvalPolicy, 1))
		_, err := New(ctx, cfg)
		if !errors.Is(err, ErrApprovalsWithoutGate) || !strings.Contains(err.Error(), `github "merge_pull_request" at policy.cue:`) {
			t.Errorf("New: %v", err)
		}
	})
	t.Run("approvals for a server the gateway does not serve", func(t *testing.T) {
		cfg := base()
		cfg.Upstreams = cfg.Upstreams[1:] // linear only
		cfg.Tables = fixed(loadTable(t, approvalPolicy, 1))
		g, err := New(ctx, cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		g.Close()
	})
	t.Run("bad upstream names", func(t *testing.T) {
		for _, name := range []string{"a__b", "gh_", "", "-x", "a b"} {
			cfg := base()
			cfg.Tables = fixed(loadTable(t, testPolicy, 1))
			cfg.Upstreams[0].Name = name
			if _, err := New(ctx, cfg); err == nil {
				t.Errorf("upstream name %q was accepted", name)
			}
		}
	})
	t.Run("no decision log", func(t *testing.T) {
		cfg := base()
		cfg.Tables = fixed(loadTable(t, testPolicy, 1))
		cfg.Log = nil
		if _, err := New(ctx, cfg); err == nil || !strings.Contains(err.Error(), "decision log") {
			t.Errorf("New without a decision log: %v", err)
		}
	})
}

// gate is an approval gate answering with a fixed verdict, or waiting for
// the deadline when wait is set.
type gate struct {
	verdict Verdict
	wait    bool
	held    []*HoldRequest
}

func (g *gate) Hold(ctx context.Context, req *HoldRequest) (Verdict, error) {
	g.held = append(g.held, req)
	if g.wait {
		<-ctx.Done()
		return Verdict{}, ctx.Err()
	}
	return g.verdict, nil
}

func TestApprovalHold(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gate    *gate
		wantErr string
		verdict string
	}{
		{"approved", &gate{verdict: Verdict{Approved: true}}, "", "approved"},
		{"declined", &gate{verdict: Verdict{Reason: "not on a Friday"}}, "a human denied it, saying: not on a Friday. It did not run.", "denied"},
		{"denied with a request", &gate{verdict: Verdict{RequestID: "apr-1", By: "carol", Reason: "no"}}, "(approval request apr-1) and carol denied it, saying: no.", "denied"},
		{"timeout", &gate{wait: true}, "no one decided within 1s", "timeout"},
		{"timed out by the gate", &gate{verdict: Verdict{Outcome: OutcomeTimedOut, RequestID: "apr-2", URL: "http://admin/approvals/apr-2"}}, "approval request apr-2 was not decided in time (http://admin/approvals/apr-2)", "timeout"},
		{"duplicate", &gate{verdict: Verdict{Outcome: OutcomeDuplicate, RequestID: "apr-3"}}, "identical to another call held for the same approval (approval request apr-3), which was approved once", "duplicate"},
		{"not run", &gate{verdict: Verdict{Outcome: OutcomeNotRun, RequestID: "apr-4", Reason: "the approval was revoked"}}, "was approved (approval request apr-4) but did not run: the approval was revoked.", "not_run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := startGateway(t, func(c *Config) {
				c.Tables = fixed(loadTable(t, approvalPolicy, 1))
				c.Approvals = tc.gate
			})
			cs := tg.client(t, "alice", legacyVersion, nil)
			if names := toolNames(t, cs); !strings.Contains(strings.Join(names, " "), "github__merge_pull_request") {
				t.Errorf("a tool on approval is not listed: %v", names)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: map[string]any{"b": 2, "a": "<x>"}})
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantErr == "" {
				if res.IsError || text(res) != "github merge_pull_request done" {
					t.Errorf("approved call: %q", text(res))
				}
			} else if !res.IsError || !strings.Contains(text(res), tc.wantErr) || !strings.Contains(text(res), "Do not retry it") {
				t.Errorf("got %q (isError %v), want an isError result saying %q", text(res), res.IsError, tc.wantErr)
			} else if tc.verdict != "duplicate" && !strings.Contains(text(res), "not with other arguments either, and do not try to reach the same effect another way") {
				t.Errorf("%q does not tell the agent not to route around the refusal", text(res))
			}
			if len(tc.gate.held) != 1 {
				t.Fatalf("held %d calls, want 1", len(tc.gate.held))
			}
			h := tc.gate.held[0]
			if h.Principal != "alice" || h.Server != "github" || h.Tool != "merge_pull_request" || string(h.Arguments) != `{"a":"<x>","b":2}` ||
				h.Fingerprint != Fingerprint([]byte(`{"a":"<x>","b":2}`)) || h.Timeout != time.Second || h.Channel != "page" || !strings.HasPrefix(h.Origin, "policy.cue:") {
				t.Errorf("hold request: %+v", h)
			}
			var verdicts []string
			for _, r := range tg.log.all() {
				if r.Op == OpApproval {
					verdicts = append(verdicts, r.Verdict)
				}
			}
			if len(verdicts) != 1 || verdicts[0] != tc.verdict {
				t.Errorf("logged verdicts %v, want [%s]", verdicts, tc.verdict)
			}
			wantCalls := int64(0)
			if tc.wantErr == "" {
				wantCalls = 1
			}
			if n := tg.github.Calls.Load(); n != wantCalls {
				t.Errorf("%d calls reached the upstream, want %d", n, wantCalls)
			}
		})
	}
}

func TestDecisionLogFailureRefusesEverything(t *testing.T) {
	tg := startGateway(t, nil)
	cs := tg.client(t, "alice", legacyVersion, nil)
	tg.log.mu.Lock()
	tg.log.fail = errors.New("disk full")
	tg.log.mu.Unlock()
	for _, name := range []string{"github__echo", "github__delete_repo"} {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name})
		if err == nil || !strings.Contains(err.Error(), "decision log cannot be written") {
			t.Errorf("%s with a broken decision log: %v", name, err)
		}
	}
	if _, err := cs.ListTools(context.Background(), nil); err == nil {
		t.Error("tools/list succeeded with a broken decision log")
	}
	if n := tg.github.Calls.Load(); n != 0 {
		t.Errorf("%d calls ran without being recorded", n)
	}
}

// gateFunc is an approval gate made of a function.
type gateFunc func(ctx context.Context, req *HoldRequest) (Verdict, error)

func (f gateFunc) Hold(ctx context.Context, req *HoldRequest) (Verdict, error) { return f(ctx, req) }

// A call approved while a reload denied it does not run.
func TestApprovalRecheckAfterReload(t *testing.T) {
	var current atomic.Pointer[decide.Table]
	current.Store(loadTable(t, approvalPolicy, 1))
	denied := loadTable(t, strings.Replace(approvalPolicy, `allow_list: ["echo"]`, `allow_list: ["echo"]
	deny_list: ["merge_pull_request"]`, 1), 2)
	var tg *testGateway
	var recheckErr error
	tg = startGateway(t, func(c *Config) {
		c.Tables = func(func(*decide.Table) error) (*decide.Table, error) { return current.Load(), nil }
		c.Approvals = gateFunc(func(ctx context.Context, req *HoldRequest) (Verdict, error) {
			if req.Recheck() != nil {
				t.Error("Recheck refused before the reload")
			}
			current.Store(denied)
			if err := tg.Reload(); err != nil {
				t.Errorf("Reload while held: %v", err)
			}
			recheckErr = req.Recheck()
			return Verdict{Approved: true}, nil // a gate that does not recheck
		})
	})
	cs := tg.client(t, "alice", legacyVersion, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "github__merge_pull_request"})
	if err != nil {
		t.Fatal(err)
	}
	if recheckErr == nil || !strings.Contains(recheckErr.Error(), "(serial 2) denies the call now") {
		t.Errorf("Recheck after the reload: %v", recheckErr)
	}
	if !res.IsError || !strings.Contains(text(res), "denies the call now") {
		t.Errorf("an approved call the serving table denies: %q (isError %v)", text(res), res.IsError)
	}
	if n := tg.github.Calls.Load(); n != 0 {
		t.Errorf("%d calls ran", n)
	}
}

// A held call tells a client that asked for progress that it waits, and
// the gate learns who asks.
func TestApprovalProgressAndClient(t *testing.T) {
	tg := startGateway(t, func(c *Config) {
		c.Tables = fixed(loadTable(t, approvalPolicy, 1))
		c.Approvals = gateFunc(func(ctx context.Context, req *HoldRequest) (Verdict, error) {
			if req.Client != "test-client 1" {
				t.Errorf("Client = %q", req.Client)
			}
			if req.Progress == nil {
				t.Error("no Progress for a client that sent a progress token")
				return Verdict{}, nil
			}
			req.Progress("waiting for a human (request 42)")
			req.Progress("still waiting")
			return Verdict{Approved: true}, nil
		})
	})
	progress := make(chan *mcp.ProgressNotificationParams, 10)
	cs := tg.client(t, "alice", legacyVersion, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { progress <- req.Params },
	})
	params := &mcp.CallToolParams{Name: "github__merge_pull_request"}
	params.SetProgressToken("held")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("%v %q", err, text(res))
	}
	for i, want := range []string{"waiting for a human (request 42)", "still waiting"} {
		select {
		case p := <-progress:
			if p.ProgressToken != "held" || p.Message != want || p.Progress != float64(i+1) {
				t.Errorf("progress %d: %+v", i, p)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("progress %q did not arrive", want)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	var current atomic.Pointer[decide.Table]
	current.Store(loadTable(t, testPolicy, 1))
	calls := 0
	tg := startGateway(t, func(c *Config) {
		c.Tables = func(func(*decide.Table) error) (*decide.Table, error) { return current.Load(), nil }
		c.Check = func(tb *decide.Table) error {
			calls++
			if tb.Serial() == 2 {
				return errors.New("channel \"oncall\" reaches no one")
			}
			return nil
		}
	})
	current.Store(loadTable(t, denyEcho, 2))
	err := tg.Reload()
	if !errors.Is(err, ErrCannotEnforce) || !strings.Contains(err.Error(), `table serial 2: channel "oncall" reaches no one`) {
		t.Errorf("Reload: %v", err)
	}
	if tg.Table().Serial() != 1 || calls != 2 {
		t.Errorf("serving serial %d after %d checks", tg.Table().Serial(), calls)
	}
}

// TestExpiredTable: from the instant the serving table expires, every
// request is answered as absent and every listing is empty, the decision
// log says why, clients are told their listings changed, and a renewal
// (the same table re-signed with a later expiry) serves again.
func TestExpiredTable(t *testing.T) {
	expires := time.Now().Add(time.Hour).Truncate(time.Second)
	var clock atomic.Pointer[time.Time]
	setClock := func(at time.Time) { clock.Store(&at) }
	setClock(expires.Add(-300 * time.Millisecond)) // the timer fires in 300 ms
	withExpiry := func(exp time.Time, serial uint64) *decide.Table {
		src := policytest.Compile(t, testPolicy, serial)
		src.Expires = exp.UTC().Format(time.RFC3339)
		if _, err := table.Encode(src); err != nil { // the digest covers the expiry
			t.Fatal(err)
		}
		rt, err := decide.Load(src)
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	var serving atomic.Pointer[decide.Table]
	serving.Store(withExpiry(expires, 10))
	tg := startGateway(t, func(c *Config) {
		c.Now = func() time.Time { return *clock.Load() }
		c.Tables = func(func(*decide.Table) error) (*decide.Table, error) { return serving.Load(), nil }
	})
	changed := make(chan struct{}, 10)
	cs := tg.client(t, "alice", legacyVersion, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	callErr := func(name string) error {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name})
		if err == nil && res.IsError {
			t.Fatalf("%s: tool error %s", name, text(res))
		}
		return err
	}
	if err := callErr("github__echo"); err != nil {
		t.Fatalf("before the expiry: %v", err)
	}

	setClock(expires)
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Error("clients were not told that the listings changed when the table expired")
	}
	err := callErr("github__echo")
	absentErr := callErr("github__ohce") // absent, and as long
	if err == nil || absentErr == nil || strings.Replace(err.Error(), "echo", "ohce", 1) != absentErr.Error() {
		t.Errorf("after the expiry, an allowed tool answers %v; an absent one %v", err, absentErr)
	}
	if tools, err := cs.ListTools(context.Background(), nil); err != nil || len(tools.Tools) != 0 {
		t.Errorf("after the expiry, tools/list = %v, %v; want no tools", tools, err)
	}
	found := false
	for _, r := range tg.log.all() {
		if r.Op == OpCall && r.Name == "echo" && r.Decision.Reason == decide.TableExpired {
			found = r.Decision.Effect == table.Deny
		}
	}
	if !found {
		t.Error("no deny record with the reason \"table expired\" for the call after the expiry")
	}

	serving.Store(withExpiry(expires.Add(time.Hour), 10))
	if err := tg.Reload(); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	if err := callErr("github__echo"); err != nil {
		t.Errorf("after the renewal: %v", err)
	}
}

// leavingGate holds every call until the call's context ends, and then
// answers as the approval gate does for a call that left its request
// undecided.
type leavingGate struct{ holding chan struct{} }

func (g *leavingGate) Hold(ctx context.Context, req *HoldRequest) (Verdict, error) {
	g.holding <- struct{}{}
	<-ctx.Done()
	return Verdict{Outcome: OutcomeTimedOut, RequestID: "apr-5"}, nil
}

// A held call the client cancels is logged as cancelled: no one was too
// slow to decide, the call was given up.
func TestApprovalHoldCancelledByTheClient(t *testing.T) {
	g := &leavingGate{holding: make(chan struct{}, 1)}
	tg := startGateway(t, func(c *Config) {
		c.Tables = fixed(loadTable(t, approvalPolicy, 1))
		c.Approvals = g
	})
	cs := tg.client(t, "alice", legacyVersion, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-g.holding
		cancel() // the SDK's client sends notifications/cancelled
	}()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "github__merge_pull_request", Arguments: map[string]any{}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("CallTool: %v, want context.Canceled", err)
	}
	eventually(t, 5*time.Second, "the hold's verdict to be logged", func() bool {
		for _, r := range tg.log.all() {
			if r.Op == OpApproval {
				if r.Verdict != "cancelled" || r.Request != "apr-5" {
					t.Fatalf("logged verdict %q for request %q, want cancelled for apr-5", r.Verdict, r.Request)
				}
				return true
			}
		}
		return false
	})
}
