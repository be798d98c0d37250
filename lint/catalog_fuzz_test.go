package lint

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzIndexSnapshot feeds arbitrary bytes to the index of item positions.
// Invariant: every position it gives is in the file, and the text there is
// the item's key ("name" or "uri", in any case), a colon and a JSON string
// that decodes to the item's name.
func FuzzIndexSnapshot(f *testing.F) {
	f.Add([]byte("{\n  \"tools\": [\n    {\n      \"name\": \"get_issue\"\n    }\n  ]\n}\n"))
	f.Add([]byte("{\n  \"prompts\": [\n    {\n      \"arguments\": [\n        {\n          \"name\": \"x\"\n        }\n      ],\n      \"name\": \"x\"\n    }\n  ],\n  \"resources\": [\n    {\n      \"uri\": \"file:///a\\\"b\"\n    }\n  ]\n}"))
	f.Add([]byte(`{"tools": [{"name": "a"}]}`))
	f.Add([]byte(`{"Tools":[{"NAME":"é","x":{"name":"b"}}],"resources":[{"uri":"u"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Split(data, []byte("\n"))
		for k, pos := range indexSnapshot("catalog/s.json", data) {
			kind, name, _ := strings.Cut(k, "\x00")
			if pos.Line < 1 || pos.Line > len(lines) || pos.Column < 1 {
				t.Fatalf("%q at %v in a file of %d lines", k, pos, len(lines))
			}
			line := lines[pos.Line-1]
			// The column counts characters: find its byte.
			at := 0
			for range pos.Column - 1 {
				if at >= len(line) {
					t.Fatalf("%q at %v: past the end of line %q", k, pos, line)
				}
				_, n := utf8.DecodeRune(line[at:])
				at += n
			}
			// From there on the file, not the line: JSON may break lines
			// between a key, its colon and its value.
			for _, l := range lines[:pos.Line-1] {
				at += len(l) + 1
			}
			dec := json.NewDecoder(bytes.NewReader(data[at:]))
			var key, got string
			if err := dec.Decode(&key); err != nil {
				t.Fatalf("%q at %v: no key there (%v): %q", k, pos, err, line)
			}
			want := "name"
			if kind == "resource" {
				want = "uri"
			}
			if !strings.EqualFold(key, want) {
				t.Fatalf("%q at %v: key %q, want %q", k, pos, key, want)
			}
			rest := bytes.TrimLeft(data[at+int(dec.InputOffset()):], " \t\r\n")
			if len(rest) == 0 || rest[0] != ':' {
				t.Fatalf("%q at %v: no colon after the key: %q", k, pos, line)
			}
			if err := json.NewDecoder(bytes.NewReader(rest[1:])).Decode(&got); err != nil || got != name {
				t.Fatalf("%q at %v reads %q (%v)", k, pos, got, err)
			}
		}
	})
}
