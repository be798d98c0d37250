package lint

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzIndexSnapshot feeds arbitrary bytes to the reader of item lines.
// Invariant: every position it gives is a line of the file whose text at
// the position is the item's key followed by the item's name as JSON.
func FuzzIndexSnapshot(f *testing.F) {
	f.Add([]byte("{\n  \"tools\": [\n    {\n      \"name\": \"get_issue\"\n    }\n  ]\n}\n"))
	f.Add([]byte("{\n  \"prompts\": [\n    {\n      \"arguments\": [\n        {\n          \"name\": \"x\"\n        }\n      ],\n      \"name\": \"x\"\n    }\n  ],\n  \"resources\": [\n    {\n      \"uri\": \"file:///a\\\"b\"\n    }\n  ]\n}"))
	f.Add([]byte(`{"tools": [{"name": "a"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Split(data, []byte("\n"))
		for k, pos := range indexSnapshot("catalog/s.json", data) {
			kind, name, _ := strings.Cut(k, "\x00")
			if pos.Line < 1 || pos.Line > len(lines) || pos.Column < 1 {
				t.Fatalf("%q at %v in a file of %d lines", k, pos, len(lines))
			}
			key := `"name": `
			if kind == "resource" {
				key = `"uri": `
			}
			rest := bytes.TrimSpace(lines[pos.Line-1][pos.Column-1:])
			if !bytes.HasPrefix(rest, []byte(key)) {
				t.Fatalf("%q at line %d: %q", k, pos.Line, lines[pos.Line-1])
			}
			var got string
			if err := json.Unmarshal(bytes.TrimSuffix(rest[len(key):], []byte(",")), &got); err != nil || got != name {
				t.Fatalf("%q at line %d reads %q (%v)", k, pos.Line, got, err)
			}
		}
	})
}
