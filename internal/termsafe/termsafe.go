// Package termsafe neutralises text that others supplied before a person
// reads it in a terminal, a web page or a chat message: every character
// that could steer a terminal, break a line, reorder what is shown or
// hide itself is replaced by a visible escape, so the reader sees that
// something was there and what.
//
// Replaced, as \xNN for bytes below 0x80 and invalid UTF-8 and as \uXXXX
// (\UXXXXXXXX past U+FFFF) otherwise:
//   - C0 controls (ESC, CR, LF, TAB, BEL, …), DEL and C1 controls
//     (U+0080–U+009F, which some terminals obey as 8-bit CSI and OSC);
//   - format characters (Unicode category Cf): BiDi embeddings, overrides
//     and isolates (U+202A–U+202E, U+2066–U+2069), marks (U+200E,
//     U+200F, U+061C), zero-width characters (U+200B–U+200D, U+2060,
//     U+FEFF), the soft hyphen, tag characters, interlinear annotations;
//   - other default-ignorable characters, which render as nothing: the
//     Hangul fillers (U+115F, U+1160, U+3164, U+FFA0), the combining
//     grapheme joiner (U+034F) and the like; variation selectors stay,
//     since emoji need them and they hide nothing;
//   - the line and paragraph separators (U+2028, U+2029);
//   - private-use and unassigned code points, whose look depends on the
//     font (or is none).
//
// A backslash is left as it is: text that spells an escape out ("\x1b")
// shows as those four characters, which hide nothing.
package termsafe

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Unsafe reports whether r is a character String replaces.
func Unsafe(r rune) bool {
	switch {
	case r < 0x20 || r == 0x7f:
		return true
	case r < 0x7f:
		return false
	case r <= 0x9f:
		return true
	}
	if unicode.IsOneOf(hidden, r) && !unicode.Is(unicode.Variation_Selector, r) {
		return true
	}
	// Unassigned (as of the Unicode version Go knows), a surrogate or a
	// noncharacter: in no category a font can draw.
	return !unicode.IsOneOf(assigned, r)
}

var (
	hidden   = []*unicode.RangeTable{unicode.Cf, unicode.Co, unicode.Zl, unicode.Zp, unicode.Other_Default_Ignorable_Code_Point}
	assigned = []*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Zs}
)

// String returns s with every character Unsafe reports, and every byte
// that is not UTF-8, replaced by its escape. Text with none is returned as
// it is, without copying.
func String(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			writeByteEscape(&b, s[i])
		case Unsafe(r):
			writeRuneEscape(&b, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// firstUnsafe returns the offset of the first byte of s that String
// replaces (or starts a character it replaces), or -1.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || Unsafe(r) {
			return i
		}
		i += size
	}
	return -1
}

const hexDigits = "0123456789abcdef"

func writeByteEscape(b *strings.Builder, c byte) {
	b.WriteString(`\x`)
	b.WriteByte(hexDigits[c>>4])
	b.WriteByte(hexDigits[c&0xf])
}

func writeRuneEscape(b *strings.Builder, r rune) {
	switch {
	case r < 0x80:
		writeByteEscape(b, byte(r))
		return
	case r <= 0xffff:
		b.WriteString(`\u`)
		writeHex(b, uint32(r), 4)
	default:
		b.WriteString(`\U`)
		writeHex(b, uint32(r), 8)
	}
}

func writeHex(b *strings.Builder, v uint32, digits int) {
	s := strconv.FormatUint(uint64(v), 16)
	for range digits - len(s) {
		b.WriteByte('0')
	}
	b.WriteString(s)
}

// JSON returns b, JSON as encoding/json writes it (valid UTF-8, with C0
// controls inside strings already escaped), with every other character
// Unsafe reports written as a JSON \u escape: the same JSON values, in
// bytes that are safe to print to a terminal. b is returned as it is when
// there is none.
func JSON(b []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf && c != 0x7f {
			// Outside strings encoding/json writes only printable ASCII
			// and the whitespace of its indentation; inside them it has
			// escaped the C0 controls.
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if c != 0x7f && !(r == utf8.RuneError && size == 1) && !Unsafe(r) {
			i += size
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(b)+16)
		}
		out = append(out, b[last:i]...)
		if r == utf8.RuneError && size == 1 {
			r = utf8.RuneError // as encoding/json writes invalid UTF-8
		}
		out = appendJSONEscape(out, r)
		i += size
		last = i
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

func appendJSONEscape(out []byte, r rune) []byte {
	if r > 0xffff {
		r -= 0x10000
		out = appendU(out, 0xd800+uint32(r>>10))
		return appendU(out, 0xdc00+uint32(r&0x3ff))
	}
	return appendU(out, uint32(r))
}

func appendU(out []byte, v uint32) []byte {
	return append(out, '\\', 'u', hexDigits[v>>12&0xf], hexDigits[v>>8&0xf], hexDigits[v>>4&0xf], hexDigits[v&0xf])
}
