package cmd

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/principal"
	"github.com/policyc/policyc/runtime/table"
)

func init() { register(newExplainCmd) }

func newExplainCmd() *cobra.Command {
	var item itemFlags
	var tr tableReader
	var groups []string
	c := &cobra.Command{
		Use:   "explain [DIR | TABLE] --server SERVER --kind KIND --name NAME [--trust KEY.pub]",
		Short: "Show the decision for one item, the rule that made it and the rules it beat",
		Long: `Explain one decision: compile the policy in DIR (default: the current
directory) or read a compiled TABLE, and show what the gateway would decide
for a principal calling, fetching or listing one item, the rule or default
that decided it with its origin, and every other matching rule it beat, in
every scope that applies.

TABLE is a compiled table or a signed one (as 'policyc sign' writes it). With
--trust, a signed table is read only once its signature by one of the keys
verifies (and not expired), with 'policyc verify's exit codes (10-16) when it
does not; without --trust, a signed table is read unverified, and a note on
standard error says so.

--groups names the groups the asker is in by its token (the gateway's
identity providers map a token's groups claim to the policy's groups):
they narrow as listed membership does, beside the groups the policy lists
--principal in. The gateway decides a token's client exactly so.

With --format json the output is an object with at least "decision" ("allow",
"approve" or "deny") and "rule" (null when a default decided, else an object
with "origin").

Examples:
  policyc explain examples/team --server linear --kind tool --name save_issue
  policyc explain table.json --server github --kind tool --name merge_pull_request --principal alice
  policyc explain examples/apps --server tickets --kind tool --name add_comment --principal dave@example.com --groups contractors
  policyc explain table.signed.json --trust ci.pub --server github --kind tool --name merge_pull_request
  policyc explain examples/team --server github --kind resource --name 'repo://acme/app' --format json`,
		Args: argsRange(0, 1),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := item.check(c)
			if err != nil {
				return err
			}
			tr.stderr = c.ErrOrStderr()
			arg := dirArg(args)
			t, root, err := loadPolicyOrTable(arg, &tr, c.ErrOrStderr())
			if err != nil {
				return err
			}
			if _, known := t.Source().Servers[item.server]; !known {
				// Not an error (the answer is right: deny), but most likely
				// a misspelling.
				names := slices.Sorted(maps.Keys(t.Source().Servers))
				hint := ""
				if near := compiler.Suggest(item.server, names); near != "" {
					hint = fmt.Sprintf("; did you mean %q?", near)
				}
				servers := "the table has no servers"
				if len(names) > 0 {
					servers = "servers: " + strings.Join(names, ", ")
				}
				fmt.Fprintf(c.ErrOrStderr(), "policyc: note: server %q is not in the table, so every item of it is denied%s (%s)\n",
					item.server, hint, servers)
			}
			who, err := askerWithGroups(t.Source(), item.principal, groups)
			if err != nil {
				return err
			}
			if len(groups) == 0 {
				notePrincipal(c.ErrOrStderr(), t.Source(), item.principal)
			}
			ex := t.Explain(who, item.server, k, item.name)
			if item.format == "json" {
				return writeExplainJSON(c.OutOrStdout(), ex)
			}
			shown := item.principal
			if len(groups) > 0 {
				shown = strings.TrimSpace(item.principal + " (groups " + principal.Groups(who) + ")")
			}
			writeExplainText(c.OutOrStdout(), root, shown, item.server, item.kind, item.name, ex)
			writeServerModes(c.OutOrStdout(), t.Source(), item.server, k, item.name, ex.Decision.Effect)
			return nil
		},
	}
	item.add(c.Flags())
	c.Flags().StringSliceVar(&groups, "groups", nil, "the `GROUPS` (comma-separated) the asker is in by its access token, as the gateway maps them")
	tr.addFlags(c.Flags())
	return c
}

// askerWithGroups is who explain decides for: principal, or with groups
// the principal reference the gateway makes of a token's principal and
// groups. A group the table does not have is a usage error, with the
// nearest one: it would narrow nothing.
func askerWithGroups(src *table.Table, name string, groups []string) (string, error) {
	if len(groups) == 0 {
		return name, nil
	}
	have := map[string]bool{}
	for _, sc := range src.Scopes {
		if g, ok := strings.CutPrefix(sc.Name, "group:"); ok {
			have[g] = true
		}
	}
	known := slices.Sorted(maps.Keys(have))
	var set []string
	for _, g := range groups {
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		if !have[g] {
			hint := "the table has no groups"
			if len(known) > 0 {
				hint = "its groups: " + strings.Join(known, ", ")
				if near := compiler.Suggest(g, known); near != "" {
					hint = fmt.Sprintf("did you mean %q? (%s)", near, hint)
				}
			}
			return "", usageErrorf("--groups: %q is not a group of the table, so it would narrow nothing; %s", g, hint)
		}
		set = append(set, g)
	}
	slices.Sort(set)
	return principal.Ref(principal.Parts{Name: name, Groups: slices.Compact(set)}), nil
}

// itemFlags name one decision: who asks for which item of which server,
// and how to print the answer. explain and blame share them.
type itemFlags struct {
	server, kind, name, principal, format string
}

func (f *itemFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.server, "server", "", "the MCP `SERVER`, by its name in mcp_servers")
	fs.StringVar(&f.kind, "kind", "tool", "the item's `KIND`: tool, prompt or resource")
	fs.StringVar(&f.name, "name", "", "the tool or prompt `NAME`, or the resource URI")
	fs.StringVar(&f.principal, "principal", "", "the `PRINCIPAL` who asks (default: one with no group or scope of its own)")
	addFormatFlag(fs, &f.format, "text", "json")
}

// check validates the flags and returns the kind.
func (f *itemFlags) check(c *cobra.Command) (table.Kind, error) {
	k, ok := table.ParseKind(f.kind)
	if !ok {
		return 0, checkChoice("kind", f.kind, "tool", "prompt", "resource")
	}
	if f.server == "" || f.name == "" {
		return 0, usageErrorf("--server and --name are required (see '%s --help')", c.CommandPath())
	}
	if err := checkFormat(f.format, "text", "json"); err != nil {
		return 0, err
	}
	return k, nil
}

// loadPolicyOrTable compiles a policy directory or reads a table file
// (bare or signed, through tr), and returns the loaded table and the
// directory origins are relative to.
func loadPolicyOrTable(arg string, tr *tableReader, stderr io.Writer) (*decide.Table, string, error) {
	st, err := os.Stat(arg)
	if err != nil {
		return nil, "", failuref("%v", err)
	}
	if st.IsDir() {
		if len(tr.trust) > 0 {
			return nil, "", usageErrorf("--trust verifies a signed table file; %s is a policy directory, which is compiled, not verified", arg)
		}
		res, err := compileDir(arg, stderr)
		if err != nil {
			return nil, "", err
		}
		t, err := decide.LoadForInspection(res.Table)
		if err != nil {
			return nil, "", failuref("load compiled table: %v", err)
		}
		return t, res.Table.Source.PolicyPath, nil
	}
	if strings.HasSuffix(arg, ".cue") {
		return nil, "", usageErrorf("%s is a policy file: give the directory of the policy (%s), which is compiled whole, or a compiled table", arg, filepath.Dir(arg))
	}
	src, err := tr.read(arg)
	if err != nil {
		return nil, "", tableFileError(arg, err, "")
	}
	t, err := decide.LoadForInspection(src)
	if err != nil {
		return nil, "", failuref("%s: %v", arg, err)
	}
	return t, t.Source().Source.PolicyPath, nil
}

type explainRule struct {
	Scope   string `json:"scope"`
	Effect  string `json:"effect"`
	Pattern string `json:"pattern"`
	Origin  string `json:"origin"`
}

type explainJSON struct {
	Decision               string        `json:"decision"`
	Reason                 string        `json:"reason"`
	Scope                  string        `json:"scope,omitempty"`
	Rule                   *explainRule  `json:"rule"`
	Origin                 string        `json:"origin,omitempty"`
	ApprovalTimeoutSeconds int           `json:"approval_timeout_seconds,omitempty"`
	ApprovalChannel        string        `json:"approval_channel,omitempty"`
	ConsentChannel         string        `json:"consent_channel,omitempty"`
	Scopes                 []string      `json:"scopes"`
	Beaten                 []explainRule `json:"beaten"`
	NormalForm             string        `json:"normal_form,omitempty"`
}

func writeExplainJSON(w io.Writer, ex decide.Explanation) error {
	d := ex.Decision
	out := explainJSON{
		Decision: d.Effect.String(), Reason: d.Reason.String(), Scope: d.Scope, Origin: d.Origin,
		ApprovalTimeoutSeconds: d.ApprovalTimeoutSeconds, ApprovalChannel: d.ApprovalChannel,
		ConsentChannel: d.ConsentChannel, Scopes: ex.Scopes, Beaten: []explainRule{}, NormalForm: ex.Normal,
	}
	if out.Scopes == nil {
		out.Scopes = []string{}
	}
	if d.Rule != nil {
		out.Rule = &explainRule{Scope: d.Scope, Effect: d.Rule.Effect, Pattern: d.Rule.Pattern, Origin: d.Rule.Origin}
	}
	for _, m := range ex.Beaten {
		out.Beaten = append(out.Beaten, explainRule{Scope: m.Scope, Effect: m.Rule.Effect, Pattern: m.Rule.Pattern, Origin: m.Rule.Origin})
	}
	return writeJSON(w, out)
}

func writeExplainText(w io.Writer, root, principal, server, kind, name string, ex decide.Explanation) {
	d := ex.Decision
	where := func(origin string) string {
		if origin == "" {
			return "built in"
		}
		if root == "" || root == "." || strings.HasPrefix(origin, "/") {
			return origin
		}
		return path.Join(root, origin)
	}
	who := principal
	if who == "" {
		who = "(any principal)"
	}
	fmt.Fprintf(w, "%s %s %q on %s for %s\n", d.Effect, kind, name, server, who)
	switch d.Reason {
	case decide.ByRule:
		fmt.Fprintf(w, "  decided by: %s %q (%s scope) at %s\n", listName(d.Rule.Effect), d.Rule.Pattern, d.Scope, where(d.Origin))
	case decide.ByDefault:
		if d.Scope == decide.ServerScope {
			fmt.Fprintf(w, "  decided by: the %s default of %s (%s)\n", kind, server, where(d.Origin))
		} else {
			fmt.Fprintf(w, "  decided by: not on the allow_list of %s (%s)\n", d.Scope, where(d.Origin))
		}
	case decide.URINotNormal:
		// A URI with no sound reading is denied by no scope; one whose
		// reading is denied (a URI that is its own normal form may still
		// have other readings, "…/.env?x") names the rule or default.
		switch {
		case d.Rule != nil:
			fmt.Fprintf(w, "  decided by: uri not in normal form: %s %q (%s scope) at %s denies a reading of it\n", listName(d.Rule.Effect), d.Rule.Pattern, d.Scope, where(d.Origin))
		case d.Scope == "":
			fmt.Fprintf(w, "  decided by: uri not in normal form: it has none (spaces around it, a control character, a scheme or host made by decoding, a host a URL parser reads as another, or escapes left after three rounds); docs/gateway.md lists them\n")
		default:
			fmt.Fprintf(w, "  decided by: uri not in normal form: no rule allows a reading of it (%s)\n", where(d.Origin))
		}
	default:
		fmt.Fprintf(w, "  decided by: %s\n", d.Reason)
	}
	if ex.Normal != "" {
		fmt.Fprintf(w, "  normal form: %q (decided too: an upstream may read the URI so)\n", ex.Normal)
	}
	if d.Effect == table.Approve {
		fmt.Fprintf(w, "  approval:   a request lives up to %ds, asked through channel %q\n", d.ApprovalTimeoutSeconds, d.ApprovalChannel)
	}
	if d.Consent {
		fmt.Fprintf(w, "  consent:    read needs consent through channel %q (SEP-1865)\n", d.ConsentChannel)
	}
	if len(ex.Scopes) > 0 {
		fmt.Fprintf(w, "  scopes:     %s\n", strings.Join(ex.Scopes, ", "))
	}
	for i, m := range ex.Beaten {
		label := "beat:      "
		if i > 0 {
			label = "           "
		}
		fmt.Fprintf(w, "  %s %s %q (%s scope) at %s\n", label, listName(m.Rule.Effect), m.Rule.Pattern, m.Scope, where(m.Rule.Origin))
	}
}

// listName is the policy key a rule of an effect was written under.
func listName(effect string) string {
	switch effect {
	case table.Deny.String():
		return "deny_list"
	case table.Approve.String():
		return "approval_list"
	}
	return "allow_list"
}

// writeServerModes adds what the server's modes in the table change about
// the answer: audit mode serves what the rules deny or hold, and pins hold
// the item to its catalogued definition.
func writeServerModes(w io.Writer, src *table.Table, server string, kind table.Kind, name string, effect table.Effect) {
	s, ok := src.Servers[server]
	if !ok {
		return
	}
	if s.Audit {
		switch {
		case src.Serial == 0:
			fmt.Fprintf(w, "  audit:      server %s is in audit mode, but this table has serial 0: a gateway refuses it\n", server)
		case effect != table.Allow:
			verdict := "would_deny"
			if effect == table.Approve {
				verdict = "would_hold"
			}
			fmt.Fprintf(w, "  audit:      server %s is in audit mode: the gateway logs %s and serves it as allowed\n", server, verdict)
		default:
			fmt.Fprintf(w, "  audit:      server %s is in audit mode: what its rules deny or hold is served\n", server)
		}
	}
	if (s.Pins == table.PinsEnforce || s.Pins == table.PinsWarn) && kind != table.Resource {
		pin := ""
		for _, it := range src.Items {
			if it.Server == server && it.Kind == kind.String() && it.Name == name && it.Principal == "" {
				pin = it.DefinitionDigest
				break
			}
		}
		switch {
		case pin != "":
			fmt.Fprintf(w, "  pins:       %s: served only as catalogued (%s)\n", s.Pins, pin)
		case s.Pins == table.PinsEnforce:
			fmt.Fprintf(w, "  pins:       enforce: not in the catalogue, so the gateway hides it whatever the rules say\n")
		default:
			fmt.Fprintf(w, "  pins:       warn: not in the catalogue; the gateway serves it and reports drift\n")
		}
	}
}
