//go:build linux

package procexit

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// dieWithParent makes Linux send SIGKILL to cmd's process when the thread
// that started it ends: a gateway killed with SIGKILL takes its upstreams
// with it, and their credentials do not outlive it. SIGKILL rather than
// SIGTERM, because an upstream that ignores SIGTERM is what this is for.
// It reaches the process itself, not what that process started: those see
// their standard input end, as the pipe's writer is gone.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// starter runs the functions sent to it on one OS thread that it keeps
// locked, and that lives as long as the process. The parent-death signal
// fires when the thread that started the child ends, not the process, and
// Go ends a thread whose locked goroutine returns: a child started from any
// other thread could be killed while the gateway runs.
var starter = sync.OnceValue(func() chan<- func() {
	ch := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: the thread must not end
		for f := range ch {
			f()
		}
	}()
	return ch
})

// onStarter runs f on the starter's thread and returns when it has.
func onStarter(f func()) {
	done := make(chan struct{})
	starter() <- func() {
		defer close(done)
		f()
	}
	<-done
}
