package cmd

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/policyc/policyc/catalog"
	"github.com/policyc/policyc/internal/decisiondiff"
	"github.com/policyc/policyc/runtime/table"
)

// itemNames is the catalogued names of both sides, for decisiondiff: the
// catalogue of a revision, or the items a table file records.
type itemNames map[string]map[table.Kind][]string

func (n itemNames) Names(server string, kind table.Kind) []string { return n[server][kind] }

func (n itemNames) add(server, kind, name string) {
	k, ok := table.ParseKind(kind)
	if !ok {
		return
	}
	if n[server] == nil {
		n[server] = map[table.Kind][]string{}
	}
	n[server][k] = append(n[server][k], name)
}

// catalogueItems is the union of both sides' catalogued items; nil when
// neither side has any.
func catalogueItems(sides [2]*table.Table, cats [2]*catalog.Catalog) decisiondiff.Items {
	n := itemNames{}
	for i := range sides {
		switch {
		case cats[i] != nil:
			for it := range cats[i].Items() {
				n.add(it.Server, it.Kind, it.Name)
			}
		case sides[i] != nil:
			for _, it := range sides[i].Items {
				n.add(it.Server, it.Kind, it.Name)
			}
		}
	}
	if len(n) == 0 {
		return nil
	}
	for _, kinds := range n {
		for k, names := range kinds {
			slices.Sort(names)
			kinds[k] = slices.Compact(names)
		}
	}
	return n
}

// definitionChanges lists the pinned definitions that differ between the
// sides: from both catalogues when both sides have one (catalog.Diff, with
// the digests and the description's text difference), else from the
// definition digests the items of the sides' catalogues or tables record.
func definitionChanges(sides [2]*table.Table, cats [2]*catalog.Catalog) []decisiondiff.Definition {
	out := []decisiondiff.Definition{}
	if cats[0] != nil && cats[1] != nil {
		servers := map[string]bool{}
		for _, c := range cats {
			for name := range c.Servers {
				servers[name] = true
			}
		}
		for _, name := range slices.Sorted(maps.Keys(servers)) {
			a, b := snapshotDefinitions(cats[0].Servers[name]), snapshotDefinitions(cats[1].Servers[name])
			for _, ch := range catalog.Diff(cats[0].Servers[name], cats[1].Servers[name]) {
				k := defKey{kind: ch.Kind, name: ch.Name}
				d := decisiondiff.Definition{Server: name, Kind: ch.Kind, Name: ch.Name, Change: "changed", What: ch.What,
					OldDigest: a[k].digest, NewDigest: b[k].digest}
				switch ch.What {
				case "added", "removed":
					d.Change = ch.What
				default:
					if a[k].description != b[k].description {
						d.DescriptionDiff = catalog.TextDiff(a[k].description, b[k].description)
						if s, err := strconv.Unquote(d.DescriptionDiff); err == nil {
							d.DescriptionDiff = s
						}
					}
				}
				out = append(out, d)
			}
		}
		return out
	}
	digests := func(i int) map[defKey]string {
		m := map[defKey]string{}
		switch {
		case cats[i] != nil:
			for it := range cats[i].Items() {
				m[defKey{it.Server, it.Kind, it.Name}] = it.DefinitionDigest()
			}
		case sides[i] != nil:
			for _, it := range sides[i].Items {
				if it.Principal == "" {
					m[defKey{it.Server, it.Kind, it.Name}] = it.DefinitionDigest
				}
			}
		}
		return m
	}
	a, b := digests(0), digests(1)
	for _, k := range slices.SortedFunc(maps.Keys(a), defKey.compare) {
		switch d, ok := b[k]; {
		case !ok:
			out = append(out, decisiondiff.Definition{Server: k.server, Kind: k.kind, Name: k.name, Change: "removed", OldDigest: a[k]})
		case d != a[k]:
			out = append(out, decisiondiff.Definition{Server: k.server, Kind: k.kind, Name: k.name, Change: "changed", OldDigest: a[k], NewDigest: d})
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(b), defKey.compare) {
		if _, ok := a[k]; !ok {
			out = append(out, decisiondiff.Definition{Server: k.server, Kind: k.kind, Name: k.name, Change: "added", NewDigest: b[k]})
		}
	}
	return out
}

// defKey names a pinned definition: its server (empty within one
// snapshot), kind and name.
type defKey struct{ server, kind, name string }

func (k defKey) compare(o defKey) int {
	return cmp.Or(strings.Compare(k.server, o.server), strings.Compare(k.kind, o.kind), strings.Compare(k.name, o.name))
}

// defInfo is what a definition change reports of one side's definition.
type defInfo struct{ digest, description string }

// snapshotDefinitions is each definition of a snapshot (nil: none) by kind,
// in catalog.Change's words, and name.
func snapshotDefinitions(s *catalog.Snapshot) map[defKey]defInfo {
	m := map[defKey]defInfo{}
	if s == nil {
		return m
	}
	for i := range s.Tools {
		m[defKey{kind: "tool", name: s.Tools[i].Name}] = defInfo{s.Tools[i].DefinitionDigest(), s.Tools[i].Description}
	}
	for i := range s.Prompts {
		m[defKey{kind: "prompt", name: s.Prompts[i].Name}] = defInfo{s.Prompts[i].DefinitionDigest(), s.Prompts[i].Description}
	}
	for i := range s.Resources {
		m[defKey{kind: "resource", name: s.Resources[i].URI}] = defInfo{s.Resources[i].DefinitionDigest(), s.Resources[i].Description}
	}
	for i := range s.ResourceTemplates {
		t := &s.ResourceTemplates[i]
		m[defKey{kind: "resource template", name: t.URITemplate}] = defInfo{t.DefinitionDigest(), t.Description}
	}
	return m
}

// definitionLine is a definition change as the text and markdown reports
// show it: "server kind name: what".
func definitionLine(d decisiondiff.Definition) string {
	what := d.What
	switch {
	case what != "":
	case d.Change == "changed":
		what = fmt.Sprintf("definition changed (%s -> %s)", orNone(d.OldDigest), orNone(d.NewDigest))
	default:
		what = d.Change
	}
	return d.Server + " " + d.Kind + " " + catalog.ShowName(d.Name) + ": " + what
}

func orNone(digest string) string {
	if digest == "" {
		return "no digest"
	}
	return digest
}

// writeDefinitionChanges appends the definition changes to a text or
// markdown report. In markdown they are a code block: a description is a
// server's text, never markup of the comment.
func writeDefinitionChanges(w *bytes.Buffer, format string, defs []decisiondiff.Definition) {
	if len(defs) == 0 {
		return
	}
	head := count(len(defs), "pinned definition") + " change"
	if len(defs) == 1 {
		head += "s"
	}
	if format == "markdown" {
		fmt.Fprintf(w, "\n**%s:**\n\n```text\n", head)
		for _, d := range defs {
			fmt.Fprintln(w, definitionLine(d))
		}
		fmt.Fprint(w, "```\n")
		return
	}
	fmt.Fprintf(w, "\n%s:\n", head)
	for _, d := range defs {
		fmt.Fprintf(w, "  %s\n", definitionLine(d))
	}
}
