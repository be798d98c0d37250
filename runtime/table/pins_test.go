package table

import (
	"strings"
	"testing"
)

// TestCheckPinsAudit: a pins mode is one of three, and pins and audit
// belong to a server's base scope only.
func TestCheckPinsAudit(t *testing.T) {
	access := func() *Access { return &Access{Default: "deny", Rules: []Rule{}} }
	base := func(s Server) *Table {
		s.Tool, s.Prompt, s.Resource = access(), access(), access()
		return &Table{Format: Format, Servers: map[string]Server{"github": s}, Scopes: []Scope{}, Channels: map[string]Channel{}}
	}
	for _, mode := range []string{"", PinsEnforce, PinsWarn, PinsOff} {
		if err := base(Server{Pins: mode, Audit: true}).Check(); err != nil {
			t.Errorf("pins %q: %v", mode, err)
		}
	}
	if err := base(Server{Pins: "strict"}).Check(); err == nil || !strings.Contains(err.Error(), `pins "strict" is not enforce, warn or off`) {
		t.Errorf("pins strict: %v", err)
	}
	tb := base(Server{})
	tb.Scopes = []Scope{{Name: "global", Servers: map[string]Server{"github": {Audit: true}}}}
	if err := tb.Check(); err == nil || !strings.Contains(err.Error(), "pins or audit outside the base scope") {
		t.Errorf("audit in a narrowing scope: %v", err)
	}
	// Decode refuses what Check refuses.
	tb = base(Server{Pins: "strict"})
	tb.Servers["github"] = Server{Pins: "strict", Tool: access(), Prompt: access(), Resource: access()}
	b, err := Encode(tb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(b); err == nil {
		t.Error("a table with pins strict decodes")
	}
}
