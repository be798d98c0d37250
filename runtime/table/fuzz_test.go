package table_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/table"
)

// FuzzDecodeTable feeds arbitrary bytes to the table decoder. Invariants:
// it never panics; bytes it accepts re-encode to exactly the same bytes (so
// what was verified is what runs); the runtime either loads an accepted
// table or refuses it with an error, never a panic.
func FuzzDecodeTable(f *testing.F) {
	files, err := compiler.ReadDir("../../examples/team")
	if err != nil {
		f.Fatal(err)
	}
	res := compiler.Compile(compiler.Input{Files: files, Source: table.Source{PolicyPath: "examples/team"}})
	if res.Table == nil {
		f.Fatal("example does not compile")
	}
	good, err := table.Encode(res.Table)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"format":"policyc.table/v1"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tab, err := table.Decode(b)
		if err != nil {
			return
		}
		re, err := table.Encode(tab)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(re, b) {
			t.Fatalf("accepted bytes do not re-encode to themselves:\n%s\n---\n%s", b, re)
		}
		rt, err := decide.Load(tab)
		if err != nil {
			return
		}
		for name := range tab.Servers {
			rt.Decide("", name, table.Tool, "x")
		}
	})
}

// TestDecodeRefuses pins the refusals of the decoder: unknown format, not
// canonical, digest mismatch, unknown fields.
func TestDecodeRefuses(t *testing.T) {
	res := compiler.Compile(compiler.Input{Files: []compiler.File{{Name: "p.cue", Data: []byte("package policy\nmcp_servers: a: access: tool: allow_list: [\"x\"]\n")}}})
	good, err := table.Encode(res.Table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Decode(good); err != nil {
		t.Fatalf("good table refused: %v", err)
	}
	cases := map[string][]byte{
		"unknown format": bytes.Replace(good, []byte(`"policyc.table/v1"`), []byte(`"policyc.table/v9"`), 1),
		"not canonical":  append([]byte(" "), good...),
		"trailing data":  append(append([]byte(nil), good...), []byte("{}")...),
		"duplicate key":  bytes.Replace(good, []byte(`"serial": 0,`), []byte(`"serial": 0, "serial": 0,`), 1),
		"digest":         bytes.Replace(good, []byte(`"pattern": "x"`), []byte(`"pattern": "y"`), 1),
		"unknown field":  bytes.Replace(good, []byte(`"serial": 0,`), []byte(`"serial": 0, "extra": 1,`), 1),
		"bad effect":     bytes.Replace(good, []byte(`"effect": "allow"`), []byte(`"effect": "maybe"`), 1),
		"not json":       []byte("not json"),
	}
	for name, b := range cases {
		if bytes.Equal(b, good) {
			t.Fatalf("%s: the mutation did not apply", name)
		}
		if _, err := table.Decode(b); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	// Data after the table is refused as such, before any proof.
	if _, _, err := table.DecodeDeferred(cases["trailing data"]); err == nil || !strings.Contains(err.Error(), "data after the table") {
		t.Errorf("trailing data: DecodeDeferred said %v; want data after the table", err)
	}
	// A table of another format is named as such, whether or not it
	// decodes as this one.
	otherShape := bytes.Replace(cases["unknown format"], []byte(`"serial": 0,`), []byte(`"serial": 0, "extra": 1,`), 1)
	for name, b := range map[string][]byte{"unknown format": cases["unknown format"], "unknown format, other fields": otherShape} {
		var fe *table.FormatError
		if _, err := table.Decode(b); !errors.As(err, &fe) || fe.Found != "policyc.table/v9" {
			t.Errorf("%s: want *FormatError, got %v", name, err)
		}
	}
	// A signed envelope is named as such.
	env := []byte(`{"payloadType": "application/vnd.policyc.table.v1+json", "payload": "e30=", "signatures": []}`)
	var fe *table.FormatError
	if _, err := table.Decode(env); !errors.As(err, &fe) || !fe.Envelope || !strings.Contains(err.Error(), "a signed envelope") {
		t.Errorf("an envelope: want a *FormatError naming it, got %v", err)
	}
}
