package approval

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/policyc/policyc/runtime/gateway"
)

// TestDriftDelivery: the gate is the gateway's DriftNotifier, and a drift
// reaches each webhook signed as approval requests are, retried, its
// server's text neutralised.
func TestDriftDelivery(t *testing.T) {
	g, ch, rc := webhookGate(t, testSecret)
	rc.failFirst = 1
	n, ok := g.Approvals().(gateway.DriftNotifier)
	if !ok {
		t.Fatal("the gate's ApprovalGate is not a DriftNotifier")
	}
	d := gateway.Drift{Time: time.Now(), Server: "github", Kind: "tool", Name: "echo\x1b[2J", Mode: "enforce", Hidden: true,
		Pinned: "sha256:" + strings.Repeat("a", 64), Live: "sha256:" + strings.Repeat("b", 64),
		Difference: "description changed: \"x {+y+}\"", TableSerial: 4, TableDigest: "sha256:" + strings.Repeat("c", 64)}
	n.NotifyDrift(context.Background(), d, []string{ch.URL})
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.attempts != 2 || len(rc.bodies) != 1 || len(rc.refused) != 0 {
		t.Fatalf("attempts %d, accepted %d, refused %v", rc.attempts, len(rc.bodies), rc.refused)
	}
	var ev DriftEvent
	if err := json.Unmarshal([]byte(rc.bodies[0]), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Event != EventDrift || ev.Drift.Live != d.Live || ev.Drift.Pinned != d.Pinned || !ev.Drift.Hidden || ev.Drift.Difference != d.Difference || ev.Drift.TableSerial != 4 {
		t.Errorf("delivered %+v", ev)
	}
	if ev.Drift.Name != `echo\x1b[2J` {
		t.Errorf("name %q, want the escape neutralised", ev.Drift.Name)
	}
	h := rc.headers[1]
	if h.Get(EventHeader) != EventDrift || h.Get(DeliveryHeader) != "drift-bbbbbbbbbbbbbbbb.2" {
		t.Errorf("headers %v", h)
	}
}
