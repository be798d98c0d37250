package cmd

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/internal/fileio"
	"github.com/policyc/policyc/testcase"
)

func init() { register(newInitCmd) }

// starterFile is one file policyc init writes.
type starterFile struct {
	path string // slash-separated, relative to DIR
	data string
	// kept is set for a file a repository may have already (.gitignore):
	// one that exists is left as it is, and does not stop init.
	kept bool
}

func starterFiles() []starterFile {
	return []starterFile{
		{"policy.cue", starterPolicy, false},
		{testcase.Dir + "/policy.cue", starterTests, false},
		{compiler.ConfigFileName, starterLintConfig, false},
		{".pre-commit-config.yaml", fmt.Sprintf(starterPreCommit, compiler.Version), false},
		{".github/workflows/policyc.yml", ciWorkflow(compiler.Version, "."), false},
		{".gitignore", starterGitignore, true},
	}
}

// starterGitignore keeps private signing keys out of commits: init's
// next steps make one (policyc keygen) in the repository.
const starterGitignore = `# Private signing keys (policyc keygen -o NAME writes NAME.key and NAME.pub):
# never commit one. CI signs with the key in its POLICYC_SIGNING_KEY secret.
*.key
`

func newInitCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "init [DIR]",
		Short: "Start a policy repository: an example policy, the lint config, a pre-commit hook and CI",
		Long: `Write a starter policy repository into DIR (default: the current directory,
created if missing):

  policy.cue                      a commented example policy
  tests/policy.cue                its test cases, for 'policyc test'
  policyc.cue                     the lint configuration
  .pre-commit-config.yaml         runs 'policyc lint --staged' and 'policyc test
                                  --staged' before every commit
  .github/workflows/policyc.yml   on pull requests, lints (SARIF into code
                                  scanning), runs policyc test and posts the
                                  decisions that change; on main, tests and
                                  compiles --rev HEAD, signs with the
                                  POLICYC_SIGNING_KEY secret (--key-env) and
                                  verifies the table; the same workflow as
                                  examples/ci
  .gitignore                      ignores *.key, so that a private signing key
                                  is never committed (an existing .gitignore
                                  is left as it is, with a note if it does not)

The example compiles, lints clean and passes its tests. init never overwrites a file: if any of
them exists, it writes nothing and exits 3.

Examples:
  policyc init
  policyc init mcp-policy && cd mcp-policy && git init && pre-commit install`,
		Args: argsRange(0, 1),
		RunE: func(c *cobra.Command, args []string) error {
			dir := dirArg(args)
			var files []starterFile
			var existing, kept []string
			for _, f := range starterFiles() {
				if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(f.path))); err == nil {
					if f.kept {
						kept = append(kept, f.path)
						continue
					}
					existing = append(existing, f.path)
				} else if !os.IsNotExist(err) {
					return failuref("%v", err)
				}
				files = append(files, f)
			}
			if len(existing) > 0 {
				return failuref("refusing to overwrite %s in %s; move %s away or run policyc init in another directory",
					strings.Join(existing, ", "), dir, map[bool]string{true: "it", false: "them"}[len(existing) == 1])
			}
			out := c.OutOrStdout()
			for _, f := range files {
				p := filepath.Join(dir, filepath.FromSlash(f.path))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					return failuref("%v", err)
				}
				if err := fileio.WriteAtomic(p, []byte(f.data), 0o644); err != nil {
					return withCode(ExitFailure, err)
				}
				fmt.Fprintf(out, "wrote %s\n", filepath.ToSlash(p))
			}
			for _, path := range kept {
				p := filepath.Join(dir, filepath.FromSlash(path))
				if b, err := os.ReadFile(p); err != nil || !slices.ContainsFunc(strings.Split(string(b), "\n"), func(l string) bool { return strings.TrimSpace(l) == "*.key" }) {
					fmt.Fprintf(out, "kept %s as it is: add the line *.key to it, so that a private signing key is never committed\n", filepath.ToSlash(p))
				}
			}
			fmt.Fprintf(out, "\nNext: edit policy.cue, run 'policyc lint %s' and 'policyc test %s', and 'pre-commit install' to lint and test every commit.\n", filepath.ToSlash(dir), filepath.ToSlash(dir))
			// The key pair goes into DIR, where the .gitignore written
			// here keeps the private key out of commits.
			pair := path.Join(filepath.ToSlash(dir), "policyc-ci")
			fmt.Fprintf(out, "To let CI sign tables: 'policyc keygen -o %s', commit %s.pub as keys/policyc-ci.pub, and store the text of %s.key as the secret POLICYC_SIGNING_KEY of a GitHub environment named policy-signing (docs/ci.md).\n", pair, pair, pair)
			return nil
		},
	}
}

const starterPolicy = `package policy

// The access policy of this MCP gateway: which tools an agent may call,
// which need a human's approval, which prompts and resources it may see.
// 'policyc lint' checks it before every commit; CI compiles it into a
// decision table that the gateway enforces.
//
// A decision is keyed by (principal, server, kind, name), kind being tool,
// prompt or resource (a resource's name is its URI). For each server and
// kind, deny_list comes first, then approval_list (tools only), then
// allow_list; the first pattern that matches decides, else the default.
// Patterns are globs matched against the whole name: * any run of
// characters, ? one character, [a-z] one of a class.

// Whatever no rule allows is denied.
defaults: {
	tool:     "deny"
	prompt:   "deny"
	resource: "deny"
}

// Where approval requests go. The gateway's own approvals page is read by
// a human; a webhook must say reaches_human: true to count as one.
approval_channels: page: approvals_page: {}

global: access: tool: {
	approval_channel: "page"
	// How long a request stays open for a human to decide.
	approval_timeout_seconds: 1800
}

// One entry per upstream MCP server, by the name the gateway gives it.
mcp_servers: github: access: {
	tool: {
		// Read-only tools run without asking.
		allow_list: ["get_*", "list_*", "search_*"]
		// These change things: a human approves each call.
		approval_list: ["create_pull_request", "merge_pull_request"]
		// Never through this gateway.
		deny_list: ["delete_repository"]
	}
	resource: allow_list: ["repo://*"]
}

// Groups and principals can only take access away, never add it.
groups: contractors: {
	members: ["contractor@example.com"]
	mcp_servers: github: access: tool: deny_list: ["merge_pull_request"]
}
`

const starterTests = `package tests

// Test cases of policy.cue: 'policyc test' decides each with the compiled
// table, as the gateway will, and fails on any whose decision differs; with
// --coverage it lists the rules no case exercises. A case may name the rule
// that must decide it: "default", FILE:LINE, or the rule as 'policyc
// explain' names it. These files are not part of the policy.

cases: github: {
	"reads run without asking": {server: "github", name: "get_issue", expect: "allow"}
	"so do searches": {server: "github", name: "search_code", expect: "allow"}
	"a pull request waits for a human": {server: "github", name: "create_pull_request", expect: "approve"}
	"a merge waits for a human": {server: "github", name: "merge_pull_request", expect: "approve", rule: "approval_list \"merge_pull_request\""}
	"never delete a repository": {server: "github", name: "delete_repository", expect: "deny", rule: "deny_list \"delete_repository\""}
	"a tool no rule names is denied": {server: "github", name: "fork_repository", expect: "deny", rule: "default"}
	"a repository's files": {server: "github", kind: "resource", name: "repo://acme/app/README.md", expect: "allow"}
}

// Every case of this group asks as a member of contractors.
cases: contractors: {
	[_]: groups: ["contractors"]
	"contractors read": {server: "github", name: "list_issues", expect: "allow"}
	"contractors never merge": {server: "github", name: "merge_pull_request", expect: "deny", rule: "deny_list \"merge_pull_request\" (group:contractors scope)"}
}
`

const starterLintConfig = `package policyc

// How 'policyc lint' judges this policy. Every key is checked like the
// policy's own; 'policyc lint --list-rules' lists the rule ids.

// Stop the commit and the pull request on warnings too.
fail_level: "warning"

rules: {
	// Report global denies that repeat what every server already denies?
	// Turn this off if you keep them on purpose, as a guard.
	"redundant-deny": level: "info"
}
`

const starterPreCommit = `# pre-commit (https://pre-commit.com): lint and test the policy as it is
# staged, before every commit. Set up once with: pre-commit install
repos:
  - repo: https://github.com/policyc/policyc
    rev: v%s
    hooks:
      - id: policyc-lint
        # args: [path/to/policy]   # when the policy is not at the repository root
      - id: policyc-test
        # args: [path/to/policy]
`
