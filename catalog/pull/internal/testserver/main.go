// Command testserver is a fixture MCP server on standard input and output,
// for the tests that pull from a real subprocess.
//
//	testserver [-variant base|changed] [-page N] [-mode serve|hang|garbage|garbage-exit|exit|killed|init-error|mute]
package main

import (
	"bufio"
	"context"
	"encoding/json"
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
	mode := flag.String("mode", "serve", "serve, hang (never answers), garbage (writes junk), garbage-exit (reads a request, writes junk and exits), exit (fails at once), killed (dies by a signal), init-error (answers initialize with an error, exits 0 at the end of its input), mute (reads its input, never answers, exits 0 at its end)")
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
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
		os.Exit(1)
	}
}
