// Command policyc compiles, lints, signs and enforces MCP access policy.
package main

import (
	"os"

	"github.com/policyc/policyc/cmd"
)

func main() { os.Exit(cmd.Main()) }
