// Command testserver is a fixture MCP server on standard input and output,
// for the tests that pull from a real subprocess.
//
//	testserver [-variant base|changed] [-page N] [-mode serve|hang|garbage|garbage-exit|exit|killed|init-error|mute|list-error|bad-tool]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/catalog/pull/internal/fixture"
)

func main() {
	variant := flag.String("variant", "base", "base or changed")
	page := flag.Int("page", 0, "page size of listings")
	mode := flag.String("mode", "serve", "serve, hang (never answers), garbage (writes junk), garbage-exit (reads a request, writes junk and exits), exit (fails at once), killed (dies by a signal), init-error (answers initialize with an error, exits 0 at the end of its input), mute (reads its input, never answers, exits 0 at its end), list-error (answers tools/list with an error whose message holds terminal controls), bad-tool (lists a tool the SDK drops, named with terminal controls)")
	flag.Parse()
	switch *mode {
	case "hang":
		time.Sleep(time.Hour)
	case "garbage":
		fmt.Println("this is not JSON-RPC")
		fmt.Fprintln(os.Stderr, "testserver: wrote garbage")
		time.Sleep(time.Hour)
	case "garbage-exit":
		// Read the request first: exiting before the client writes would
		// make its write fail, not its read.
		bufio.NewReader(os.Stdin).ReadString('\n')
		fmt.Println("this is not JSON-RPC")
		os.Exit(0)
	case "init-error":
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(in.Bytes(), &req) == nil && req.Method == "initialize" {
				fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"no API token configured"}}`+"\n", req.ID)
			}
		}
		os.Exit(0)
	case "mute":
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "exit":
		fmt.Fprintln(os.Stderr, "testserver: missing API token")
		os.Exit(3)
	case "killed":
		fmt.Fprintln(os.Stderr, "testserver: killing itself")
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			p.Kill()
		}
		time.Sleep(time.Hour)
	}
	s := fixture.Server(fixture.Options{Variant: fixture.Variant(*variant), PageSize: *page})
	switch *mode {
	case "list-error", "bad-tool":
		s.AddReceivingMiddleware(hostile(*mode))
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
		os.Exit(1)
	}
}

// forged is text an upstream sends to forge a terminal's output: it clears
// the screen and starts a line of its own.
const forged = "\x1b[2J\nFAKE LINE: all good"

// hostile answers tools/list as mode says, with forged where the server
// chooses the text.
func hostile(mode string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/list" {
				return next(ctx, method, req)
			}
			if mode == "list-error" {
				return nil, errors.New(forged)
			}
			// An x-mcp-header on an object property: the SDK's client
			// drops the tool and logs its name.
			schema := json.RawMessage(`{"type":"object","properties":{"p":{"type":"object","x-mcp-header":"P"}}}`)
			return &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: forged, InputSchema: schema}}}, nil
		}
	}
}
