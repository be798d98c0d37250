package cmd

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/policyc/policyc/internal/termsafe"
	"github.com/policyc/policyc/runtime/approval"
)

func init() { register(newApprovalsCmd) }

// approvalsOptions are the flags every approvals subcommand shares.
type approvalsOptions struct {
	admin, tokenEnv string
	timeout         time.Duration
	format          string
}

const defaultTokenEnv = "POLICYC_ADMIN_TOKEN"

func newApprovalsCmd() *cobra.Command {
	o := &approvalsOptions{tokenEnv: defaultTokenEnv, timeout: 30 * time.Second}
	c := &cobra.Command{
		Use:   "approvals list|show|approve|deny|revoke --admin URL [--token-env VAR]",
		Short: "List and decide tool calls the gateway holds for approval",
		Long: `Talk to the admin API of a running gateway (its admin listener, not the MCP
front): list the approval requests, show one, approve or deny it, or revoke a
remembered approval.

--admin is the admin listener's URL (default: $POLICYC_ADMIN_URL). The
approver token is read from the environment variable named by --token-env
(default POLICYC_ADMIN_TOKEN), never from the command line, where other users
could see it. It must be an approver token: the admin side refuses MCP client
tokens. An approver can never decide a request made by a principal of its own
name.

Exit codes: 0 done; 2 usage; 3 the admin API could not be reached or failed;
5 the admin API refused: an unknown request (404), one already decided or
expired (409), your own request (403), a duration the server does not allow
(400), a token it does not accept (401), or too many refused tokens from
your address (429: wait as long as it says).

What an agent or an upstream wrote (the client's name, tool names, the
preview, reasons) is printed with control characters, BiDi overrides and
invisible characters as escapes such as \x1b or \u202e, so it can neither
steer the terminal nor pass for another line; --format json writes them as
JSON \u escapes.

docs/approvals.md describes the gate, the admin API and the approvals page.

Examples:
  export POLICYC_ADMIN_URL=https://gateway.internal:8443
  export POLICYC_ADMIN_TOKEN=...   # an approver token
  policyc approvals list
  policyc approvals show apr-k3jq7v2mhxw4tq5a
  policyc approvals approve apr-k3jq7v2mhxw4tq5a --for 8h --reason "release day"
  policyc approvals deny apr-k3jq7v2mhxw4tq5a --reason "use the staging repository"
  policyc approvals revoke apr-k3jq7v2mhxw4tq5a`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("approvals has no subcommand %q: use list, show, approve, deny or revoke (see 'policyc approvals --help')", args[0])
			}
			return usageErrorf("approvals needs a subcommand: list, show, approve, deny or revoke (see 'policyc approvals --help')")
		},
	}
	f := c.PersistentFlags()
	f.StringVar(&o.admin, "admin", "", "the gateway's admin listener, a `URL` such as https://gateway.internal:8443 (default $POLICYC_ADMIN_URL)")
	f.StringVar(&o.tokenEnv, "token-env", defaultTokenEnv, "the environment variable `VAR` holding the approver token")
	f.DurationVar(&o.timeout, "timeout", o.timeout, "give up on the admin API after this `DURATION`")
	c.AddCommand(newApprovalsListCmd(o), newApprovalsShowCmd(o), newApprovalsDecideCmd(o, approval.VerdictApprove),
		newApprovalsDecideCmd(o, approval.VerdictDeny), newApprovalsRevokeCmd(o))
	return c
}

func newApprovalsListCmd(o *approvalsOptions) *cobra.Command {
	var status, cursor string
	var active bool
	limit := approval.DefaultPageSize
	c := &cobra.Command{
		Use:   "list [--status pending|approved|denied|expired|all] [--active] [--limit N] [--cursor CURSOR] [--format FORMAT]",
		Short: "List approval requests, newest first",
		Long: `List approval requests, newest first: by default the pending ones. --status
all lists every request the gateway still keeps; --active lists remembered
approvals (for a duration, and ui:// consents) still in force, which
'policyc approvals revoke' can end.

A list is a page of --limit requests (default 50, at most 500). When there
are more, the last line gives the --cursor of the next page; with --format
json it is the answer's "next".

Examples:
  policyc approvals list
  policyc approvals list --status all --format json
  policyc approvals list --active
  policyc approvals list --limit 100 --cursor MTc5NTAwMDAwMDAwMDAwMDAwMC5hcHItazNqcTd2Mm1oeHc0dHE1YQ`,
		Args: argsRange(0, 0),
		RunE: func(c *cobra.Command, args []string) error {
			switch status {
			case "pending", "approved", "denied", "expired", "all":
			default:
				return usageErrorf("--status %q: use pending, approved, denied, expired or all", status)
			}
			q := url.Values{}
			if active {
				q.Set("active", "true")
				if !c.Flags().Changed("status") {
					status = "all"
				}
			}
			q.Set("status", status)
			if limit < 1 || limit > approval.MaxPageSize {
				return usageErrorf("--limit %d: use a number from 1 to %d", limit, approval.MaxPageSize)
			}
			q.Set("limit", strconv.Itoa(limit))
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var out approval.ListView
			if err := o.call(c, http.MethodGet, "/requests?"+q.Encode(), nil, &out); err != nil {
				return err
			}
			if o.format == "json" {
				return writeJSONOut(c.OutOrStdout(), out)
			}
			if err := writeRequestTable(c.OutOrStdout(), out.Requests, status, active); err != nil {
				return err
			}
			if out.Next != "" {
				fmt.Fprintf(c.OutOrStdout(), "%d of %d shown; the next page: add --cursor %s\n", len(out.Requests), out.Total, termsafe.String(out.Next))
			}
			return nil
		},
	}
	c.Flags().StringVar(&status, "status", "pending", "list requests with this `STATUS`: pending, approved, denied, expired or all")
	c.Flags().BoolVar(&active, "active", false, "list remembered approvals still in force")
	c.Flags().IntVar(&limit, "limit", limit, "list at most `N` requests (at most 500)")
	c.Flags().StringVar(&cursor, "cursor", "", "start after the page that gave this `CURSOR`")
	o.addFormatFlag(c)
	return c
}

func newApprovalsShowCmd(o *approvalsOptions) *cobra.Command {
	c := &cobra.Command{
		Use:   "show REQUEST_ID [--format FORMAT]",
		Short: "Show one approval request: who asks, which tool, the preview, the decision",
		Long: `Show one approval request: who asks and from which agent, the tool, the rule
that asked, the preview of the arguments (never the arguments), and the
decision once there is one.

Examples:
  policyc approvals show apr-k3jq7v2mhxw4tq5a
  policyc approvals show apr-k3jq7v2mhxw4tq5a --format json`,
		Args: argsRange(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			var v approval.RequestView
			if err := o.call(c, http.MethodGet, "/requests/"+url.PathEscape(args[0]), nil, &v); err != nil {
				return err
			}
			if o.format == "json" {
				return writeJSONOut(c.OutOrStdout(), v)
			}
			writeRequest(c.OutOrStdout(), v)
			return nil
		},
	}
	o.addFormatFlag(c)
	return c
}

func newApprovalsDecideCmd(o *approvalsOptions, verdict string) *cobra.Command {
	var body approval.DecisionBody
	c := &cobra.Command{
		Args: argsRange(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			if verdict == approval.VerdictApprove && body.For != "" && body.For != approval.ForRemember {
				if _, err := approval.DurationOf(body.For); err != nil {
					return usageErrorf("--for: %v", err)
				}
			}
			var v approval.RequestView
			if err := o.call(c, http.MethodPost, "/requests/"+url.PathEscape(args[0])+"/"+verdict, body, &v); err != nil {
				return err
			}
			if o.format == "json" {
				return writeJSONOut(c.OutOrStdout(), v)
			}
			writeDecided(c.OutOrStdout(), v)
			return nil
		},
	}
	if verdict == approval.VerdictApprove {
		c.Use = "approve REQUEST_ID [--for once|1h|8h|7d] [--reason TEXT]"
		c.Short = "Approve a held call: once, or for a duration"
		c.Long = `Approve a pending request. The held call runs at once, with exactly the
arguments that were reviewed.

--for once (the default) lets exactly that call run, once. --for 1h, 8h or 7d
also lets every later call of the same tool by the same principal through,
whatever its arguments, until the time is up or the approval is revoked; a
server may cap the longest duration. A ui:// consent request is approved
with --for remember (or no --for): consent is remembered until revoked.

Examples:
  policyc approvals approve apr-k3jq7v2mhxw4tq5a
  policyc approvals approve apr-k3jq7v2mhxw4tq5a --for 8h --reason "release day"`
		c.Flags().StringVar(&body.For, "for", "", "how long the approval lasts, a `DURATION`: once, 1h, 8h or 7d (remember for consent)")
	} else {
		c.Use = "deny REQUEST_ID [--reason TEXT]"
		c.Short = "Deny a held call"
		c.Long = `Deny a pending request. The held call (and every identical call folded into
it) gets a tool error saying a human denied it, with your reason, and telling
the agent not to retry it or reach the same result another way.

Examples:
  policyc approvals deny apr-k3jq7v2mhxw4tq5a
  policyc approvals deny apr-k3jq7v2mhxw4tq5a --reason "use the staging repository"`
	}
	c.Flags().StringVar(&body.Reason, "reason", "", "why, as `TEXT`: shown to the agent with a denial and kept in the audit log")
	o.addFormatFlag(c)
	return c
}

func newApprovalsRevokeCmd(o *approvalsOptions) *cobra.Command {
	c := &cobra.Command{
		Use:   "revoke REQUEST_ID",
		Short: "End a remembered approval (a duration approval or a consent)",
		Long: `End the remembered approval that a request granted: an approval for 1h, 8h
or 7d, or a ui:// consent. The principal's next call asks again. Calls
already let through are not undone. 'policyc approvals list --active' lists
what can be revoked.

Examples:
  policyc approvals list --active
  policyc approvals revoke apr-k3jq7v2mhxw4tq5a`,
		Args: argsRange(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			var v approval.RequestView
			if err := o.call(c, http.MethodPost, "/requests/"+url.PathEscape(args[0])+"/revoke", nil, &v); err != nil {
				return err
			}
			if o.format == "json" {
				return writeJSONOut(c.OutOrStdout(), v)
			}
			writeDecided(c.OutOrStdout(), v)
			return nil
		},
	}
	o.addFormatFlag(c)
	return c
}

// addFormatFlag adds --format text|json to an approvals subcommand, with
// --json as its old spelling, and checks it before the command runs.
func (o *approvalsOptions) addFormatFlag(c *cobra.Command) {
	addFormatFlag(c.Flags(), &o.format, "text", "json")
	addOldJSONFlag(c.Flags(), &o.format)
	c.PreRunE = func(*cobra.Command, []string) error { return checkFormat(o.format, "text", "json") }
}
