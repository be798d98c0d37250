package envelope

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// scanner is a validating JSON reader for exactly what Parse needs: objects
// whose members it hands to a callback, string literals, and any other value,
// which it checks and skips. It accepts what encoding/json accepts (a fuzz
// test holds it to that) but reads a string without escapes in one
// bytes.IndexByte, so a payload of megabytes is not scanned byte by byte
// before its base64 is decoded.
type scanner struct {
	b []byte
	i int
}

// maxDepth bounds the nesting of values Parse skips.
const maxDepth = 64

func (s *scanner) errorf(format string, args ...any) error {
	if s.i >= len(s.b) {
		return malformed("unexpected end of input (truncated file?)")
	}
	return malformed("at byte %d: "+format, append([]any{s.i}, args...)...)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// eat consumes c if it is the next byte.
func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// object reads an object, calling member with each field name; member must
// read the value. With unique, a repeated field name is refused.
func (s *scanner) object(where string, unique bool, member func(name string) error) error {
	s.ws()
	if !s.eat('{') {
		if s.i >= len(s.b) {
			return s.errorf("")
		}
		return malformed("%s is not a JSON object", where)
	}
	s.ws()
	if s.eat('}') {
		return nil
	}
	var seen map[string]bool
	if unique {
		seen = map[string]bool{}
	}
	for {
		s.ws()
		lit, err := s.str("field name", true)
		if err != nil {
			return err
		}
		name := unquote(lit)
		if unique {
			if seen[name] {
				return malformed("%s: field %q appears twice", where, name)
			}
			seen[name] = true
		}
		s.ws()
		if !s.eat(':') {
			return s.errorf("expected ':' after field name %q", name)
		}
		s.ws()
		if err := member(name); err != nil {
			return err
		}
		s.ws()
		if s.eat(',') {
			continue
		}
		if s.eat('}') {
			return nil
		}
		return s.errorf("expected ',' or '}' in %s", where)
	}
}

// array reads an array, calling elem for each element; elem must read it.
func (s *scanner) array(where string, elem func(i int) error) error {
	s.ws()
	if !s.eat('[') {
		if s.i >= len(s.b) {
			return s.errorf("")
		}
		return malformed("%s is not a JSON array", where)
	}
	s.ws()
	if s.eat(']') {
		return nil
	}
	for n := 0; ; n++ {
		if err := elem(n); err != nil {
			return err
		}
		s.ws()
		if s.eat(',') {
			s.ws()
			continue
		}
		if s.eat(']') {
			return nil
		}
		return s.errorf("expected ',' or ']' in %s", where)
	}
}

// value checks and skips any JSON value.
func (s *scanner) value(depth int) error {
	if depth > maxDepth {
		return s.errorf("values nested more than %d deep", maxDepth)
	}
	s.ws()
	if s.i >= len(s.b) {
		return s.errorf("")
	}
	switch s.b[s.i] {
	case '"':
		_, err := s.str("string", true)
		return err
	case '{':
		return s.object("object", false, func(string) error { return s.value(depth + 1) })
	case '[':
		return s.array("array", func(int) error { return s.value(depth + 1) })
	}
	// A number, true, false or null: up to the next delimiter.
	j := s.i
	for j < len(s.b) && bytes.IndexByte([]byte(" \t\n\r,]}"), s.b[j]) < 0 {
		j++
	}
	if j == s.i || !json.Valid(s.b[s.i:j]) {
		return s.errorf("invalid JSON value")
	}
	s.i = j
	return nil
}

// str reads a string literal, the value of where, and returns it, quotes
// included. With full it checks the literal as JSON requires (no control
// characters, valid escapes); without, it only finds the end, and the
// caller must check the content (base64 decoding refuses every byte a JSON
// string could not hold unescaped).
func (s *scanner) str(where string, full bool) ([]byte, error) {
	start := s.i
	if !s.eat('"') {
		return nil, s.errorf("%s is not a JSON string", where)
	}
	k := bytes.IndexByte(s.b[s.i:], '"')
	if k < 0 {
		s.i = len(s.b)
		return nil, s.errorf("")
	}
	if seg := s.b[s.i : s.i+k]; bytes.IndexByte(seg, '\\') < 0 {
		if full {
			for _, c := range seg {
				if c < 0x20 {
					return nil, s.errorf("control character in a string")
				}
			}
		}
		s.i += k + 1
		return s.b[start:s.i], nil
	}
	// Escapes: walk the string byte by byte.
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			lit := s.b[start:s.i]
			if full && !json.Valid(lit) {
				s.i = start
				return nil, s.errorf("invalid string")
			}
			return lit, nil
		case c == '\\':
			s.i += 2
		case c < 0x20:
			return nil, s.errorf("control character in a string")
		default:
			s.i++
		}
	}
	s.i = len(s.b)
	return nil, s.errorf("")
}

// unquote returns the value of a string literal that str(where, true)
// accepted.
func unquote(lit []byte) string {
	if bytes.IndexByte(lit, '\\') < 0 && utf8.Valid(lit) {
		return string(lit[1 : len(lit)-1])
	}
	var v string
	// str has validated the literal, so this cannot fail.
	_ = json.Unmarshal(lit, &v)
	return v
}
