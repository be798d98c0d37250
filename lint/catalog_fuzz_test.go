package lint

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
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

// FuzzEditDistance checks the bounded edit distance against its laws: zero
// exactly for equal strings, symmetric, at most the longer length, at
// least the difference of lengths, and limit+1 exactly when over limit.
func FuzzEditDistance(f *testing.F) {
	f.Add("kitten", "sitting", 2)
	f.Add("get_isue", "get_issue", 3)
	f.Add("", "abc", 0)
	f.Fuzz(func(t *testing.T, a, b string, limit int) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) || len(a) > 64 || len(b) > 64 || limit < 0 || limit > 64 {
			return
		}
		full := editDistance(a, b, 1000)
		la, lb := utf8.RuneCountInString(a), utf8.RuneCountInString(b)
		switch {
		case (full == 0) != (a == b):
			t.Fatalf("d(%q, %q) = %d", a, b, full)
		case full != editDistance(b, a, 1000):
			t.Fatalf("d(%q, %q) is not symmetric", a, b)
		case full > max(la, lb) || full < max(la-lb, lb-la):
			t.Fatalf("d(%q, %q) = %d out of bounds", a, b, full)
		}
		got := editDistance(a, b, limit)
		if full <= limit && got != full || full > limit && got != limit+1 {
			t.Fatalf("d(%q, %q, limit %d) = %d, full %d", a, b, limit, got, full)
		}
	})
}
