// Package clip shortens a string from the user's input for a message: a
// key, a pattern or a name can be of any length (a megabyte key is valid
// CUE), and a message that quotes it in full buries what it says. A string
// of up to Max bytes is shown whole; a longer one by its first Keep bytes
// (cut at a rune boundary), "…" and its length.
package clip

import (
	"strconv"
	"unicode/utf8"
)

const (
	// Max is the longest string shown whole, in bytes.
	Max = 80
	// Keep is how much of a longer string is shown, in bytes.
	Keep = 60
)

// Quote is strconv.Quote(s) for a string of up to Max bytes, and for a
// longer one the quoted start of it followed by "… (N bytes)":
// "aaaa…"… (4000 bytes).
func Quote(s string) string {
	if len(s) <= Max {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:cut(s)]) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// String is s when it is of up to Max bytes, else its start followed by
// "… (N bytes)", for a string shown without quotes (a key in a key path).
func String(s string) string {
	if len(s) <= Max {
		return s
	}
	return s[:cut(s)] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// cut is the length of the start of s that is shown: Keep bytes, less the
// bytes of a rune that would be cut (at most utf8.UTFMax-1 of them: in
// input that is not UTF-8, bytes that start no rune are cut anywhere, and
// strconv.Quote escapes them).
func cut(s string) int {
	n := Keep
	for n > Keep-utf8.UTFMax+1 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}
