//go:build !unix

package procexit

import (
	"os"
	"os/exec"
	"time"
)

func ownGroup(*exec.Cmd) {}

func stopGroup(*exec.Cmd, time.Duration) {}

// signalGroup kills p when kill is set; there is no SIGTERM to send here.
func signalGroup(p *os.Process, _ *exec.Cmd, kill bool) {
	if kill {
		p.Kill()
	}
}
