package procexit

import (
	"os/exec"
	"testing"
)

func TestExited(t *testing.T) {
	var nilLast *Last
	if ps := nilLast.Exited(); ps != nil {
		t.Errorf("a nil Last: %v", ps)
	}
	var l Last
	if ps := l.Exited(); ps != nil {
		t.Errorf("no process yet: %v", ps)
	}
	cmd := exec.Command("sh", "-c", "exit 3")
	l.Set(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if ps := l.Exited(); ps != nil {
		t.Errorf("before the wait: %v", ps)
	}
	cmd.Wait()
	if ps := l.Exited(); ps == nil || ps.ExitCode() != 3 || ps.String() != "exit status 3" {
		t.Errorf("after exit 3: %v", ps)
	}
	killed := exec.Command("sh", "-c", "kill -9 $$")
	l.Set(killed)
	killed.Run()
	if killed.ProcessState == nil {
		t.Fatal("the process was not waited for")
	}
	if ps := l.Exited(); ps != nil {
		t.Errorf("a process ended by a signal: %v", ps)
	}
}
