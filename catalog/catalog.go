// Package catalog is the catalogue snapshot of the upstream MCP servers of a
// policy: what each server offers (tools with their annotations and input
// schemas, prompts with their arguments, resources, resource templates), kept
// as one JSON file per server under catalog/ in the policy repository and
// reviewed and versioned like the policy.
//
// A snapshot is canonical JSON: items sorted, keys sorted, two-space
// indentation, one trailing newline, and nothing that depends on the clock or
// on the order a server happened to list things in. Pulling the same server
// twice gives the same bytes, so a diff of catalog/ is a diff of what the
// servers offer.
//
// Annotations are hints a server gives about its own tools. They are recorded
// as the server stated them and are never trusted: a server can call a
// destructive tool read-only. Nothing in this package decides access.
//
// This package never connects to a server (package pull does) and never
// writes a file except through internal/fileio.
package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"

	"github.com/policyc/policyc/internal/jsonerr"
	"github.com/policyc/policyc/internal/suggest"
	"github.com/policyc/policyc/runtime/table"
)

// Format is the snapshot format version this build writes and reads.
const Format = "policyc.catalog/v1"

// Dir is the directory of the snapshots, relative to the policy root.
const Dir = "catalog"

// Snapshot is what one server offers. Fields are declared in sorted JSON-key
// order; keep it that way, the canonical form depends on it. Items keep the
// field names of the MCP listings they come from.
type Snapshot struct {
	// Format is Format.
	Format            string             `json:"format"`
	Prompts           []Prompt           `json:"prompts"`
	ResourceTemplates []ResourceTemplate `json:"resource_templates"`
	Resources         []Resource         `json:"resources"`
	// Server is the server's name in the policy's mcp_servers (and in the
	// gateway configuration's upstreams).
	Server string `json:"server"`
	Tools  []Tool `json:"tools"`
}

// Tool is one tool of a tools/list.
type Tool struct {
	Annotations *Annotations `json:"annotations,omitempty"`
	Description string       `json:"description,omitempty"`
	// InputSchema is the tool's JSON Schema in canonical form (sorted keys,
	// no insignificant space); Canonicalize is applied when a snapshot is
	// encoded.
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	Name        string          `json:"name"`
	// OutputSchema is the tool's output JSON Schema, in canonical form as
	// InputSchema is.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Title        string          `json:"title,omitempty"`
}

// Annotations are a tool's behaviour hints (MCP ToolAnnotations), as the
// server stated them. A nil pointer is a hint the server did not give; the
// MCP specification's defaults then apply (see the methods of Tool).
type Annotations struct {
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	Title           string `json:"title,omitempty"`
}

// ReadOnly reports the readOnlyHint (default false).
func (t *Tool) ReadOnly() bool {
	return t.Annotations != nil && t.Annotations.ReadOnlyHint != nil && *t.Annotations.ReadOnlyHint
}

// MayDestroy reports whether the tool may be destructive per the MCP
// specification's annotation defaults: readOnlyHint false (the default) and
// destructiveHint not false (the default is true). It is a hint, not a fact.
func (t *Tool) MayDestroy() bool {
	if t.ReadOnly() {
		return false
	}
	return t.Annotations == nil || t.Annotations.DestructiveHint == nil || *t.Annotations.DestructiveHint
}

// InputSchemaDigest is "sha256:" and the hex SHA-256 of the input schema in
// the JSON Canonicalization Scheme of RFC 8785, as the definition digest
// writes it; "" when the tool has none. Two snapshots of a tool have the
// same digest exactly when their input schemas are the same JSON value:
// key order, white space and number spelling (10, 10.0, 1e1) aside. A
// schema JCS cannot write (a number past float64's range) is digested in
// the form Canonicalize gives it.
func (t *Tool) InputSchemaDigest() string {
	if len(t.InputSchema) == 0 {
		return ""
	}
	b, err := jcs.Transform(t.InputSchema)
	if err != nil {
		if b, err = Canonicalize(t.InputSchema); err != nil {
			b = t.InputSchema
		}
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Prompt is one prompt of a prompts/list.
type Prompt struct {
	// Arguments keep the server's order, which clients show.
	Arguments   []PromptArgument `json:"arguments,omitempty"`
	Description string           `json:"description,omitempty"`
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
}

// PromptArgument is one argument of a prompt.
type PromptArgument struct {
	Description string `json:"description,omitempty"`
	Name        string `json:"name"`
	Required    bool   `json:"required,omitempty"`
	Title       string `json:"title,omitempty"`
}

// Resource is one resource of a resources/list. Its name in a policy is its
// URI. Size and annotations are left out: they change with the content,
// not with what the server offers.
type Resource struct {
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mimeType,omitempty"`
	Name        string `json:"name,omitempty"`
	Title       string `json:"title,omitempty"`
	URI         string `json:"uri"`
}

// ResourceTemplate is one template of a resources/templates/list: the URIs
// it expands to are resources the server can read without listing them.
type ResourceTemplate struct {
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mimeType,omitempty"`
	Name        string `json:"name,omitempty"`
	Title       string `json:"title,omitempty"`
	URITemplate string `json:"uriTemplate"`
}

// Canonicalize returns the canonical form of a JSON value: object keys
// sorted, no insignificant white space, numbers as written, no HTML
// escaping. It refuses input that is not exactly one JSON value. It is the
// form a snapshot file holds; digests and Equal compare values in the JCS
// form instead, where 10 and 10.0 are one number.
func Canonicalize(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("trailing data after the JSON value")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Encode returns the canonical bytes of s: it sorts the items, canonicalizes
// the input schemas and checks the snapshot. s is sorted in place.
func Encode(s *Snapshot) ([]byte, error) {
	s.Format = Format
	s.normalize()
	for i := range s.Tools {
		for _, sc := range []struct {
			which string
			raw   *json.RawMessage
		}{{"input", &s.Tools[i].InputSchema}, {"output", &s.Tools[i].OutputSchema}} {
			if len(*sc.raw) == 0 {
				continue
			}
			b, err := Canonicalize(*sc.raw)
			if err != nil {
				return nil, fmt.Errorf("tool %q: %s schema: %w", s.Tools[i].Name, sc.which, err)
			}
			*sc.raw = b
		}
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// normalize sorts the items and makes absent lists empty, so that the
// encoding has one shape.
func (s *Snapshot) normalize() {
	if s.Tools == nil {
		s.Tools = []Tool{}
	}
	if s.Prompts == nil {
		s.Prompts = []Prompt{}
	}
	if s.Resources == nil {
		s.Resources = []Resource{}
	}
	if s.ResourceTemplates == nil {
		s.ResourceTemplates = []ResourceTemplate{}
	}
	sort.SliceStable(s.Tools, func(i, j int) bool { return s.Tools[i].Name < s.Tools[j].Name })
	sort.SliceStable(s.Prompts, func(i, j int) bool { return s.Prompts[i].Name < s.Prompts[j].Name })
	sort.SliceStable(s.Resources, func(i, j int) bool { return s.Resources[i].URI < s.Resources[j].URI })
	sort.SliceStable(s.ResourceTemplates, func(i, j int) bool {
		return s.ResourceTemplates[i].URITemplate < s.ResourceTemplates[j].URITemplate
	})
}

// Decode reads a snapshot. It accepts any layout of the JSON (a file edited
// by hand still reads) but no unknown field, no other format and nothing
// Check refuses. Canonical reports whether b is exactly what Encode writes.
func Decode(b []byte) (s *Snapshot, canonical bool, err error) {
	// encoding/json reads an invalid byte as U+FFFD: the snapshot would
	// name items the server does not have.
	if bad := jsonerr.FirstInvalidUTF8(b); bad >= 0 {
		return nil, false, posError(b, int64(bad), fmt.Sprintf("not valid UTF-8 (byte %#x): a snapshot is JSON, which is UTF-8", b[bad]))
	}
	var head struct {
		Format *string `json:"format"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, false, decodeError(b, fmt.Errorf("not a catalogue snapshot: %w", err), 0)
	}
	switch {
	case head.Format == nil:
		return nil, false, fmt.Errorf("not a catalogue snapshot: no %q field (expected %q)", "format", Format)
	case *head.Format != Format:
		return nil, false, fmt.Errorf("unknown catalogue format %q: this build reads %q (upgrade policyc if a newer one wrote it)", *head.Format, Format)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	s = &Snapshot{}
	if err := dec.Decode(s); err != nil {
		return nil, false, decodeError(b, err, dec.InputOffset())
	}
	if _, err := dec.Token(); err == nil {
		return nil, false, errors.New("catalogue snapshot: trailing data after the snapshot")
	}
	// A key given twice is a problem before any other: the decoder kept
	// the last value. The canonical form has none, so only a file that is
	// not canonical is searched.
	if err := s.Check(); err != nil {
		if dup := findDuplicateField(b); dup != nil {
			return nil, false, dup
		}
		return nil, false, err
	}
	// The snapshot returned is the encoded one: sorted, schemas canonical.
	c := cloneSnapshot(s)
	re, err := Encode(c)
	if err != nil {
		return nil, false, err
	}
	canonical = bytes.Equal(re, b)
	if !canonical {
		if dup := findDuplicateField(b); dup != nil {
			return nil, false, dup
		}
	}
	return c, canonical, nil
}

// PosError is a problem at a position of a snapshot file.
type PosError struct {
	Line, Col int
	Msg       string
}

func (e *PosError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg) }

// decodeError places a JSON error at its line and column in b: a syntax or
// type error where the decoder says, another (an unknown field) at offset,
// where the decoder stopped. An unknown field is named with the field of
// the format it was likely meant to be.
func decodeError(b []byte, err error, offset int64) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	msg := err.Error()
	switch {
	case errors.As(err, &se):
		offset = se.Offset - 1 // the decoder counts the offending byte as read
	case errors.As(err, &te):
		offset = te.Offset
		where := te.Field
		if p := indexedPath(b, te.Offset); p != "" {
			where = p // with the indexes: tools[3].name
		}
		if where == "" {
			where = "the snapshot"
		}
		msg = fmt.Sprintf("%s: %s where the format has %s", where, article(te.Value), jsonerr.KindOf(te.Type))
	default:
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			if name, err := strconv.Unquote(f); err == nil {
				msg = fmt.Sprintf("unknown field %q", name)
				// The decoder reports the field after reading the whole
				// value: find the key, and the fields of its object.
				if at, known := findUnknownField(b); at >= 0 {
					offset = int64(at)
					if near := suggest.Suggest(name, known); near != "" {
						msg += fmt.Sprintf("; did you mean %q?", near)
					}
				}
			}
		}
	}
	return posError(b, offset, strings.TrimPrefix(msg, "json: "))
}

// indexedPath is the path, with array indexes ("tools[3].name"), of the
// value of b that ends (a scalar) or opens (an object or an array) at
// offset, where the decoder reports a type error; "" when no value does.
func indexedPath(b []byte, offset int64) string {
	type frame struct {
		array     bool
		index     int
		key       string
		expectKey bool
	}
	var stack []frame
	done := func() { // a value of the innermost container is complete
		if n := len(stack); n > 0 {
			if stack[n-1].array {
				stack[n-1].index++
			} else {
				stack[n-1].expectKey = true
			}
		}
	}
	path := func() string {
		var p strings.Builder
		for i, f := range stack {
			switch {
			case f.array:
				fmt.Fprintf(&p, "[%d]", f.index)
			case i > 0:
				p.WriteString("." + f.key)
			default:
				p.WriteString(f.key)
			}
		}
		return p.String()
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		top := len(stack) - 1
		if top >= 0 && !stack[top].array && stack[top].expectKey {
			key, isKey := tok.(string)
			if !isKey { // the object's end
				stack = stack[:top]
				done()
				continue
			}
			stack[top].key, stack[top].expectKey = key, false
			continue
		}
		if tok == json.Delim(']') {
			stack = stack[:top]
			done()
			continue
		}
		if dec.InputOffset() == offset {
			return path()
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{expectKey: true})
		case json.Delim('['):
			stack = append(stack, frame{array: true})
		default:
			done()
		}
	}
}

// posError places msg at a byte offset of b.
func posError(b []byte, offset int64, msg string) *PosError {
	offset = min(max(offset, 0), int64(len(b)))
	line := 1 + bytes.Count(b[:offset], []byte("\n"))
	col := int(offset) - bytes.LastIndexByte(b[:offset], '\n')
	return &PosError{Line: line, Col: col, Msg: msg}
}

// walkKeys walks b along the snapshot's types, as the decoder does, and
// calls key for every key of every object, in order: obj is the struct
// type of the object (nil when the snapshot's types do not reach it),
// seen a map kept per object for key's own use, at the offset of the key's
// opening quote. key returns false to stop the walk. Input schemas, kept
// raw, are skipped. A walk stops at the first token that does not decode.
func walkKeys(b []byte, key func(obj reflect.Type, seen map[string]string, name string, at int) bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var walk func(t reflect.Type) bool
	walk = func(t reflect.Type) bool {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == reflect.TypeFor[json.RawMessage]() {
			var raw json.RawMessage
			dec.Decode(&raw)
			return true
		}
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('['):
			var elem reflect.Type
			if t != nil && t.Kind() == reflect.Slice {
				elem = t.Elem()
			}
			for dec.More() {
				if !walk(elem) {
					return false
				}
			}
			dec.Token()
		case json.Delim('{'):
			if t != nil && t.Kind() != reflect.Struct {
				t = nil
			}
			seen := map[string]string{}
			for dec.More() {
				from := dec.InputOffset()
				tok, err := dec.Token()
				name, isKey := tok.(string)
				if err != nil || !isKey {
					return false
				}
				if !key(t, seen, name, int(from)+bytes.IndexByte(b[from:], '"')) {
					return false
				}
				var ft reflect.Type
				if t != nil {
					if f, ok := jsonField(t, name); ok {
						ft = f.Type
					}
				}
				if !walk(ft) {
					return false
				}
			}
			dec.Token()
		}
		return true
	}
	walk(reflect.TypeFor[Snapshot]())
}

// findUnknownField returns the offset of the first object key that names
// no field of its object, and the fields that object has, or -1.
func findUnknownField(b []byte) (at int, known []string) {
	at = -1
	walkKeys(b, func(obj reflect.Type, _ map[string]string, name string, keyAt int) bool {
		if obj == nil {
			return true
		}
		if _, ok := jsonField(obj, name); ok {
			return true
		}
		at = keyAt
		for f := range obj.Fields() {
			if n := jsonName(f); n != "" {
				known = append(known, n)
			}
		}
		return false
	})
	return at, known
}

// findDuplicateField returns the first object with two keys for one field
// (encoding/json matches keys without regard to case, keeps the last value
// and drops the first without a word), as an error at the second key; nil
// when there is none.
func findDuplicateField(b []byte) error {
	var found error
	walkKeys(b, func(obj reflect.Type, seen map[string]string, name string, keyAt int) bool {
		if obj == nil {
			return true
		}
		f, ok := jsonField(obj, name)
		if !ok {
			return true
		}
		field := jsonName(f)
		if first, dup := seen[field]; dup {
			found = posError(b, int64(keyAt), fmt.Sprintf("%q is the second key for field %q of this object (after %q): keep one", name, field, first))
			return false
		}
		seen[field] = name
		return true
	})
	return found
}

// jsonField is the field of struct t that decodes key, as encoding/json
// matches it: the exact name, else one equal under case folding.
func jsonField(t reflect.Type, key string) (reflect.StructField, bool) {
	var folded reflect.StructField
	found := false
	for f := range t.Fields() {
		name := jsonName(f)
		if name == key {
			return f, true
		}
		if !found && strings.EqualFold(name, key) {
			folded, found = f, true
		}
	}
	return folded, found
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// article puts "a" or "an" before the decoder's name of a JSON value
// ("string", "array", "number -5").
func article(v string) string {
	if v != "" && strings.ContainsRune("aeiou", rune(v[0])) {
		return "an " + v
	}
	return "a " + v
}

func cloneSnapshot(s *Snapshot) *Snapshot {
	c := *s
	c.Tools = append([]Tool(nil), s.Tools...)
	c.Prompts = append([]Prompt(nil), s.Prompts...)
	c.Resources = append([]Resource(nil), s.Resources...)
	c.ResourceTemplates = append([]ResourceTemplate(nil), s.ResourceTemplates...)
	return &c
}

// Check validates a snapshot: the format, the server name, and that every
// item has a name (a URI for resources) that no other item of its kind has.
func (s *Snapshot) Check() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.Format != Format {
		add("format %q is not %q", s.Format, Format)
	}
	if !table.ValidName(s.Server) {
		add("server %q is not a server name (letters, digits, '.', '_' and '-', starting with a letter or digit)", s.Server)
	}
	errs = append(errs, uniqueNames("tools", "a tool without a name", s.Tools, func(t Tool) string { return t.Name })...)
	for _, t := range s.Tools {
		if len(t.InputSchema) > 0 && !json.Valid(t.InputSchema) {
			add("tool %q: input schema is not valid JSON", t.Name)
		}
		if len(t.OutputSchema) > 0 && !json.Valid(t.OutputSchema) {
			add("tool %q: output schema is not valid JSON", t.Name)
		}
	}
	errs = append(errs, uniqueNames("prompts", "a prompt without a name", s.Prompts, func(p Prompt) string { return p.Name })...)
	errs = append(errs, uniqueNames("resources", "a resource without a URI", s.Resources, func(r Resource) string { return r.URI })...)
	errs = append(errs, uniqueNames("resource_templates", "a template without a uriTemplate", s.ResourceTemplates, func(r ResourceTemplate) string { return r.URITemplate })...)
	return errors.Join(errs...)
}

// uniqueNames reports the items of a list with no name, or a name an
// earlier item of the list has.
func uniqueNames[T any](list, unnamed string, items []T, name func(T) string) []error {
	var errs []error
	seen := map[string]bool{}
	for i, it := range items {
		switch n := name(it); {
		case n == "":
			errs = append(errs, fmt.Errorf("%s[%d]: %s", list, i, unnamed))
		case seen[n]:
			errs = append(errs, fmt.Errorf("%s: %q is listed twice", list, n))
		default:
			seen[n] = true
		}
	}
	return errs
}

// Counts is a one-line summary of a snapshot, e.g. "3 tools, 1 prompt,
// 2 resources, 0 templates".
func (s *Snapshot) Counts() string {
	return strings.Join([]string{
		plural(len(s.Tools), "tool"), plural(len(s.Prompts), "prompt"),
		plural(len(s.Resources), "resource"), plural(len(s.ResourceTemplates), "template"),
	}, ", ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// ItemKeys returns where each item of a snapshot file is named, in any
// layout: for "tool\x00NAME", "prompt\x00NAME" and "resource\x00URI", the
// offset in b of the opening quote of the item's "name" (tools, prompts)
// or "uri" (resources) key; the first item of a name wins. Keys match as
// the decoder matches them. A file that does not decode yields what was
// read before the fault.
func ItemKeys(b []byte) map[string]int {
	items := map[reflect.Type][2]string{
		reflect.TypeFor[Tool]():     {table.Tool.String(), "name"},
		reflect.TypeFor[Prompt]():   {table.Prompt.String(), "name"},
		reflect.TypeFor[Resource](): {table.Resource.String(), "uri"},
	}
	out := map[string]int{}
	walkKeys(b, func(obj reflect.Type, _ map[string]string, key string, at int) bool {
		item, ok := items[obj]
		if !ok || !strings.EqualFold(key, item[1]) {
			return true
		}
		// The value follows the key's string and a colon.
		dec := json.NewDecoder(bytes.NewReader(b[at:]))
		var k string
		if dec.Decode(&k) != nil {
			return true
		}
		rest := bytes.TrimLeft(b[at+int(dec.InputOffset()):], " \t\r\n")
		var name string
		if len(rest) > 0 && rest[0] == ':' && json.NewDecoder(bytes.NewReader(rest[1:])).Decode(&name) == nil {
			if _, dup := out[item[0]+"\x00"+name]; !dup {
				out[item[0]+"\x00"+name] = at
			}
		}
		return true
	})
	return out
}
