//go:build unix

package procexit

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// ownGroup starts cmd in a process group of its own: what it starts in
// turn can then be stopped with it, and a terminal's Ctrl-C reaches only
// the command that runs it, which stops it in order.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// stopGroup stops what is left of the process group of cmd, whose leader
// has been waited for: SIGTERM, then, if any of it is still there after
// terminate, SIGKILL.
func stopGroup(cmd *exec.Cmd, terminate time.Duration) {
	if cmd.Process == nil || cmd.SysProcAttr == nil || !cmd.SysProcAttr.Setpgid {
		return
	}
	pgid := cmd.Process.Pid
	if syscall.Kill(-pgid, syscall.SIGTERM) != nil {
		return // no process is left in it
	}
	deadline := time.Now().Add(terminate)
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if syscall.Kill(-pgid, 0) != nil {
			return
		}
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
}

// signalGroup sends SIGTERM, or SIGKILL when kill is set, to the process
// group of p, which cmd started in a group of its own, or to p alone when
// it has none.
func signalGroup(p *os.Process, cmd *exec.Cmd, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	if cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
		syscall.Kill(-p.Pid, sig)
		return
	}
	p.Signal(sig)
}
