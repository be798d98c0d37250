package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callText calls a tool and returns its text and whether it is an error;
// a protocol error fails the test.
func callText(t *testing.T, cs *mcp.ClientSession, name string) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	return text(res), res.IsError
}

func TestHangingUpstreamTimesOut(t *testing.T) {
	tg := startGateway(t, func(c *Config) { c.CallTimeout = 300 * time.Millisecond })
	cs := tg.client(t, "alice", legacyVersion, nil)
	start := time.Now()
	msg, isErr := callText(t, cs, "github__hang")
	if !isErr || !strings.Contains(msg, `upstream "github" did not answer tools/call within 300ms`) {
		t.Errorf("hang: got %q (isError %v)", msg, isErr)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the timeout took %s", d)
	}
	// The hung call takes nothing else down.
	for _, name := range []string{"github__echo", "linear__echo"} {
		if msg, isErr := callText(t, cs, name); isErr {
			t.Errorf("%s after a hang: %q", name, msg)
		}
	}
}

func TestCrashedUpstreamIsRestarted(t *testing.T) {
	tg := startGateway(t, nil)
	cs := tg.client(t, "alice", legacyVersion, nil)
	tg.github.kill()
	eventually(t, 5*time.Second, "github to be seen down", func() bool {
		up, _ := tg.Upstream("github")
		tg.github.mu.Lock()
		defer tg.github.mu.Unlock()
		return !up || len(tg.github.sessions) > 1
	})
	// While it is down (or as soon as it is back) nothing else suffers.
	if msg, isErr := callText(t, cs, "linear__echo"); isErr {
		t.Errorf("linear__echo while github is down: %q", msg)
	}
	eventually(t, 5*time.Second, "github to be restarted", func() bool {
		up, _ := tg.Upstream("github")
		tg.github.mu.Lock()
		defer tg.github.mu.Unlock()
		return up && len(tg.github.sessions) >= 2
	})
	if msg, isErr := callText(t, cs, "github__echo"); isErr {
		t.Errorf("github__echo after the restart: %q", msg)
	}
}

// subprocessGateway runs github as a real subprocess (the built test
// upstream) and linear in process.
func subprocessGateway(t *testing.T, args ...string) *testGateway {
	t.Helper()
	bin, err := upstreamBinary()
	if err != nil {
		t.Fatal(err)
	}
	oplog := &syncBuffer{}
	tg := startGateway(t, func(c *Config) {
		c.Upstreams[0] = Upstream{Name: "github", Command: bin, Args: append([]string{"-name", "github"}, args...), Env: BaseEnv()}
		c.CallTimeout = time.Second
		c.TerminateTimeout = 500 * time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(oplog, nil))
	})
	tg.oplog = oplog
	return tg
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestSubprocessUpstream(t *testing.T) {
	tg := subprocessGateway(t)
	cs := tg.client(t, "alice", legacyVersion, nil)
	if names := toolNames(t, cs); !slices.Contains(names, "github__echo") || slices.Contains(names, "github__delete_repo") {
		t.Fatalf("subprocess tools are not listed as the table says: %v", names)
	}
	pid, isErr := callText(t, cs, "github__pid")
	if isErr || pid == "" || pid == strconvItoa(os.Getpid()) {
		t.Fatalf("github__pid: %q %v", pid, isErr)
	}
	t.Run("hang", func(t *testing.T) {
		msg, isErr := callText(t, cs, "github__hang")
		if !isErr || !strings.Contains(msg, "did not answer tools/call within 1s") {
			t.Errorf("hang: %q", msg)
		}
		if msg, isErr := callText(t, cs, "github__echo"); isErr {
			t.Errorf("echo after a hang: %q", msg)
		}
	})

	t.Run("crash", func(t *testing.T) {
		msg, isErr := callText(t, cs, "github__crash")
		if !isErr || !strings.Contains(msg, `upstream "github"`) {
			t.Errorf("crash: %q (isError %v)", msg, isErr)
		}
		if msg, isErr := callText(t, cs, "linear__echo"); isErr {
			t.Errorf("linear__echo after github crashed: %q", msg)
		}
		// Until it is back, a call says why. The supervisor restarts it
		// within MinBackoff, so whether it is still down is told by the
		// call itself, not by a look before it (it may be back by the
		// time the call is made): a call that fails says the upstream is
		// unavailable, and one that runs reached the restarted process.
		if msg, isErr := callText(t, cs, "github__pid"); isErr && !strings.Contains(msg, `upstream "github" is unavailable`) {
			t.Errorf("pid while github is down: %q", msg)
		} else if !isErr && msg == pid {
			t.Errorf("a call after the crash reached the crashed process %s", pid)
		}
		var newPID string
		eventually(t, 10*time.Second, "github to be restarted after the crash", func() bool {
			var isErr bool
			newPID, isErr = callText(t, cs, "github__pid")
			return !isErr
		})
		if newPID == pid {
			t.Errorf("after the restart the pid is still %s", pid)
		}
		// The operator's log says how the process ended.
		if log := tg.oplog.String(); !strings.Contains(log, `reason="it exited (exit status 3)"`) {
			t.Errorf("the gateway's log does not say the upstream exited with status 3:\n%s", log)
		}
		pid = newPID
	})

	t.Run("malformed output", func(t *testing.T) {
		// The call in flight is told what a call cut off by a crash is
		// told: the connection closed, and the call may have run.
		msg, isErr := callText(t, cs, "github__garbage")
		if want := `upstream "github" closed its connection during tools/call (it is restarted with backoff); the call may or may not have taken effect`; !isErr || msg != want {
			t.Errorf("garbage: %q (isError %v), want %q", msg, isErr, want)
		}
		if msg, isErr := callText(t, cs, "linear__echo"); isErr {
			t.Errorf("linear__echo after github wrote garbage: %q", msg)
		}
		eventually(t, 10*time.Second, "github to be restarted after malformed output", func() bool {
			_, isErr := callText(t, cs, "github__echo")
			return !isErr
		})
	})
}

func TestUpstreamThatNeverStarts(t *testing.T) {
	tg := subprocessGateway(t, "-exit-at-start")
	up, why := tg.Upstream("github")
	if up || why == nil || !strings.Contains(why.Error(), "initialize: the server exited (exit status 2) before it answered") {
		t.Errorf("github: up %v, reason %v", up, why)
	}
	cs := tg.client(t, "alice", legacyVersion, nil)
	if names := toolNames(t, cs); !slices.Equal(names, []string{"linear__crash", "linear__echo", "linear__pid"}) {
		t.Errorf("tools: %v", names)
	}
	if msg, isErr := callText(t, cs, "linear__echo"); isErr {
		t.Errorf("linear__echo: %q", msg)
	}
}

// However the SDK words a connection that ended (a closed session, an
// EOF, a write to a stdio upstream that has exited), the caller is told
// the connection closed and the upstream is marked down at once.
func TestCallErrorConnectionEnded(t *testing.T) {
	tg := startGateway(t, nil)
	u := tg.byName["github"]
	for _, err := range []error{
		fmt.Errorf("calling %q: %w", "tools/call", mcp.ErrConnectionClosed),
		fmt.Errorf("calling %q: %w", "tools/call", io.EOF),
		fmt.Errorf("calling %q: %w", "tools/call", &fs.PathError{Op: "write", Path: "|1", Err: syscall.EPIPE}),
	} {
		st := u.snapshot()
		got := u.callError(context.Background(), st, "tools/call", err).Error()
		if want := `upstream "github" closed its connection during tools/call`; !strings.Contains(got, want) {
			t.Errorf("%v: %q, want %q", err, got, want)
		}
		if down := u.snapshot(); down.session != nil || down.down == nil {
			t.Errorf("%v: the upstream is not marked down", err)
		}
		u.state.Store(st)
	}
	other := errors.New("boom")
	if got := u.callError(context.Background(), u.snapshot(), "tools/call", other).Error(); got != `upstream "github" failed tools/call: boom` {
		t.Errorf("another error: %q", got)
	}
}
