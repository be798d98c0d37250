package procexit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// closeAfterStart connects t, then closes the connection as the SDK does
// when a session ends.
func closeAfterStart(t *testing.T, tr *Transport) {
	t.Helper()
	c, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ps := tr.Exited(); ps != nil {
		t.Errorf("before Close: %v", ps)
	}
	c.Close()
}

func TestExited(t *testing.T) {
	var none *Transport
	if ps := none.Exited(); ps != nil {
		t.Errorf("a nil Transport: %v", ps)
	}
	// A server that ends by itself is waited for as long as it takes to
	// start and exit: with a short wait, one that the machine was slow to
	// run would get SIGTERM and end by a signal instead. The server that
	// ignores its input and SIGTERM is the one the short wait is for.
	const exits, stopped = 30 * time.Second, 100 * time.Millisecond
	for _, tc := range []struct {
		name, script string
		terminate    time.Duration
		want         string // "" for nil
	}{
		{"exit 3", "exit 3", exits, "exit status 3"},
		// The SDK closes standard input first: a server that then exits
		// cleanly has exited by itself.
		{"exit 0 at the end of its input", "cat >/dev/null; exit 0", exits, "exit status 0"},
		{"killed by a signal", "kill -9 $$", exits, ""},
		// Ignores the closed input and SIGTERM: the SDK kills it.
		{"stopped by the SDK", "trap '' TERM; while :; do sleep 0.05; done", stopped, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(exec.Command("sh", "-c", tc.script), tc.terminate)
			closeAfterStart(t, tr)
			got := ""
			if ps := tr.Exited(); ps != nil {
				got = ps.String()
			}
			if got != tc.want {
				t.Errorf("Exited() = %q, want %q", got, tc.want)
			}
		})
	}
}

// A process whose child keeps its standard error open has exited, but
// Wait is still copying that stream when the SDK stops waiting: the child
// lives until Close stops the process group. The state is then unknown,
// and reading it must not race with Wait (run with -race).
func TestExitedChildHoldsStderr(t *testing.T) {
	cmd := exec.Command("sh", "-c", "(exec sleep 300 >/dev/null </dev/null &); exit 1")
	stderr := &copyWatch{done: make(chan struct{})}
	cmd.Stderr = stderr
	tr := New(cmd, 100*time.Millisecond)
	closeAfterStart(t, tr)
	if ps := tr.Exited(); ps != nil {
		t.Errorf("Exited() = %v while Wait was still copying standard error, want nil", ps)
	}
	// Close stopped the group, so the copy ends; Wait returns once it has.
	select {
	case <-stderr.done:
	case <-time.After(time.Minute):
		t.Fatal("os/exec still copying standard error a minute after Close: the child outlived the stop of its process group (or exec no longer copies through ReadFrom)")
	}
}

// copyWatch is a standard error that says when os/exec has finished
// copying the process's stream into it: exec copies with io.Copy, which
// hands the stream to ReadFrom.
type copyWatch struct {
	bytes.Buffer
	done chan struct{}
	once sync.Once
}

func (w *copyWatch) ReadFrom(r io.Reader) (int64, error) {
	defer w.once.Do(func() { close(w.done) })
	return w.Buffer.ReadFrom(r)
}

func TestConnectionEnded(t *testing.T) {
	for _, err := range []error{
		io.EOF,
		fmt.Errorf("calling %q: %w", "initialize", io.EOF),
		fmt.Errorf("calling %q: %w", "initialize", io.ErrUnexpectedEOF),
		fmt.Errorf("calling %q: %w", "initialize", &fs.PathError{Op: "write", Path: "|1", Err: syscall.EPIPE}),
		fmt.Errorf("%w: calling %q: client is closing: EOF", mcp.ErrConnectionClosed, "initialize"),
	} {
		if !ConnectionEnded(err) {
			t.Errorf("ConnectionEnded(%v) = false", err)
		}
	}
	for _, err := range []error{
		errors.New(`calling "initialize": no API token configured`),
		fmt.Errorf(`unsupported protocol version: %q`, "1999-01-01"),
		context.Canceled,
	} {
		if ConnectionEnded(err) {
			t.Errorf("ConnectionEnded(%v) = true", err)
		}
	}
}

func TestNotStarted(t *testing.T) {
	missing := exec.Command("/nonexistent/policyc-test-program")
	if err := missing.Start(); !NotStarted(fmt.Errorf("connect: %w", err)) {
		t.Errorf("a program that does not exist: %v", err)
	}
	if _, err := exec.LookPath("policyc-no-such-program"); !NotStarted(err) {
		t.Errorf("a program not on PATH: %v", err)
	}
	if NotStarted(&fs.PathError{Op: "write", Path: "|1", Err: syscall.EPIPE}) {
		t.Error("a write to a program that exited was taken for one that could not start")
	}
}

// BadOutput is output that is not JSON-RPC, and only that: a server that
// exits, however its pipe's closing surfaces, wrote nothing wrong.
func TestBadOutput(t *testing.T) {
	for _, tc := range []struct {
		script string
		bad    bool
	}{
		{"echo 'this is not JSON-RPC'; exec sleep 30", true},
		{`echo '{"jsonrpc":"1.0","id":1,"result":{}}'; exec sleep 30`, true},
		{"echo 'no API token set' >&2; exit 1", false},
		{"exit 0", false},
	} {
		tr := New(exec.Command("sh", "-c", tc.script), 100*time.Millisecond)
		c, err := tr.Connect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(context.Background()); err == nil {
			t.Errorf("%s: read a message", tc.script)
		}
		if got := tr.BadOutput() != nil; got != tc.bad {
			t.Errorf("%s: BadOutput() = %v, want set: %v", tc.script, tr.BadOutput(), tc.bad)
		}
		c.Close()
	}
}
