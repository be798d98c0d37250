// Command testupstream serves a test upstream over stdio, for the gateway's
// subprocess tests: go build it, then configure it as an upstream command.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/runtime/gateway/internal/testupstream"
)

func main() {
	name := flag.String("name", "test", "the server's name")
	exitAtStart := flag.Bool("exit-at-start", false, "exit with status 2 before serving (an upstream that never comes up)")
	outlive := flag.Bool("outlive-input", false, "ignore SIGTERM, and keep running after the input ends (an upstream that does not notice its host has gone)")
	flag.Parse()
	if *outlive {
		signal.Ignore(syscall.SIGTERM)
	}
	if *exitAtStart {
		fmt.Fprintln(os.Stderr, "testupstream: exiting at start, as asked")
		os.Exit(2)
	}
	u := testupstream.New(testupstream.Options{Name: *name, Exit: os.Exit, Stdout: os.Stdout})
	err := u.Server.Run(context.Background(), &mcp.StdioTransport{})
	if *outlive {
		select {}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testupstream:", err)
		os.Exit(1)
	}
}
