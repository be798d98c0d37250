package table_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/table"
)

// TestDecodeErrorWords pins how bytes that are not a table are refused:
// where the JSON breaks or which field is wrong, never the decoder's Go
// type names or a copy of the input.
func TestDecodeErrorWords(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"not json", "garbage\n", "not a decision table: not JSON: invalid character 'g' looking for beginning of value at line 1, column 1"},
		{"yaml", "# a comment\nkey: value\n", "not a decision table: not JSON: invalid character '#' looking for beginning of value at line 1, column 1"},
		{"bad value", "{\n  \"format\": x\n}\n", "not a decision table: not JSON: invalid character 'x' looking for beginning of value at line 2, column 13"},
		{"empty", "", "not a decision table: the file is empty"},
		{"truncated", "{\n  \"format\": \"policyc.table/v1\",\n", "not a decision table: the JSON ends early, at line 3, column 1 (a truncated file?)"},
		{"array", "[]\n", "not a decision table: the file holds a JSON array where the table has an object"},
		{"wrong field type", `{"format": "policyc.table/v1", "serial": "7"}`, `not a decision table: field "serial" holds a JSON string where the table has an integer of 0 or more`},
		{"negative serial", `{"format": "policyc.table/v1", "serial": -1}`, `not a decision table: field "serial" holds a JSON number -1 where the table has an integer of 0 or more`},
		{"unknown field", `{"format": "policyc.table/v1", "bogus": 1}`, `not a decision table: unknown field "bogus"`},
	}
	for _, c := range cases {
		_, err := table.Decode([]byte(c.in))
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if got := err.Error(); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || strings.Contains(msg, "Go value") || strings.Contains(msg, "table.Table") {
			t.Errorf("%s: internal words or input in %q", c.name, msg)
		}
	}
}

// A table an editor or git re-saved says how: a byte order mark in front,
// or CRLF line endings (git's core.autocrlf), which break the canonical
// form the digest and signatures cover.
func TestDecodeResavedTable(t *testing.T) {
	files, err := compiler.ReadDir("../../examples/team")
	if err != nil {
		t.Fatal(err)
	}
	res := compiler.Compile(compiler.Input{Files: files, Source: table.Source{PolicyPath: "examples/team"}})
	good, err := table.Encode(res.Table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Decode(good); err != nil {
		t.Fatalf("the table as written: %v", err)
	}
	if _, err := table.Decode(append([]byte("\xef\xbb\xbf"), good...)); err == nil || !strings.Contains(err.Error(), "byte order mark (U+FEFF)") {
		t.Errorf("with a byte order mark: %v", err)
	}
	crlf := bytes.ReplaceAll(good, []byte("\n"), []byte("\r\n"))
	if _, err := table.Decode(crlf); !errors.Is(err, table.ErrNotCanonical) || !strings.Contains(err.Error(), "CRLF") {
		t.Errorf("with CRLF line endings: %v", err)
	}
}
