package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

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

// ShowName is a name from a server as a message shows it: itself, or
// quoted when it is long, not UTF-8 or holds a character that is not
// printable.
func ShowName(s string) string { return showName(s) }

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

// DiffTool says what differs between two definitions of a tool, in the
// words of Change.What; nil when their definition digests are equal (a
// difference of key order, white space or number spelling in a schema is
// none).
func DiffTool(a, b Tool) []string {
	if a.DefinitionDigest() == b.DefinitionDigest() {
		return nil
	}
	var ws []string
	ws = append(ws, diffText("name", a.Name, b.Name)...)
	if a.InputSchemaDigest() != b.InputSchemaDigest() {
		ws = append(ws, "input schema changed")
	}
	if !sameJSON(a.OutputSchema, b.OutputSchema) {
		ws = append(ws, "output schema changed")
	}
	ws = append(ws, diffAnnotations(a.Annotations, b.Annotations)...)
	ws = append(ws, diffText("title", a.Title, b.Title)...)
	ws = append(ws, diffDescription(a.Description, b.Description)...)
	return orChanged(ws)
}

func diffTool(a, b Tool) []string { return DiffTool(a, b) }

// sameJSON reports whether two JSON values (nil: none) are the same in
// canonical form.
func sameJSON(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	x, errA := CanonicalJSON(json.RawMessage(a))
	y, errB := CanonicalJSON(json.RawMessage(b))
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

// orChanged is ws, or "definition changed" when the digests differ in a
// way no word of ws names.
func orChanged(ws []string) []string {
	if len(ws) == 0 {
		return []string{"definition changed"}
	}
	return ws
}

// diffDescription says how a description changed, with the text's
// difference (TextDiff).
func diffDescription(a, b string) []string {
	if a == b {
		return nil
	}
	return []string{"description changed: " + TextDiff(a, b)}
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

// DiffPrompt is DiffTool for prompts.
func DiffPrompt(a, b Prompt) []string {
	if a.DefinitionDigest() == b.DefinitionDigest() {
		return nil
	}
	var ws []string
	ws = append(ws, diffText("name", a.Name, b.Name)...)
	if !slices.Equal(a.Arguments, b.Arguments) {
		ws = append(ws, "arguments changed")
	}
	ws = append(ws, diffText("title", a.Title, b.Title)...)
	ws = append(ws, diffDescription(a.Description, b.Description)...)
	return orChanged(ws)
}

func diffPrompt(a, b Prompt) []string { return DiffPrompt(a, b) }

// DiffResource is DiffTool for resources.
func DiffResource(a, b Resource) []string {
	if a.DefinitionDigest() == b.DefinitionDigest() {
		return nil
	}
	var ws []string
	ws = append(ws, diffText("uri", a.URI, b.URI)...)
	ws = append(ws, diffText("name", a.Name, b.Name)...)
	ws = append(ws, diffText("title", a.Title, b.Title)...)
	ws = append(ws, diffDescription(a.Description, b.Description)...)
	ws = append(ws, diffText("mimeType", a.MIMEType, b.MIMEType)...)
	return orChanged(ws)
}

func diffResource(a, b Resource) []string { return DiffResource(a, b) }

func diffTemplate(a, b ResourceTemplate) []string {
	if a.DefinitionDigest() == b.DefinitionDigest() {
		return nil
	}
	var ws []string
	ws = append(ws, diffText("name", a.Name, b.Name)...)
	ws = append(ws, diffText("title", a.Title, b.Title)...)
	ws = append(ws, diffDescription(a.Description, b.Description)...)
	ws = append(ws, diffText("mimeType", a.MIMEType, b.MIMEType)...)
	return orChanged(ws)
}

// Equal reports whether two snapshots offer the same: their encodings are
// the same JSON value in the JCS form the digests use, so that a schema's
// number spelling (10, 10.0, 1e1), which the file keeps as written, makes
// no difference, as it makes none to a definition digest.
func Equal(a, b *Snapshot) bool {
	x, errA := Encode(cloneSnapshot(a))
	y, errB := Encode(cloneSnapshot(b))
	if errA != nil || errB != nil {
		return false
	}
	jx, errA := jcs.Transform(x)
	jy, errB := jcs.Transform(y)
	if errA != nil || errB != nil {
		return bytes.Equal(x, y) // a number JCS cannot write
	}
	return bytes.Equal(jx, jy)
}
