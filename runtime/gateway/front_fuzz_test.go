package gateway

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Every line a client sends is either decoded into JSON-RPC messages the
// SDK can take, or answered with exactly one JSON-RPC error response:
// never both, never neither. A numeric id decoded is the integer the line
// wrote: the answer goes to the call the client made.
func FuzzFrontLine(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, `{"jsonrpc":"2.0","id":9}`, `[{"jsonrpc":"2.0","method":"x"}]`,
		`[]`, `not json`, `{"jsonrpc":"2.0","id":[1],"method":"x"}`, `{"jsonrpc":"2.0","id":1,"result":{}}`, `"str"`, `null`,
		`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":1,"method":"b"}]`,
		`{"jsonrpc":"2.0","id":1.5,"method":"x"}`, `{"jsonrpc":"2.0","id":1e30,"method":"x"}`, `{"jsonrpc":"2.0","id":9007199254740993,"method":"x"}`,
		`{"jsonrpc":"2.0","id":-0,"method":"x"}`, `[{"jsonrpc":"2.0","id":2.0,"method":"x"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			return
		}
		msgs, batch, reply := parseLine(line, false)
		switch {
		case (len(msgs) > 0) == (reply != nil):
			t.Fatalf("line %q: %d messages and reply %q", line, len(msgs), reply)
		case reply != nil:
			var resp struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *struct {
					Code    int64  `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if bytes.Count(reply, []byte("\n")) != 1 || json.Unmarshal(reply, &resp) != nil || resp.JSONRPC != "2.0" || resp.Error == nil || resp.Error.Message == "" {
				t.Fatalf("line %q: the answer is not one JSON-RPC error line: %q", line, reply)
			}
		default:
			if batch != (line[0] == '[') || !batch && len(msgs) != 1 {
				t.Fatalf("line %q: batch %v with %d messages", line, batch, len(msgs))
			}
			if lit := rawID(line); !batch && len(lit) > 0 && lit[0] != '"' && string(lit) != "null" {
				id := messageID(msgs[0])
				n, err := strconv.ParseInt(string(lit), 10, 64)
				if got, ok := id.Raw().(int64); err != nil || !ok || got != n {
					t.Fatalf("line %q: id %s decoded as %v", line, lit, id.Raw())
				}
			}
			for _, m := range msgs {
				b, err := jsonrpc.EncodeMessage(m)
				if err != nil {
					t.Fatalf("line %q: a decoded message does not encode: %v", line, err)
				}
				if _, err := jsonrpc.DecodeMessage(b); err != nil {
					t.Fatalf("line %q: re-encoded %q does not decode: %v", line, b, err)
				}
			}
		}
	})
}

// Whatever HTTP body httpBodyError lets through, each message in it the SDK
// decodes carries the numeric id its text wrote, so its answer goes to
// the call the client made.
func FuzzHTTPBodyIDs(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, `{"jsonrpc":"2.0","id":1.5,"method":"x"}`, ` [{"jsonrpc":"2.0","id":"a","method":"x"},{"jsonrpc":"2.0","id":1e30,"method":"x"}]`,
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"x"}`, `{"jsonrpc":"2.0","id":1,"id":2.5,"method":"x"}`, `[{"jsonrpc":"2.0","id":-0,"method":"x"}]`, `{"id":`, `[`,
		`{"jsonrpc":"2.0","id":5,"result":{},"error":{"code":1,"message":"x"}}`, `{"jsonrpc":"2.0","id":5}`, `{"jsonrpc":"2.0","id":5,"result":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if httpBodyError(body, "", func() string { return "" }) != nil {
			return
		}
		// A response it lets through is one the stdio front takes too.
		if m, err := jsonrpc.DecodeMessage(body); err == nil {
			if _, ok := m.(*jsonrpc.Response); ok {
				if _, err := decodeMessage(body); err != nil {
					t.Fatalf("body %q passed, a response the stdio front refuses: %v", body, err)
				}
			}
		}
		msgs := [][]byte{body}
		if b := bytes.TrimLeft(body, " \t\r\n"); len(b) > 0 && b[0] == '[' {
			var batch []json.RawMessage
			if json.Unmarshal(b, &batch) != nil {
				return
			}
			msgs = msgs[:0]
			for _, m := range batch {
				msgs = append(msgs, m)
			}
		}
		for _, b := range msgs {
			m, err := jsonrpc.DecodeMessage(b)
			if err != nil {
				continue
			}
			id := messageID(m)
			got, ok := id.Raw().(int64)
			if !ok {
				continue
			}
			if n, err := strconv.ParseInt(string(rawID(b)), 10, 64); err != nil || n != got {
				t.Fatalf("body %q: message %q passed with id %s, decoded as %d", body, b, rawID(b), got)
			}
		}
	})
}
