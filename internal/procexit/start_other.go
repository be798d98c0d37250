//go:build !linux

package procexit

import "os/exec"

// dieWithParent does nothing here: only Linux has a parent-death signal.
// Elsewhere an upstream outlives a gateway killed with SIGKILL unless it
// exits when its standard input ends, which it sees then (the pipe's
// writer is gone): most MCP servers over stdio do. A gateway that exits by
// itself stops its upstreams' process groups first (Transport.Kill).
func dieWithParent(*exec.Cmd) {}

// onStarter runs f: with no parent-death signal, the thread that starts a
// process does not matter.
func onStarter(f func()) { f() }
