package jsonerr

import (
	"bytes"
	"errors"
	"unicode/utf8"
)

// FirstInvalidUTF8 returns the offset of the first byte of b that is not part
// of valid UTF-8, or -1 when b is valid.
func FirstInvalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// LineColumn returns the 1-based line and column (in characters) of
// offset off in b.
func LineColumn(b []byte, off int) (line, col int) {
	off = min(off, len(b))
	start := bytes.LastIndexByte(b[:off], '\n') + 1
	return bytes.Count(b[:off], []byte("\n")) + 1, utf8.RuneCount(b[start:off]) + 1
}

// bom is the byte order mark an editor may put before a file's text.
var bom = []byte("\xef\xbb\xbf")

// ErrBOM is what CheckStart reports.
var ErrBOM = errors.New("the file starts with a byte order mark (U+FEFF), which JSON does not allow: an editor or a tool re-saved it; use the file as policyc wrote it")

// CheckStart returns ErrBOM when b, a JSON file, starts with a byte
// order mark, which a JSON decoder would call an invalid character.
func CheckStart(b []byte) error {
	if bytes.HasPrefix(b, bom) {
		return ErrBOM
	}
	return nil
}
