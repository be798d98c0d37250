package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gowebpki/jcs"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A definition digest pins what a server offers under a name: "sha256:"
// and the hex SHA-256 of the item's snapshot entry (a Tool, Prompt or
// Resource as this package encodes it) in the JSON Canonicalization Scheme
// of RFC 8785: object keys sorted by their UTF-16 code units, no white
// space, numbers in their shortest ECMAScript form, strings with the
// minimal escapes. Key order, white space and number spelling from a server
// therefore never change a digest; a rename does, since the name is part of
// the entry. The snapshot, the table's pins and the gateway all compute it
// here.

// DefinitionDigest is the tool's definition digest: name, title,
// description, input and output schemas and annotations.
func (t *Tool) DefinitionDigest() string { return digestOf(t) }

// DefinitionDigest is the prompt's definition digest: name, title,
// description and arguments.
func (p *Prompt) DefinitionDigest() string { return digestOf(p) }

// DefinitionDigest is the resource's definition digest: URI, name, title,
// description and MIME type.
func (r *Resource) DefinitionDigest() string { return digestOf(r) }

// DefinitionDigest is the template's definition digest: URI template,
// name, title, description and MIME type.
func (r *ResourceTemplate) DefinitionDigest() string { return digestOf(r) }

// digestOf is the definition digest of v, an item of a snapshot; "" if it
// does not encode (a schema that is not JSON, which Check refuses).
func digestOf(v any) string {
	b, err := CanonicalJSON(v)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// CanonicalJSON is v encoded by encoding/json, then put in the RFC 8785
// canonical form.
func CanonicalJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(b)
}

// ToolFromMCP records a listed tool as a snapshot keeps it. The SDK
// decodes readOnlyHint and idempotentHint as plain bools, so an absent hint
// and false read the same; both mean false in the specification, and the
// snapshot says false. Schemas are kept as the SDK encodes them; Encode
// canonicalizes them.
func ToolFromMCP(t *mcp.Tool) (Tool, error) {
	if t == nil {
		return Tool{}, errors.New("a null tool")
	}
	ct := Tool{Name: t.Name, Title: t.Title, Description: t.Description}
	var err error
	if ct.InputSchema, err = schemaObject(t.Name, "input", t.InputSchema); err != nil {
		return Tool{}, err
	}
	if ct.OutputSchema, err = schemaObject(t.Name, "output", t.OutputSchema); err != nil {
		return Tool{}, err
	}
	if a := t.Annotations; a != nil {
		ct.Annotations = &Annotations{
			Title:           a.Title,
			ReadOnlyHint:    new(a.ReadOnlyHint),
			IdempotentHint:  new(a.IdempotentHint),
			DestructiveHint: copyBool(a.DestructiveHint),
			OpenWorldHint:   copyBool(a.OpenWorldHint),
		}
	}
	return ct, nil
}

// schemaObject is tool's input or output schema s as JSON; nil for none.
// It must be an object.
func schemaObject(tool, which string, s any) (json.RawMessage, error) {
	if s == nil {
		return nil, nil
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("tool %q: %s schema: %w", tool, which, err)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fmt.Errorf("tool %q: %sSchema is not a JSON object", tool, which)
	}
	return raw, nil
}

// PromptFromMCP records a listed prompt as a snapshot keeps it.
func PromptFromMCP(x *mcp.Prompt) (Prompt, error) {
	if x == nil {
		return Prompt{}, errors.New("a null prompt")
	}
	cp := Prompt{Name: x.Name, Title: x.Title, Description: x.Description}
	for _, a := range x.Arguments {
		if a == nil {
			return Prompt{}, fmt.Errorf("prompt %q has a null argument", x.Name)
		}
		cp.Arguments = append(cp.Arguments, PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required})
	}
	return cp, nil
}

// ResourceFromMCP records a listed resource as a snapshot keeps it.
func ResourceFromMCP(x *mcp.Resource) Resource {
	return Resource{URI: x.URI, Name: x.Name, Title: x.Title, Description: x.Description, MIMEType: x.MIMEType}
}

func copyBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	return new(*b)
}
