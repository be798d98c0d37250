package decisiondiff

import (
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// WriteJSON writes the report as one indented JSON object.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// WriteText writes the report for a terminal: a table of the decisions
// that change, then the rules added and removed.
func WriteText(w io.Writer, r *Report) error {
	fmt.Fprintf(w, "old: %s\nnew: %s\n\n", sideText(r.Old), sideText(r.New))
	if len(r.Changes) == 0 {
		fmt.Fprintln(w, "No decision changes.")
	} else {
		fmt.Fprintf(w, "%s:\n", countOf(len(r.Changes), "decision changes", "decisions change"))
		rows := make([][]string, 0, len(r.Changes))
		for _, c := range r.Changes {
			rows = append(rows, []string{
				principalsText(c.Principals), c.Server, c.Kind, nameText(c, plain),
				c.Before.Effect, c.After.Effect, decidedBy(c.After, r.New.PolicyPath, plain),
			})
		}
		if err := textTable(w, []string{"principals", "server", "kind", "name", "before", "after", "now decided by"}, rows); err != nil {
			return err
		}
	}
	for _, sec := range r.ruleSections() {
		if len(sec.rules) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s (%d):\n", sec.title, len(sec.rules))
		rows := make([][]string, 0, len(sec.rules))
		for _, ru := range sec.rules {
			rows = append(rows, []string{ru.Scope, ru.Server, ru.Kind, ru.List, fmt.Sprintf("%q", ru.Pattern), at(sec.root, ru.Origin)})
		}
		if err := textTable(w, []string{"scope", "server", "kind", "list", "pattern", "origin"}, rows); err != nil {
			return err
		}
	}
	for _, sec := range []struct {
		title   string
		members []Member
	}{{"Group members added", r.MembersAdded}, {"Group members removed", r.MembersRemoved}} {
		if len(sec.members) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s (%d):\n", sec.title, len(sec.members))
		for _, m := range sec.members {
			fmt.Fprintf(w, "  %s in group %s\n", m.Principal, m.Group)
		}
	}
	if len(r.Undecided) > 0 {
		fmt.Fprintf(w, "\nUndecided: the search gave up on %s, so a change may hide there:\n", countOf(len(r.Undecided), "pattern", "patterns"))
		for _, u := range r.Undecided {
			fmt.Fprintf(w, "  %s %s %s for %s\n", u.Server, u.Kind, u.Pattern, principalsText(u.Principals))
		}
	}
	return nil
}

func textTable(w io.Writer, header []string, rows [][]string) error {
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleASCII)})),
		tablewriter.WithHeaderAutoFormat(tw.On),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithTrimSpace(tw.Off),
	)
	t.Header(header)
	if err := t.Bulk(rows); err != nil {
		return err
	}
	return t.Render()
}

// WriteMarkdown writes the report as GitHub-flavoured Markdown, ready to
// post as a pull-request comment.
func WriteMarkdown(w io.Writer, r *Report) error {
	fmt.Fprintf(w, "### policyc diff: %s → %s\n\n", mdCode(r.Old.Label), mdCode(r.New.Label))
	fmt.Fprintf(w, "Old: %s  \nNew: %s\n\n", sideMarkdown(r.Old), sideMarkdown(r.New))
	if len(r.Changes) == 0 {
		fmt.Fprintln(w, "**No decision changes.**")
	} else {
		fmt.Fprintf(w, "**%s**\n\n", countOf(len(r.Changes), "decision changes", "decisions change"))
		fmt.Fprintln(w, "| Principals | Server | Kind | Name | Before | After | Now decided by |")
		fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- |")
		for _, c := range r.Changes {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | **%s** | %s |\n",
				mdCell(principalsText(c.Principals)), mdCode(c.Server), c.Kind, nameText(c, markdown),
				c.Before.Effect, c.After.Effect, decidedBy(c.After, r.New.PolicyPath, markdown))
		}
	}
	for _, sec := range r.ruleSections() {
		if len(sec.rules) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n<details><summary>%s (%d)</summary>\n\n", sec.title, len(sec.rules))
		fmt.Fprintln(w, "| Scope | Server | Kind | List | Pattern | Origin |")
		fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- |")
		for _, ru := range sec.rules {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n",
				mdCode(ru.Scope), mdCode(ru.Server), ru.Kind, mdCode(ru.List), mdCode(ru.Pattern), mdCode(at(sec.root, ru.Origin)))
		}
		fmt.Fprintln(w, "\n</details>")
	}
	for _, sec := range []struct {
		title   string
		members []Member
	}{{"Group members added", r.MembersAdded}, {"Group members removed", r.MembersRemoved}} {
		if len(sec.members) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n\n", sec.title)
		for _, m := range sec.members {
			fmt.Fprintf(w, "- %s in group %s\n", mdCode(m.Principal), mdCode(m.Group))
		}
	}
	if len(r.Undecided) > 0 {
		fmt.Fprintf(w, "\n> [!WARNING]\n> The search gave up on %s, so a change may hide there:\n", countOf(len(r.Undecided), "pattern", "patterns"))
		for _, u := range r.Undecided {
			fmt.Fprintf(w, "> - %s %s %s for %s\n", mdCode(u.Server), u.Kind, mdCode(u.Pattern), mdCell(principalsText(u.Principals)))
		}
	}
	return nil
}

type style int

const (
	plain style = iota
	markdown
)

func sideText(s Side) string {
	var parts []string
	if s.Commit != "" {
		parts = append(parts, "commit "+shortHash(s.Commit))
	}
	if s.Dirty {
		parts = append(parts, "dirty")
	}
	parts = append(parts, fmt.Sprintf("serial %d", s.Serial))
	return fmt.Sprintf("%s (%s)", s.Label, strings.Join(parts, ", "))
}

func sideMarkdown(s Side) string {
	out := mdCode(s.Label)
	if s.Commit != "" {
		out += " at " + mdCode(shortHash(s.Commit))
	}
	if s.Dirty {
		out += " (dirty)"
	}
	return out
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// principalsText names a class: "*" for every principal without a scope
// of its own here.
func principalsText(ps []string) string {
	switch {
	case len(ps) == 0:
		return "*"
	case len(ps) > 3:
		return fmt.Sprintf("%s and %d more", strings.Join(ps[:3], ", "), len(ps)-3)
	}
	return strings.Join(ps, ", ")
}

func nameText(c Change, st style) string {
	code := func(s string) string {
		if st == markdown {
			return mdCode(s)
		}
		return s
	}
	switch c.Found {
	case FoundGlob:
		return fmt.Sprintf("%s (e.g. %s)", code(c.Pattern), code(c.Name))
	case FoundOther:
		return fmt.Sprintf("names no rule matches (e.g. %s)", code(c.Name))
	}
	return code(c.Name)
}

// decidedBy says in words what decided d, with the origin joined to the
// policy path of its table.
func decidedBy(d Decision, root string, st style) string {
	code := func(s string) string {
		if st == markdown {
			return mdCode(s)
		}
		return s
	}
	scope := ""
	if d.Scope != "" && d.Scope != "server" {
		scope = " (" + d.Scope + ")"
	}
	switch d.Reason {
	case "rule":
		pat := fmt.Sprintf("%q", d.Pattern)
		if st == markdown {
			pat = mdCode(d.Pattern)
		}
		return fmt.Sprintf("%s %s%s at %s", code(d.List), pat, scope, code(at(root, d.Origin)))
	case "default":
		if d.Origin == "" {
			return "built-in default"
		}
		if d.Scope == "server" {
			return "default at " + code(at(root, d.Origin))
		}
		return fmt.Sprintf("not on the allow_list%s at %s", scope, code(at(root, d.Origin)))
	}
	return d.Reason
}

// at joins an origin to its table's policy path, as explain prints it.
func at(root, origin string) string {
	if origin == "" || root == "" || root == "." {
		return origin
	}
	return path.Join(root, origin)
}

// mdCell makes text safe inside a Markdown table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", "\\|")
}

// mdCode renders s as an inline code span inside a table cell: the fence is
// one backtick longer than any run in s, and pipes are escaped, which GFM
// requires even in code spans.
func mdCode(s string) string {
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	pad := ""
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") || s == "" {
		pad = " "
	}
	return fence + pad + mdCell(s) + pad + fence
}

// ruleSection is one list of rules a report shows, with the policy root
// its origins are relative to.
type ruleSection struct {
	title string
	rules []Rule
	root  string
}

func (r *Report) ruleSections() []ruleSection {
	return []ruleSection{{"Rules added", r.RulesAdded, r.New.PolicyPath}, {"Rules removed", r.RulesRemoved, r.Old.PolicyPath}}
}
