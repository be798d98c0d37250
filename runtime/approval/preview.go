package approval

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/policyc/policyc/internal/termsafe"
)

// Preview limits: what an approver sees of a held call's arguments.
const (
	// PreviewChars is how many characters of a string value (or a key) the
	// preview keeps.
	PreviewChars = 80
	// ShortKeyBytes bounds what a key's name takes in the preview's
	// encoding where the key's value is NotShown: so that the names of
	// the first MinNames keys always fit, however they are written.
	ShortKeyBytes = 24
	// MinNames is how many keys' names a preview always shows, when the
	// arguments have that many.
	MinNames = 33
	// MaxPreviewBytes bounds the preview's JSON encoding.
	MaxPreviewBytes = 2048
)

// Preview is the safe view of a held call's arguments: top-level keys
// only, strings cut at PreviewChars characters, arrays and objects shown as
// a shape hint, at most MaxPreviewBytes in all, the keys' names first:
// past the budget values are NotShown, then keys counted in Omitted. The arguments themselves
// are never stored; a preview is all that is kept of them.
type Preview struct {
	Fields []Field `json:"fields"`
	// Omitted counts the keys left out to stay within MaxPreviewBytes.
	Omitted int `json:"omitted,omitempty"`
}

// Incomplete tells whether the preview leaves something out: a key
// omitted, or a value NotShown. Where it does, an approver is told to
// approve only a call they know.
func (p *Preview) Incomplete() bool {
	if p.Omitted > 0 {
		return true
	}
	for _, f := range p.Fields {
		if f.Value == NotShown {
			return true
		}
	}
	return false
}

// IncompleteNote is what an approver is told of an incomplete preview.
const IncompleteNote = "This preview is incomplete: the arguments have more keys, or longer values, than it can show. Approve only if you know what this call does without them."

// Field is one top-level argument as the approver sees it.
type Field struct {
	Key string `json:"key"`
	// Value is a quoted (and maybe cut) string, a number, true, false,
	// null, or a shape hint such as "[array of 3]" or "{object with 2
	// keys}".
	Value string `json:"value"`
}

// NewPreview returns the preview of arguments, a JSON object. It reports
// false when args is not one.
func NewPreview(args []byte) (*Preview, bool) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return nil, false
	}
	keys := slices.Sorted(maps.Keys(obj))
	p := &Preview{Fields: []Field{}}
	// The envelope {"fields":[],"omitted":N} takes at most 40 bytes.
	used, budget := 0, MaxPreviewBytes-40
	// Names come before values: a key's value is shown only while every
	// key after it still fits, its value NotShown (and its name cut at
	// ShortKeyBytes) where that is shorter, so that arguments sent to
	// crowd the preview cannot push another key's name out of it.
	// least[i] is what keys[i:] take at the least.
	type sized struct {
		f Field
		n int
	}
	size := func(f Field) sized { b, _ := json.Marshal(f); return sized{f, len(b) + 1} }
	// No more keys than fit at the smallest field's size can be shown:
	// only they are measured. (Measuring the rest changes nothing: n
	// smallest fields already overrun the budget.)
	n := min(len(keys), budget/size(Field{}).n+1)
	full, short := make([]sized, n), make([]sized, n)
	least := make([]int, n+1)
	for i := n - 1; i >= 0; i-- {
		full[i] = size(Field{Key: name(keys[i]), Value: previewValue(obj[keys[i]])})
		short[i] = size(Field{Key: shortName(keys[i]), Value: NotShown})
		if full[i].n <= short[i].n {
			short[i] = full[i]
		}
		least[i] = least[i+1] + short[i].n
	}
	for i := range n {
		f := full[i]
		if used+f.n+least[i+1] > budget {
			f = short[i]
		}
		if used+f.n > budget {
			break
		}
		used += f.n
		p.Fields = append(p.Fields, f.f)
	}
	p.Omitted = len(keys) - len(p.Fields)
	return p, true
}

// NotShown is the value of a key whose value did not fit in the preview.
const NotShown = "(not shown)"

func previewValue(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "(unreadable string)"
		}
		n := utf8.RuneCountInString(s)
		if n <= PreviewChars {
			return strconv.Quote(s)
		}
		return cut(s, `"`, PreviewChars) + "… (" + strconv.Itoa(n) + " characters)"
	case '[':
		var a []json.RawMessage
		if json.Unmarshal(raw, &a) != nil {
			return "[array]"
		}
		switch len(a) {
		case 0:
			return "[empty array]"
		case 1:
			return "[array of 1]"
		}
		return "[array of " + strconv.Itoa(len(a)) + "]"
	case '{':
		var o map[string]json.RawMessage
		if json.Unmarshal(raw, &o) != nil {
			return "{object}"
		}
		switch len(o) {
		case 0:
			return "{empty object}"
		case 1:
			return "{object with 1 key}"
		}
		return "{object with " + strconv.Itoa(len(o)) + " keys}"
	}
	// A number, true, false or null, as written: numbers may be long.
	s := string(raw)
	if utf8.RuneCountInString(s) > PreviewChars {
		return cut(s, "", PreviewChars) + "… (" + strconv.Itoa(len(s)) + " characters)"
	}
	return s
}

// cut returns the first max characters of s with every character that is
// not printable (controls, bidirectional overrides, invalid UTF-8)
// escaped, so what the approver reads is what the text holds. quote, when
// set, wraps the result.
func cut(s, quote string, max int) string {
	if utf8.RuneCountInString(s) > max {
		i, n := 0, 0
		for i < len(s) && n < max {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			n++
		}
		s = s[:i]
	}
	q := strconv.Quote(s)
	return quote + q[1:len(q)-1] + quote
}

// name returns a key's name as the preview shows it with its value: cut
// at PreviewChars characters, ending in "…" when it was cut.
func name(key string) string {
	shown := cut(key, "", PreviewChars)
	if utf8.RuneCountInString(key) > PreviewChars {
		shown += "…"
	}
	return shown
}

// shortName returns a key's name as the preview shows it beside NotShown:
// as many of its first characters, escaped, as take at most ShortKeyBytes
// in the preview's JSON encoding (an escaped character takes up to 7),
// ending in "…" when it was cut.
func shortName(key string) string {
	var b strings.Builder
	for used, i := 0, 0; i < len(key); {
		_, n := utf8.DecodeRuneInString(key[i:])
		shown := cut(key[i:i+n], "", 1)
		enc, _ := json.Marshal(shown)
		if used += len(enc) - 2; used > ShortKeyBytes {
			return b.String() + "…"
		}
		b.WriteString(shown)
		i += n
	}
	return b.String()
}

// Neutral returns r as it may be shown to an approver: every text field,
// which an agent (the client's name, the session), an upstream (tool and
// server names, the consent URI), another approver (a reason) or an error
// (a delivery's, why a call did not run) may have written, passed through
// termsafe.String, so no control character, BiDi override or invisible
// character reaches a terminal, the page or a chat message as itself.
// The approvals page, the webhook deliveries and 'policyc approvals' show
// requests through it; the admin API answers the values as they are.
func Neutral(r Request) Request {
	s := termsafe.String
	r = r.clone()
	r.ID, r.Kind, r.Status = s(r.ID), Kind(s(string(r.Kind))), Status(s(string(r.Status)))
	r.Principal, r.Server, r.Tool, r.URI = s(r.Principal), s(r.Server), s(r.Tool), s(r.URI)
	r.Fingerprint, r.Origin, r.Channel = s(r.Fingerprint), s(r.Origin), s(r.Channel)
	r.Client, r.Session, r.TableDigest = s(r.Client), s(r.Session), s(r.TableDigest)
	r.End, r.Ran = s(r.End), s(r.Ran)
	if p := r.Preview; p != nil {
		n := &Preview{Fields: make([]Field, len(p.Fields)), Omitted: p.Omitted}
		for i, f := range p.Fields {
			n.Fields[i] = Field{Key: s(f.Key), Value: s(f.Value)}
		}
		r.Preview = n
	}
	if d := r.Delivery; d != nil {
		d.State, d.Error = s(d.State), s(d.Error)
	}
	if d := r.Decision; d != nil {
		d.Verdict, d.For, d.By, d.From, d.Reason = s(d.Verdict), s(d.For), s(d.By), s(d.From), s(d.Reason)
		if v := d.Revoked; v != nil {
			v.By, v.From = s(v.By), s(v.From)
		}
	}
	return r
}
