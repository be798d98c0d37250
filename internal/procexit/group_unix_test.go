//go:build unix

package procexit

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// gone reports whether process pid has ended: it is not there, or it is a
// zombie no one has reaped yet.
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && strings.HasPrefix(string(b[i+1:]), " Z")
}

// A server that starts a process of its own, which ignores SIGTERM and does
// not read its input, does not leave it running once the connection is
// closed.
func TestCloseStopsWhatTheServerStarted(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command("sh", "-c", `trap '' TERM; sleep 300 & echo $! > `+pidFile+`; cat >/dev/null; wait`)
	tr := New(cmd, 200*time.Millisecond)
	c, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for range 200 {
		if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatal("the server did not start its process")
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d, started by the server, is still running after Close", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
