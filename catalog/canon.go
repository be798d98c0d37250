package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolDigest is the definition digest of a listed tool: the digest of
// ToolFromMCP(t), written without the round trip through encoding/json and
// a parser that CanonicalJSON makes, since a gateway digests every tool of
// every listing. For the values the SDK decodes a listing into (maps,
// slices, strings, float64, bools) it writes the RFC 8785 form directly;
// anything else goes the long way.
func ToolDigest(t *mcp.Tool) (string, error) {
	if t == nil || !plainSchema(t.InputSchema) || !plainSchema(t.OutputSchema) {
		ct, err := ToolFromMCP(t)
		if err != nil {
			return "", err
		}
		return ct.DefinitionDigest(), nil
	}
	b := make([]byte, 0, 512)
	b = append(b, '{')
	sep := false
	key := func(k string) {
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = appendJCSString(b, k)
		b = append(b, ':')
	}
	if a := t.Annotations; a != nil {
		key("annotations")
		b = append(b, '{')
		asep := false
		hint := func(k string, v *bool) {
			if v == nil {
				return
			}
			if asep {
				b = append(b, ',')
			}
			asep = true
			b = appendJCSString(b, k)
			b = append(b, ':')
			if *v {
				b = append(b, "true"...)
			} else {
				b = append(b, "false"...)
			}
		}
		hint("destructiveHint", a.DestructiveHint)
		hint("idempotentHint", &a.IdempotentHint)
		hint("openWorldHint", a.OpenWorldHint)
		hint("readOnlyHint", &a.ReadOnlyHint)
		if a.Title != "" {
			b = append(b, `,"title":`...)
			b = appendJCSString(b, a.Title)
		}
		b = append(b, '}')
	}
	var ok bool
	if t.Description != "" {
		key("description")
		b = appendJCSString(b, t.Description)
	}
	if t.InputSchema != nil {
		key("inputSchema")
		if b, ok = appendJCS(b, t.InputSchema); !ok {
			return slowToolDigest(t)
		}
	}
	key("name")
	b = appendJCSString(b, t.Name)
	if t.OutputSchema != nil {
		key("outputSchema")
		if b, ok = appendJCS(b, t.OutputSchema); !ok {
			return slowToolDigest(t)
		}
	}
	if t.Title != "" {
		key("title")
		b = appendJCSString(b, t.Title)
	}
	b = append(b, '}')
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

func slowToolDigest(t *mcp.Tool) (string, error) {
	ct, err := ToolFromMCP(t)
	if err != nil {
		return "", err
	}
	return ct.DefinitionDigest(), nil
}

// plainSchema reports whether s is no schema or a decoded JSON object.
func plainSchema(s any) bool {
	if s == nil {
		return true
	}
	m, ok := s.(map[string]any)
	return ok && m != nil
}

// appendJCS appends the RFC 8785 form of a value as encoding/json decodes
// JSON into any; ok is false for any other value (the caller then goes
// through CanonicalJSON) and for a value encoding/json does not encode.
func appendJCS(b []byte, v any) (_ []byte, ok bool) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		if x {
			return append(b, "true"...), true
		}
		return append(b, "false"...), true
	case string:
		return appendJCSString(b, x), true
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return b, false
		}
		s, err := jcs.NumberToJSON(x)
		if err != nil {
			return b, false
		}
		return append(b, s...), true
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendJCS(b, e); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case map[string]any:
		keys := make([]string, 0, len(x))
		ascii := true
		for k := range x {
			if !utf8.ValidString(k) {
				return b, false // encoding/json rewrites it: go the long way
			}
			keys = append(keys, k)
			ascii = ascii && isASCII(k)
		}
		if ascii {
			slices.Sort(keys)
		} else {
			slices.SortFunc(keys, compareUTF16)
		}
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJCSString(b, k)
			b = append(b, ':')
			if b, ok = appendJCS(b, x[k]); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	return b, false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785
// sorts object keys.
func compareUTF16(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

// appendJCSString appends s as an RFC 8785 string: the two-character
// escapes of JSON for '"', '\\', \b, \f, \n, \r and \t, \u00XX for the other
// control characters, every other character as itself. Bytes that are not
// UTF-8 become U+FFFD, as encoding/json writes them.
func appendJCSString(b []byte, s string) []byte {
	const hexd = "0123456789abcdef"
	b = append(b, '"')
	if !utf8.ValidString(s) {
		s = validUTF8(s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20:
			b = append(b, c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&0xf])
		}
	}
	return append(b, '"')
}

// validUTF8 is s with each byte that starts no UTF-8 sequence replaced by
// U+FFFD, as encoding/json replaces them.
func validUTF8(s string) string {
	var out strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			out.WriteString("\uFFFD")
		} else {
			out.WriteString(s[i : i+n])
		}
		i += n
	}
	return out.String()
}
