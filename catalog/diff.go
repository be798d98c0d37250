package catalog

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/policyc/policyc/internal/clip"
)

// Change is one difference between two snapshots of a server.
type Change struct {
	// Kind is "tool", "prompt", "resource" or "resource template".
	Kind string
	// Name is the item's name (a URI or URI template for resources).
	Name string
	// What is "added", "removed", or what changed, e.g.
	// "input schema changed; readOnlyHint true -> false".
	What string
}

// String is the change as catalog pull --check prints it. The name comes
// from the server: one that is long, not UTF-8 or holds a character that
// is not printable (a newline, a terminal escape) is quoted, by its start
// and length when long, so that a server cannot write lines of its own
// into the output.
func (c Change) String() string { return fmt.Sprintf("%s %s: %s", c.Kind, showName(c.Name), c.What) }

func showName(s string) string {
	if len(s) > clip.Max || !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsGraphic(r) }) >= 0 {
		return clip.Quote(s)
	}
	return s
}

// Diff lists what changed from old to new, by kind then name. A nil old is
// an empty snapshot: everything in new is added.
func Diff(old, new *Snapshot) []Change {
	if old == nil {
		old = &Snapshot{}
	}
	if new == nil {
		new = &Snapshot{}
	}
	var out []Change
	out = append(out, diffKind("tool", old.Tools, new.Tools, func(t Tool) string { return t.Name }, diffTool)...)
	out = append(out, diffKind("prompt", old.Prompts, new.Prompts, func(p Prompt) string { return p.Name }, diffPrompt)...)
	out = append(out, diffKind("resource", old.Resources, new.Resources, func(r Resource) string { return r.URI }, diffResource)...)
	out = append(out, diffKind("resource template", old.ResourceTemplates, new.ResourceTemplates,
		func(r ResourceTemplate) string { return r.URITemplate }, diffTemplate)...)
	return out
}

// diffKind merges two lists sorted by key.
func diffKind[T any](kind string, old, new []T, key func(T) string, what func(a, b T) []string) []Change {
	om := map[string]T{}
	for _, x := range old {
		om[key(x)] = x
	}
	nm := map[string]T{}
	for _, x := range new {
		nm[key(x)] = x
	}
	var keys []string
	for k := range om {
		keys = append(keys, k)
	}
	for k := range nm {
		if _, ok := om[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []Change
	for _, k := range keys {
		a, inOld := om[k]
		b, inNew := nm[k]
		switch {
		case !inOld:
			out = append(out, Change{Kind: kind, Name: k, What: "added"})
		case !inNew:
			out = append(out, Change{Kind: kind, Name: k, What: "removed"})
		default:
			if ws := what(a, b); len(ws) > 0 {
				out = append(out, Change{Kind: kind, Name: k, What: strings.Join(ws, "; ")})
			}
		}
	}
	return out
}

func diffTool(a, b Tool) []string {
	var ws []string
	if a.InputSchemaDigest() != b.InputSchemaDigest() {
		ws = append(ws, "input schema changed")
	}
	ws = append(ws, diffAnnotations(a.Annotations, b.Annotations)...)
	ws = append(ws, diffText("title", a.Title, b.Title)...)
	ws = append(ws, diffText("description", a.Description, b.Description)...)
	return ws
}

func diffAnnotations(a, b *Annotations) []string {
	if a == nil {
		a = &Annotations{}
	}
	if b == nil {
		b = &Annotations{}
	}
	var ws []string
	hint := func(name string, x, y *bool) {
		if show(x) != show(y) {
			ws = append(ws, fmt.Sprintf("%s %s -> %s", name, show(x), show(y)))
		}
	}
	hint("readOnlyHint", a.ReadOnlyHint, b.ReadOnlyHint)
	hint("destructiveHint", a.DestructiveHint, b.DestructiveHint)
	hint("idempotentHint", a.IdempotentHint, b.IdempotentHint)
	hint("openWorldHint", a.OpenWorldHint, b.OpenWorldHint)
	ws = append(ws, diffText("annotations title", a.Title, b.Title)...)
	return ws
}

func show(b *bool) string {
	switch {
	case b == nil:
		return "unset"
	case *b:
		return "true"
	}
	return "false"
}

func diffText(field, a, b string) []string {
	if a == b {
		return nil
	}
	return []string{field + " changed"}
}

func diffPrompt(a, b Prompt) []string {
	var ws []string
	if !slices.Equal(a.Arguments, b.Arguments) {
		ws = append(ws, "arguments changed")
	}
	ws = append(ws, diffText("title", a.Title, b.Title)...)
	ws = append(ws, diffText("description", a.Description, b.Description)...)
	return ws
}

func diffResource(a, b Resource) []string {
	var ws []string
	ws = append(ws, diffText("name", a.Name, b.Name)...)
	ws = append(ws, diffText("title", a.Title, b.Title)...)
	ws = append(ws, diffText("description", a.Description, b.Description)...)
	ws = append(ws, diffText("mimeType", a.MIMEType, b.MIMEType)...)
	return ws
}

func diffTemplate(a, b ResourceTemplate) []string {
	var ws []string
	ws = append(ws, diffText("name", a.Name, b.Name)...)
	ws = append(ws, diffText("title", a.Title, b.Title)...)
	ws = append(ws, diffText("description", a.Description, b.Description)...)
	ws = append(ws, diffText("mimeType", a.MIMEType, b.MIMEType)...)
	return ws
}

// Equal reports whether two snapshots encode to the same bytes.
func Equal(a, b *Snapshot) bool {
	x, errA := Encode(cloneSnapshot(a))
	y, errB := Encode(cloneSnapshot(b))
	return errA == nil && errB == nil && bytes.Equal(x, y)
}
