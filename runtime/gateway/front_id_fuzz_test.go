package gateway

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// The id an over-limit line is answered with, read from the line's start
// alone, is the id the front reads from the whole message: for every way
// of finishing the prefix into a JSON object, the full decoder (requestID,
// and the SDK's decoding with checkIntegerID when the message is one)
// finds that same id. So the scan never answers with an id whose member
// runs past the prefix, nor one a later member of the prefix replaces.
func FuzzOverlongLineID(f *testing.F) {
	// The lines of TestMalformedJSONRPCFromAClient, each over-limit one
	// cut to the start that holds its id.
	big := func(before, after string) string {
		return `{` + before + `"jsonrpc":"2.0","method":"tools/call","params":{"name":"github__echo","arguments":{"x":"yyyy"}}` + after + `}`
	}
	for _, s := range []string{
		`this is not json`,
		`{"jsonrpc":"2.0","id":9`,
		`{"jsonrpc":"2.0","id":9}`,
		`{"jsonrpc":"1.0","id":"x","method":"tools/list"}`,
		`[]`,
		`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":"x"}`,
		`{"jsonrpc":"2.0","id":11,"method":"no/such/method"}`,
		`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":7}}`,
		strings.Repeat("x", 100),
		big(`"id":"big-1",`, ""),
		big(`"id":42,`, ""),
		` {"jsonrpc" : "2.0", "meta":{"a":[1,{"b":"}"}]}, "id" : 43,` + big("", "")[1:],
		big(`"id":1.5,`, ""),
		big(`"ID":44,`, ""),
		big("", `,"id":45`),
		`{"jsonrpc":"2.0","params":{"x":"` + strings.Repeat("y", 100) + `"},"id":46}`,
		// A number cut by the prefix's end, and a repeated member.
		`{"jsonrpc":"2.0","id":4`,
		`{"id":1,"id":2,"jsonrpc":"2.0"`,
		`{"\u0069d":"esc","jsonrpc":"2.0"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, prefix []byte) {
		if len(prefix) > 4<<10 {
			return
		}
		got := prefixID(prefix)
		if got == nil {
			return
		}
		for _, tail := range completionTails {
			msg := complete(append(bytes.Clone(prefix), tail...))
			if !json.Valid(msg) || bytes.TrimLeft(msg, " \t\r\n")[0] != '{' {
				continue
			}
			if lastIDKeyEnd(msg) > len(prefix) {
				continue // a later id member, past the prefix, counts instead: the scan cannot see it
			}
			if want := requestID(msg); want != got {
				t.Fatalf("prefix %q: the scan reads id %#v, the whole message %q has %#v", prefix, got, msg, want)
			}
			if m, err := decodeMessage(msg); err == nil {
				if id := messageID(m); id.IsValid() && id.Raw() != got {
					t.Fatalf("prefix %q: the scan reads id %#v, the SDK reads %#v from %q", prefix, got, id.Raw(), msg)
				}
			}
		}
	})
}

// completionTails are written after a prefix before its open strings and
// containers are closed (complete): each finishes a different kind of
// cut-off token (a string, an escape, a number, a key, a member).
var completionTails = []string{
	"", `"`, "0", "1", "9", ".5", "e1", "0000\"", "00\"", `":0`, `:0`, `"":0`, `0"`,
	`null`, `":"x"`, `"x"`, `,"a":1`, `":8`,
}

// lastIDKeyEnd is the offset just past the last "id" key of the JSON
// object msg's top level; 0 when it has none.
func lastIDKeyEnd(msg []byte) int {
	dec := json.NewDecoder(bytes.NewReader(msg))
	end := 0
	if _, err := dec.Token(); err != nil {
		return 0
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return 0
		}
		if key == "id" {
			end = int(dec.InputOffset())
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return 0
		}
	}
	return end
}

// complete closes what b leaves open: a string, then each container, in
// order. It does not check b is otherwise JSON; the caller does.
func complete(b []byte) []byte {
	var stack []byte
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '{':
			stack = append(stack, '}')
		case c == '[':
			stack = append(stack, ']')
		case (c == '}' || c == ']') && len(stack) > 0:
			stack = stack[:len(stack)-1]
		}
	}
	if inString {
		b = append(b, '"')
	}
	for i := len(stack) - 1; i >= 0; i-- {
		b = append(b, stack[i])
	}
	return b
}
