package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/principal"
	"github.com/policyc/policyc/runtime/table"
)

// A record of an access token's client names the principal, its groups,
// the token's issuer and subject, each in a field of its own.
func TestAppendRecordOfReference(t *testing.T) {
	ref := principal.Ref(principal.Parts{Name: "bob", Groups: []string{"dev", "ops"}, Issuer: "https://idp.example.com", Subject: `248 "28"`})
	r := &Record{
		Time: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), Principal: ref, Server: "github",
		Kind: table.Tool, Name: "create_issue", Op: OpCall,
		Decision:    decide.Decision{Effect: table.Deny, Reason: decide.ByRule, Scope: "group:ops", Origin: "groups.cue:3"},
		TableDigest: "sha256:ab", TableSerial: 42,
	}
	want := `{"time":"2026-05-01T12:00:00Z","principal":"bob","groups":["dev","ops"],"issuer":"https://idp.example.com","subject":"248 \"28\"","server":"github","kind":"tool","name":"create_issue","op":"call","decision":"deny","reason":"rule","scope":"group:ops","origin":"groups.cue:3","table_digest":"sha256:ab","table_serial":42}` + "\n"
	got := AppendRecord(nil, r)
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	// Without groups, and without a token.
	r.Principal = principal.Ref(principal.Parts{Name: "bob", Issuer: "https://idp.example.com", Subject: "7"})
	if got := string(AppendRecord(nil, r)); !strings.Contains(got, `"principal":"bob","issuer":"https://idp.example.com","subject":"7","server"`) {
		t.Errorf("no groups: %s", got)
	}
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = AppendRecord(buf[:0], r) }); n != 0 {
		t.Errorf("AppendRecord of a reference: %v allocations", n)
	}
}
