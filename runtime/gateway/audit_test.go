package gateway

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// auditPolicy is testPolicy's github in audit mode.
const auditPolicy = `package policy

defaults: {tool: "deny", prompt: "deny", resource: "deny"}

mcp_servers: github: {
	access: tool: {
		allow_list: ["echo"]
		deny_list: ["delete_repo"]
	}
	audit: true
}

mcp_servers: linear: access: tool: allow_list: ["echo"]
`

// TestAuditMode: a server in audit mode lists and serves what its rules
// deny, and the decision log says would_deny beside the table's deny; a
// server beside it is enforced as ever.
func TestAuditMode(t *testing.T) {
	oplog := &syncBuffer{}
	tg := startGateway(t, func(c *Config) {
		c.Tables = fixed(loadTable(t, auditPolicy, 7))
		c.Logger = slog.New(slog.NewTextHandler(oplog, nil))
	})
	if got := tg.Audited(); len(got) != 1 || got[0] != "github" {
		t.Fatalf("Audited() = %v", got)
	}
	cs := tg.client(t, "alice", legacyVersion, nil)
	ctx := context.Background()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, tl := range res.Tools {
		listed[tl.Name] = true
	}
	if !listed["github__delete_repo"] || !listed["github__create_issue"] || listed["linear__create_issue"] || !listed["linear__echo"] {
		t.Errorf("listing in audit mode: %v", listed)
	}
	call, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "github__delete_repo", Arguments: map[string]any{}})
	if err != nil || call.IsError {
		t.Fatalf("a denied tool of an audited server: %v %v", err, call)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "linear__create_issue", Arguments: map[string]any{}}); err == nil {
		t.Error("a denied tool of a server not in audit mode was served")
	}
	var found bool
	for _, r := range tg.log.all() {
		if r.Op == OpCall && r.Server == "github" && r.Name == "delete_repo" {
			found = true
			if r.Decision.Effect != table.Deny || r.Verdict != VerdictWouldDeny || r.TableSerial != 7 {
				t.Errorf("record %+v", r)
			}
		}
		if r.Server == "linear" && r.Verdict != "" {
			t.Errorf("a record of a server not in audit mode has verdict %q", r.Verdict)
		}
		if r.Server == "github" && r.Name == "echo" && r.Verdict != "" {
			t.Errorf("an allowed item has verdict %q", r.Verdict)
		}
	}
	if !found {
		t.Error("no record of the audited call")
	}
	if !strings.Contains(oplog.String(), "server in audit mode") {
		t.Errorf("the gateway's log does not say github is in audit mode:\n%s", oplog)
	}
}

// TestAuditModeSerialZero: a table of serial 0 that sets audit is refused
// by Check and New, with the reason.
func TestAuditModeSerialZero(t *testing.T) {
	rt := loadTable(t, auditPolicy, 0)
	_, err := Check(Config{Upstreams: []Upstream{{Name: "github", Command: "true"}}, Tables: fixed(rt), Log: &memLog{}})
	if !errors.Is(err, ErrAuditUnserialed) || !strings.Contains(err.Error(), "servers github are in audit mode") {
		t.Fatalf("Check: %v", err)
	}
	g, err := New(context.Background(), Config{Upstreams: []Upstream{{Name: "github", Dial: newMemUpstream("github").dial}}, Tables: fixed(rt), Log: &memLog{}})
	if !errors.Is(err, ErrAuditUnserialed) {
		if g != nil {
			g.Close()
		}
		t.Fatalf("New: %v", err)
	}
}

func TestAuditDecision(t *testing.T) {
	rt := loadTable(t, auditPolicy, 3)
	for _, c := range []struct {
		d       decide.Decision
		effect  table.Effect
		verdict string
	}{
		{decide.Decision{Effect: table.Allow}, table.Allow, ""},
		{decide.Decision{Effect: table.Deny, Reason: decide.ByRule}, table.Allow, VerdictWouldDeny},
		{decide.Decision{Effect: table.Approve, Reason: decide.ByRule}, table.Allow, VerdictWouldHold},
		{decide.Decision{Effect: table.Deny, Reason: decide.TableExpired}, table.Deny, ""},
	} {
		served, verdict := audit(rt, "github", c.d)
		if served.Effect != c.effect || verdict != c.verdict {
			t.Errorf("audit(%v) = %v %q, want %v %q", c.d, served.Effect, verdict, c.effect, c.verdict)
		}
		if served, verdict := audit(rt, "linear", c.d); served != c.d || verdict != "" {
			t.Errorf("linear, not in audit mode: %v %q", served, verdict)
		}
	}
}
