// Command testserver is a fixture MCP server on standard input and output,
// for the tests that pull from a real subprocess.
//
//	testserver [-variant base|changed] [-page N] [-mode serve|hang|garbage|garbage-exit|exit|killed]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/catalog/pull/internal/fixture"
)

func main() {
	variant := flag.String("variant", "base", "base or changed")
	page := flag.Int("page", 0, "page size of listings")
	mode := flag.String("mode", "serve", "serve, hang (never answers), garbage (writes junk), garbage-exit (writes junk and exits), exit (fails at once), killed (dies by a signal)")
	flag.Parse()
	switch *mode {
	case "hang":
		time.Sleep(time.Hour)
	case "garbage":
		fmt.Println("this is not JSON-RPC")
		fmt.Fprintln(os.Stderr, "testserver: wrote garbage")
		time.Sleep(time.Hour)
	case "garbage-exit":
		fmt.Println("this is not JSON-RPC")
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
