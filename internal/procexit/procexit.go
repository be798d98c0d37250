// Package procexit tells how an MCP server run as a subprocess ended, so
// that an error can say "the server exited (exit status 1)" rather than
// whichever closed-pipe error the SDK met first.
//
// The SDK's command transport starts the process and, when its connection
// closes, waits for it. A Last remembers the process a dialer started; once
// the SDK call that closed the connection has returned, that wait is over
// and Exited can read how the process ended.
package procexit

import (
	"os"
	"os/exec"
	"sync"
)

// Last is the process a dialer most recently started. The zero value is
// ready to use.
type Last struct {
	mu  sync.Mutex
	cmd *exec.Cmd
}

// Set records cmd as the last process started.
func (l *Last) Set(cmd *exec.Cmd) {
	l.mu.Lock()
	l.cmd = cmd
	l.mu.Unlock()
}

// Exited returns how the last process ended when it exited by itself, and
// nil when it has not been waited for, or was ended by a signal (which is
// how the SDK stops a server that does not exit when asked). Call it only
// after the SDK call that closed the process's connection has returned:
// before that, the SDK may still be waiting for the process. A nil Last
// has no process.
func (l *Last) Exited() *os.ProcessState {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cmd == nil || l.cmd.ProcessState == nil || !l.cmd.ProcessState.Exited() {
		return nil
	}
	return l.cmd.ProcessState
}
