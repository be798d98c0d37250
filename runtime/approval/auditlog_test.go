package approval

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ReopenAudit opens the audit log again by its path, for rotation: what is
// audited after it goes to the new file. Once the gate is closed it
// reopens nothing, and makes no file.
func TestReopenAudit(t *testing.T) {
	dir := t.TempDir()
	g := openGate(t, dir, nil)
	ch := hold(context.Background(), g, call("alice", "delete_repo", `{}`))
	r := pendingFor(t, g, "alice", "delete_repo", 1)
	audit := filepath.Join(dir, AuditFile)
	if err := os.Rename(audit, audit+".1"); err != nil {
		t.Fatal(err)
	}
	if path, err := g.ReopenAudit(); err != nil || path != audit {
		t.Fatalf("ReopenAudit = %q, %v; want %q", path, err, audit)
	}
	mustDecide(t, g, r.ID, VerdictDeny, "")
	recv(t, ch)
	old, now := readFile(t, dir, AuditFile+".1"), readFile(t, dir, AuditFile)
	if !strings.Contains(old, `"event":"requested"`) || strings.Contains(old, `"event":"denied"`) {
		t.Errorf("the renamed audit log:\n%s\nwant the request, not its denial", old)
	}
	if !strings.Contains(now, `"event":"denied"`) || strings.Contains(now, `"event":"requested"`) {
		t.Errorf("the reopened audit log:\n%s\nwant the denial alone", now)
	}

	g.Close()
	if err := os.Rename(audit, audit+".2"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.ReopenAudit(); err == nil || !strings.Contains(err.Error(), "stopping") {
		t.Errorf("ReopenAudit of a closed gate: %v, want an error saying the gateway is stopping", err)
	}
	if _, err := os.Stat(audit); !os.IsNotExist(err) {
		t.Errorf("ReopenAudit of a closed gate made %s (%v)", audit, err)
	}
}
