//go:build !unix

package procexit

import (
	"os/exec"
	"time"
)

func ownGroup(*exec.Cmd) {}

func stopGroup(*exec.Cmd, time.Duration) {}
