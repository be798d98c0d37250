package procexit

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestSDKVersionTagWording pins the MCP Go SDK's (v1.8.0) only word for
// JSON that is not a JSON-RPC 2.0 message, "invalid message version tag",
// which notJSONRPC (and catalog/pull's explain) match in the error's
// text: the SDK has no error value for it. When this fails, the SDK
// rewords it, and both must follow.
func TestSDKVersionTagWording(t *testing.T) {
	_, err := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"1.0","id":1,"method":"ping"}`))
	if err == nil {
		t.Fatal("the SDK changed: it decodes a message of JSON-RPC version 1.0")
	}
	if !notJSONRPC(err) {
		t.Errorf("the SDK changed: a message of version 1.0 is refused with %q, which notJSONRPC (internal/procexit) and explain (catalog/pull) do not recognise", err)
	}
}
