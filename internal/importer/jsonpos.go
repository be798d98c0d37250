package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/policyc/policyc/internal/jsonerr"
)

// jsonNode is a JSON value with the position it starts at, so that import
// findings can point at the rule they are about.
type jsonNode struct {
	// kind is one of "object", "array", "string", "number", "boolean",
	// "null".
	kind  string
	pos   Pos
	str   string
	keys  []jsonMember
	items []*jsonNode
}

type jsonMember struct {
	name string
	pos  Pos
	val  *jsonNode
}

func (n *jsonNode) describe() string {
	switch n.kind {
	case "string":
		return fmt.Sprintf("the string %q", n.str)
	case "object":
		return "an object"
	case "array":
		return "an array"
	}
	return "a " + n.kind
}

// jsonError is a JSON problem at a position.
type jsonError struct {
	pos Pos
	msg string
}

func (e *jsonError) Error() string { return e.pos.String() + ": " + e.msg }

// parseJSON reads one JSON value with positions. Duplicate object keys are
// an error: readers disagree on which one wins.
func parseJSON(file string, data []byte) (*jsonNode, error) {
	p := &jsonParser{file: file, data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	p.dec.UseNumber()
	for i, c := range data {
		if c == '\n' {
			p.lines = append(p.lines, i+1)
		}
	}
	// JSON is UTF-8; a decoder would put U+FFFD for each bad byte, and the
	// rule it is in would be carried over changed.
	if bad := jsonerr.FirstInvalidUTF8(data); bad >= 0 {
		return nil, &jsonError{p.at(bad), "not valid UTF-8 here: JSON text is UTF-8; save the file as UTF-8"}
	}
	n, err := p.value()
	if err != nil {
		return nil, err
	}
	if _, err := p.dec.Token(); err != io.EOF {
		return nil, p.errorf("trailing data after the JSON value")
	}
	return n, nil
}

type jsonParser struct {
	file  string
	data  []byte
	dec   *json.Decoder
	lines []int // offsets at which lines 2, 3, ... start
}

// next reads a token and the position it starts at.
func (p *jsonParser) next() (json.Token, Pos, error) {
	off := int(p.dec.InputOffset())
	for off < len(p.data) {
		c := p.data[off]
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != ',' && c != ':' {
			break
		}
		off++
	}
	tok, err := p.dec.Token()
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			// A token decoder's offsets are not where the bad byte is;
			// decoding the whole file again says exactly: after Offset
			// bytes, so the byte before is the one at fault.
			var v any
			if uerr := json.Unmarshal(p.data, &v); errors.As(uerr, &se) {
				return nil, Pos{}, &jsonError{p.at(max(int(se.Offset)-1, 0)), "not valid JSON: " + se.Error()}
			}
			return nil, Pos{}, &jsonError{p.at(int(se.Offset)), "not valid JSON: " + err.Error()}
		}
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, Pos{}, &jsonError{p.at(len(p.data)), "not valid JSON: unexpected end of the file"}
		}
		return nil, Pos{}, &jsonError{p.at(off), "not valid JSON: " + err.Error()}
	}
	return tok, p.at(off), nil
}

func (p *jsonParser) at(off int) Pos {
	line, start := 1, 0
	for i, s := range p.lines {
		if s > off {
			break
		}
		line, start = i+2, s
	}
	if off > len(p.data) {
		off = len(p.data)
	}
	return Pos{File: p.file, Line: line, Column: utf8.RuneCount(p.data[start:off]) + 1}
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return &jsonError{p.at(int(p.dec.InputOffset())), fmt.Sprintf(format, args...)}
}

func (p *jsonParser) value() (*jsonNode, error) {
	tok, pos, err := p.next()
	if err != nil {
		return nil, err
	}
	return p.valueFrom(tok, pos)
}

func (p *jsonParser) valueFrom(tok json.Token, pos Pos) (*jsonNode, error) {
	n := &jsonNode{pos: pos}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n.kind = "object"
			seen := map[string]Pos{}
			for p.dec.More() {
				ktok, kpos, err := p.next()
				if err != nil {
					return nil, err
				}
				name, _ := ktok.(string)
				if prev, dup := seen[name]; dup {
					return nil, &jsonError{kpos, fmt.Sprintf("key %q appears twice (first at %s)", name, prev)}
				}
				seen[name] = kpos
				v, err := p.value()
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, jsonMember{name: name, pos: kpos, val: v})
			}
		case '[':
			n.kind = "array"
			for p.dec.More() {
				v, err := p.value()
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, v)
			}
		}
		if _, _, err := p.next(); err != nil { // the closing delimiter
			return nil, err
		}
	case string:
		n.kind, n.str = "string", t
	case json.Number:
		n.kind, n.str = "number", t.String()
	case bool:
		n.kind = "boolean"
	case nil:
		n.kind = "null"
	}
	return n, nil
}
