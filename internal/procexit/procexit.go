// Package procexit tells how an MCP server run as a subprocess ended, so
// that an error can say "the server exited (exit status 1)" rather than
// whichever closed-pipe error the SDK met first.
//
// A Transport is the SDK's command transport with one addition: when the
// SDK closes the connection, which waits for the process, the Transport
// keeps what that wait returned. Nothing reads the process's state while
// the SDK may still be waiting for it.
package procexit

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transport starts Command and speaks MCP on its standard input and
// output, as mcp.CommandTransport does.
type Transport struct {
	mcp.CommandTransport

	mu    sync.Mutex
	state *os.ProcessState
}

// New returns a Transport for cmd; terminate is how long the SDK waits for
// the process to exit, at each step of stopping it. On Unix the process
// runs in a process group of its own, and closing the connection stops
// what is left of the group once the process has ended: what it started
// does not outlive it.
func New(cmd *exec.Cmd, terminate time.Duration) *Transport {
	ownGroup(cmd)
	return &Transport{CommandTransport: mcp.CommandTransport{Command: cmd, TerminateDuration: terminate}}
}

// Connect starts the process.
func (t *Transport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.CommandTransport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &conn{Connection: c, t: t}, nil
}

// conn is the SDK's connection, whose Close reports to its Transport.
type conn struct {
	mcp.Connection
	t       *Transport
	stopped sync.Once // the group is stopped once: its id may be reused after
}

func (c *conn) Close() error {
	err := c.Connection.Close()
	c.stopped.Do(func() { stopGroup(c.t.Command, c.t.TerminateDuration) })
	// The SDK's Close returns what waiting for the process returned: nil
	// for an exit with status 0, an *exec.ExitError for any other end, or
	// its own error when it gave up waiting.
	var ps *os.ProcessState
	var ee *exec.ExitError
	switch {
	case err == nil:
		ps = c.t.Command.ProcessState
	case errors.As(err, &ee):
		ps = ee.ProcessState
	}
	c.t.mu.Lock()
	if ps != nil {
		c.t.state = ps
	}
	c.t.mu.Unlock()
	return err
}

// Exited returns how the process ended when it exited by itself, once the
// connection has been closed. It returns nil before that, when the SDK gave
// up waiting, and when the process was ended by a signal (which is how the
// SDK stops a server that does not exit when asked). A nil Transport has no
// process.
func (t *Transport) Exited() *os.ProcessState {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state == nil || !t.state.Exited() {
		return nil
	}
	return t.state
}

// NotStarted reports whether err means the program could not be run at
// all (not found, not executable): exec's errors, or a PathError from
// "fork/exec". Writing to a program that already exited is a PathError too
// ("write"), and is not this.
func NotStarted(err error) bool {
	var ee *exec.Error
	var pe *fs.PathError
	return errors.As(err, &ee) || errors.As(err, &pe) && strings.HasSuffix(pe.Op, "exec")
}

// ConnectionEnded reports whether err means that the other end of the
// connection went away: an end of file, a write to a closed pipe, or the
// SDK's closed connection. An error the server answered with, or output it
// wrote that is not JSON-RPC, is not such an error.
func ConnectionEnded(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, mcp.ErrConnectionClosed)
}
