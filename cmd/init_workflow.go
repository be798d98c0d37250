package cmd

import "strings"

// ciWorkflow is the GitHub Actions workflow of a policy repository: the one
// 'policyc init' writes and the one examples/ci holds, from this one source
// (TestCIWorkflowIsTheExample keeps the example equal to it). version is
// the policyc release it installs; policyDir the policy's directory,
// relative to the repository root.
func ciWorkflow(version, policyDir string) string {
	return strings.NewReplacer("{{VERSION}}", version, "{{POLICY_DIR}}", policyDir).Replace(ciWorkflowTemplate)
}

// ciWorkflowTemplate is ciWorkflow before its two values are filled in.
const ciWorkflowTemplate = `# policyc in GitHub Actions, for a repository that keeps its MCP access
# policy in POLICY_DIR (CUE) and the public signing key in TRUSTED_KEY.
#
#   pull request   lint (findings in code scanning, via SARIF), the test
#                  cases in POLICY_DIR/tests (failures annotated at their
#                  case) and the semantic diff of decisions posted as a PR
#                  comment
#   push to main   test the merged commit, compile it, sign it, verify it
#                  with the public key the gateways trust, upload it as an
#                  artifact
#   weekly         re-sign main, so the table's expiry never lapses
#
# Signing needs, once: a key pair from 'policyc keygen -o policyc-ci', the
# .pub file committed as TRUSTED_KEY, and the .key file's text stored as the
# secret POLICYC_SIGNING_KEY of a GitHub environment named policy-signing.
# Set up: docs/ci.md in the policyc repository. 'policyc init' writes this
# file; examples/ci in the policyc repository holds the same.
name: policy

on:
  pull_request:
  push:
    branches: [main]
  schedule:
    - cron: "17 5 * * 1"
  workflow_dispatch:

permissions:
  contents: read

env:
  # The policyc release to run: pin it, and update it by pull request.
  POLICYC_VERSION: v{{VERSION}}
  # The policy directory, relative to the repository root.
  POLICY_DIR: {{POLICY_DIR}}
  # The public key gateways trust; its private half is the
  # POLICYC_SIGNING_KEY secret of the policy-signing environment.
  TRUSTED_KEY: keys/policyc-ci.pub

jobs:
  lint:
    if: github.event_name == 'pull_request'
    runs-on: ubuntu-latest
    permissions:
      contents: read
      actions: read
      security-events: write # upload SARIF to code scanning
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-go@v5
        with:
          go-version: "1.26"
          cache: false
      - name: Install policyc
        run: go install "github.com/policyc/policyc/cmd/policyc@${POLICYC_VERSION}"
      - name: Lint
        id: lint
        # Exit 1 means findings at the fail level: keep going to upload them,
        # then fail below. Any other non-zero code is a tool failure.
        run: |
          set +e
          policyc lint "$POLICY_DIR" --format sarif > policyc.sarif
          code=$?
          echo "code=$code" >> "$GITHUB_OUTPUT"
          [ "$code" -le 1 ]
      - name: Upload findings to code scanning
        if: always() && hashFiles('policyc.sarif') != ''
        uses: github/codeql-action/upload-sarif@v3
        with:
          sarif_file: policyc.sarif
          category: policyc
      - name: Fail on findings
        if: steps.lint.outputs.code == '1'
        run: |
          # The same findings, readable in the log.
          policyc lint "$POLICY_DIR" --format github || true
          exit 1

  test:
    if: github.event_name == 'pull_request'
    runs-on: ubuntu-latest
    permissions:
      contents: read
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-go@v5
        with:
          go-version: "1.26"
          cache: false
      - name: Install policyc
        run: go install "github.com/policyc/policyc/cmd/policyc@${POLICYC_VERSION}"
      - name: Test
        # Every case of POLICY_DIR/tests decided by the compiled table; a
        # failed case is annotated at its position, with the rule that
        # decided it. Exit 1: a case failed. --coverage also notes each rule
        # no case exercises.
        run: policyc test "$POLICY_DIR" --coverage --format github

  diff:
    if: github.event_name == 'pull_request'
    runs-on: ubuntu-latest
    permissions:
      contents: read
      pull-requests: write # post the diff as a comment
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0 # the base branch and the history serials come from
      - uses: actions/setup-go@v5
        with:
          go-version: "1.26"
          cache: false
      - name: Install policyc
        run: go install "github.com/policyc/policyc/cmd/policyc@${POLICYC_VERSION}"
      - name: Decisions that change
        id: diff
        # Exit 0: no decision changes; 4: some do; anything else: failure.
        run: |
          set +e
          policyc diff "origin/${GITHUB_BASE_REF}" HEAD "$POLICY_DIR" --format markdown > diff.md
          code=$?
          set -e
          case "$code" in
            0) echo "changed=false" >> "$GITHUB_OUTPUT" ;;
            4) echo "changed=true" >> "$GITHUB_OUTPUT" ;;
            *) cat diff.md; exit "$code" ;;
          esac
      - name: Post the diff on the pull request
        if: steps.diff.outputs.changed == 'true'
        # Updates the workflow's last comment rather than adding one per push.
        # On pull requests from forks the token cannot comment; the diff is
        # still in the job summary.
        env:
          GH_TOKEN: ${{ github.token }}
          PR: ${{ github.event.pull_request.number }}
        run: |
          cat diff.md >> "$GITHUB_STEP_SUMMARY"
          gh pr comment "$PR" --body-file diff.md --edit-last \
            || gh pr comment "$PR" --body-file diff.md

  sign:
    # Only main is signed: gateways order tables by serial, and only the
    # first-parent history of main guarantees a later table a larger one.
    if: github.event_name != 'pull_request' && github.ref == 'refs/heads/main'
    runs-on: ubuntu-latest
    # The signing key is a secret of this environment, not of the
    # repository: restrict the environment to the main branch (and add
    # required reviewers if you want a human to release each table).
    environment: policy-signing
    permissions:
      contents: read
    concurrency:
      group: policy-sign
      cancel-in-progress: false
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0 # compile --rev derives the serial from history
      - uses: actions/setup-go@v5
        with:
          go-version: "1.26"
          cache: false
      - name: Install policyc
        run: go install "github.com/policyc/policyc/cmd/policyc@${POLICYC_VERSION}"
      - name: Test the commit
        # No table is signed for a commit whose test cases fail.
        run: policyc test --rev HEAD "$POLICY_DIR"
      - name: Compile the commit and sign it
        # The key is read from the environment variable named by --key-env;
        # it never appears on a command line.
        env:
          POLICYC_SIGNING_KEY: ${{ secrets.POLICYC_SIGNING_KEY }}
        run: |
          if [ -z "$POLICYC_SIGNING_KEY" ]; then
            echo "::error::no POLICYC_SIGNING_KEY secret in the policy-signing environment: run 'policyc keygen -o policyc-ci', commit policyc-ci.pub as $TRUSTED_KEY and store the text of policyc-ci.key as that secret (docs/ci.md)"
            exit 1
          fi
          policyc compile --rev HEAD "$POLICY_DIR" \
            --key-env POLICYC_SIGNING_KEY --expires 30d \
            -o policy.table.signed.json
      - name: Verify as a gateway will
        run: policyc verify policy.table.signed.json --trust "$TRUSTED_KEY"
      - uses: actions/upload-artifact@v4
        with:
          name: policy-table
          path: policy.table.signed.json
          if-no-files-found: error
          retention-days: 90
`
