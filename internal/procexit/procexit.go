// Package procexit tells how an MCP server run as a subprocess ended, so
// that an error can say "the server exited (exit status 1)" rather than
// whichever closed-pipe error the SDK met first.
//
// A Transport is the SDK's command transport with one addition: when the
// SDK closes the connection, which waits for the process, the Transport
// keeps what that wait returned. Nothing reads the process's state while
// the SDK may still be waiting for it.
//
// The process does not outlive its parent: on Linux it gets SIGKILL when
// the parent ends, however it ends (a parent-death signal, set from a
// thread that lives as long as the process); elsewhere it sees its
// standard input end then.
package procexit

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transport starts Command and speaks MCP on its standard input and
// output, as mcp.CommandTransport does.
type Transport struct {
	mcp.CommandTransport

	mu    sync.Mutex
	state *os.ProcessState
	// badOutput is the first error decoding the process's output: output
	// that is not JSON-RPC.
	badOutput error
	// proc is the started process, until the connection's Close has
	// waited for it and stopped its group; nil before and after.
	proc *os.Process
}

// New returns a Transport for cmd; terminate is how long the SDK waits for
// the process to exit, at each step of stopping it. On Unix the process
// runs in a process group of its own, and closing the connection stops
// what is left of the group once the process has ended: what it started
// does not outlive it. On Linux the process is killed when the process
// that started it ends (dieWithParent).
func New(cmd *exec.Cmd, terminate time.Duration) *Transport {
	ownGroup(cmd)
	dieWithParent(cmd)
	return &Transport{CommandTransport: mcp.CommandTransport{Command: cmd, TerminateDuration: terminate}}
}

// Connect starts the process.
func (t *Transport) Connect(ctx context.Context) (mcp.Connection, error) {
	var c mcp.Connection
	var err error
	onStarter(func() { c, err = t.CommandTransport.Connect(ctx) })
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.proc = t.Command.Process
	t.mu.Unlock()
	return &conn{Connection: c, t: t}, nil
}

// Terminate asks the process and its group to stop (SIGTERM on Unix; on
// other systems it does nothing), and Kill ends them (SIGKILL). Either is
// for a parent that is stopping and cannot wait the whole TerminateDuration
// the connection's Close gives; Close still waits for the process. Neither
// does anything before Connect or once Close has returned.
func (t *Transport) Terminate() { t.signal(false) }

// Kill: see Terminate.
func (t *Transport) Kill() { t.signal(true) }

func (t *Transport) signal(kill bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.proc != nil {
		signalGroup(t.proc, t.Command, kill)
	}
}

// conn is the SDK's connection, whose Close reports to its Transport.
type conn struct {
	mcp.Connection
	t       *Transport
	stopped sync.Once // the group is stopped once: its id may be reused after
}

// Read notes an error decoding the process's output (BadOutput): the SDK
// may report the session's end rather than this error, depending on which
// it meets first.
func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err != nil && notJSONRPC(err) {
		c.t.mu.Lock()
		if c.t.badOutput == nil {
			c.t.badOutput = err
		}
		c.t.mu.Unlock()
	}
	return m, err
}

// BadOutput returns the first error decoding the process's output (it
// wrote something that is not JSON-RPC), or nil. A nil Transport has none.
func (t *Transport) BadOutput() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.badOutput
}

func (c *conn) Close() error {
	err := c.Connection.Close()
	c.stopped.Do(func() {
		stopGroup(c.t.Command, c.t.TerminateDuration)
		c.t.mu.Lock()
		c.t.proc = nil // its id, and its group's, may be reused from now on
		c.t.mu.Unlock()
	})
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

// notJSONRPC reports whether err, from reading a connection, means the
// other end wrote something that is not JSON-RPC: bytes that are not JSON,
// or JSON that is not a JSON-RPC message (the MCP Go SDK v1.8.0 says
// "invalid message version tag"). A pipe closing as the process exits is
// not this, whatever error it surfaces as.
func notJSONRPC(err error) bool {
	var syntax *json.SyntaxError
	return errors.As(err, &syntax) || strings.Contains(err.Error(), "invalid message version tag")
}
