package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tests in this file drive the MCP Go SDK (v1.8.0) alone and pin the
// behaviour the gateway works around. Each fails when the SDK changes, and
// its message names the workaround that can then go.

// TestSDKEndsStdioSessionOnMalformedLine: the SDK's IOTransport ends the
// whole session on a line that is not JSON. The workaround is lineConn
// (front.go), the stdio front's own line reader, which answers such a line
// with a parse error and goes on.
func TestSDKEndsStdioSessionOnMalformedLine(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		plain := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
		c := rawPlain(t, plain, legacyVersion)
		c.send(`this is not JSON`)
		synctest.Wait()
		select {
		case <-c.served:
		default:
			t.Fatal("the SDK changed: its stdio session outlives a malformed line; remove the workaround at lineConn (runtime/gateway/front.go) and serve stdio with mcp.IOTransport")
		}
	})
}

// TestSDKTruncatesFloatIDs: the SDK decodes a numeric id as a float and
// keeps its integer part, so 1.5 becomes 1 and 2^53+1 becomes 2^53. The
// workaround is checkIntegerID (front.go), which refuses such ids.
func TestSDKTruncatesFloatIDs(t *testing.T) {
	t.Parallel()
	for lit, want := range map[string]int64{
		`1.5`:              1,
		`9007199254740993`: 9007199254740992,
	} {
		m, err := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":` + lit + `,"method":"ping"}`))
		if err != nil {
			t.Fatalf("the SDK changed: it refuses id %s (%v); remove the workaround at checkIntegerID (runtime/gateway/front.go)", lit, err)
		}
		if got := m.(*jsonrpc.Request).ID.Raw(); got != want {
			t.Errorf("the SDK changed: id %s decodes as %v (%T), not %d; remove the workaround at checkIntegerID (runtime/gateway/front.go) if it is now kept as written", lit, got, got, want)
		}
	}
}

// TestSDKEchoesUnknownLaterProtocolVersion: the SDK's streamable handler
// refuses an MCP-Protocol-Version it does not know only when it sorts
// before 2026-07-28; a later one it takes, and echoes back in its answer.
// The workaround is the version check at the top of httpFront.ServeHTTP
// (front.go), which refuses both alike.
func TestSDKEchoesUnknownLaterProtocolVersion(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		plain := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
		client := memHTTP(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plain }, nil))
		answer := func(version string) (int, string) {
			req, _ := http.NewRequest(http.MethodPost, memURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", version)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		const refused = "Bad Request: Unsupported protocol version"
		if code, out := answer("2000-01-01"); code != http.StatusBadRequest || !strings.HasPrefix(out, refused) {
			t.Fatalf("the SDK answered an unknown earlier version %d %q; want 400 %q", code, out, refused)
		}
		const later = "2030-01-01-unknown"
		if code, out := answer(later); strings.HasPrefix(out, refused) || !strings.Contains(out, later) {
			t.Fatalf("the SDK changed: it answers an unknown later version %d %q, not with the version echoed; remove the workaround at httpFront.ServeHTTP (runtime/gateway/front.go) if it refuses it as an earlier one", code, out)
		}
	})
}
