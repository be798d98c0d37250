package gateway

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Every line a client sends is either passed to the SDK as a JSON-RPC
// message it can read, or answered with exactly one JSON-RPC error
// response: never both, never neither.
func FuzzFrontLine(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, `{"jsonrpc":"2.0","id":9}`, `[{"jsonrpc":"2.0","method":"x"}]`,
		`[]`, `not json`, `{"jsonrpc":"2.0","id":[1],"method":"x"}`, `{"jsonrpc":"2.0","id":1,"result":{}}`, `"str"`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.ContainsAny(line, "\n") {
			return
		}
		var sdk, reply bytes.Buffer
		if err := filterLines(bytes.NewReader(line), &sdk, &reply); err != nil {
			t.Fatal(err)
		}
		trimmed := bytes.TrimSpace(line)
		switch {
		case len(trimmed) == 0:
			if sdk.Len()+reply.Len() != 0 {
				t.Fatalf("an empty line produced output: %q %q", sdk.Bytes(), reply.Bytes())
			}
		case sdk.Len() > 0 && reply.Len() > 0, sdk.Len() == 0 && reply.Len() == 0:
			t.Fatalf("line %q: passed %q, answered %q", line, sdk.Bytes(), reply.Bytes())
		case reply.Len() > 0:
			var resp struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *struct {
					Code    int64  `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(reply.Bytes(), &resp); err != nil || resp.JSONRPC != "2.0" || resp.Error == nil || resp.Error.Message == "" {
				t.Fatalf("line %q: the answer is not a JSON-RPC error: %q", line, reply.Bytes())
			}
		default:
			if !json.Valid(sdk.Bytes()) {
				t.Fatalf("line %q: passed invalid JSON %q", line, sdk.Bytes())
			}
		}
	})
}
