package pull

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/catalog"
)

// convertTool records a listed tool as the snapshot keeps it.
func convertTool(t *mcp.Tool) (catalog.Tool, error) {
	if t == nil {
		return catalog.Tool{}, errors.New("a null tool")
	}
	ct := catalog.Tool{Name: t.Name, Title: t.Title, Description: t.Description}
	if t.InputSchema != nil {
		raw, err := json.Marshal(t.InputSchema)
		if err != nil {
			return catalog.Tool{}, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			return catalog.Tool{}, fmt.Errorf("tool %q: inputSchema is not a JSON object", t.Name)
		}
		if ct.InputSchema, err = catalog.Canonicalize(raw); err != nil {
			return catalog.Tool{}, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
		}
	}
	if a := t.Annotations; a != nil {
		// The SDK decodes readOnlyHint and idempotentHint as plain bools, so
		// an absent hint and false read the same; both mean false in the
		// specification, and the snapshot says false.
		ct.Annotations = &catalog.Annotations{
			Title:           a.Title,
			ReadOnlyHint:    boolPtr(a.ReadOnlyHint),
			IdempotentHint:  boolPtr(a.IdempotentHint),
			DestructiveHint: copyBool(a.DestructiveHint),
			OpenWorldHint:   copyBool(a.OpenWorldHint),
		}
	}
	return ct, nil
}

func boolPtr(b bool) *bool { return &b }

func copyBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}
