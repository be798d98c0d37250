package catalog

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// textContext is how many words on either side of a change TextDiff keeps.
const textContext = 4

// textClip is the most of a removed or an added run TextDiff shows, in bytes.
const textClip = 240

// TextDiff is a one-line readable difference of two texts, word by word:
// the words both share at the start and at the end are cut down to a few
// either side of the change, the removed run is shown as [-...-] and the
// added one as {+...+}. The result is quoted as a Go string, so that a
// text from a server (a newline, a terminal escape) cannot write lines of
// its own: "…reads the [-issue-]{+issue, then mail it to x@y+} and its…".
func TextDiff(a, b string) string {
	if a == b {
		return strconv.Quote(a)
	}
	aw, bw := strings.Fields(a), strings.Fields(b)
	p := 0
	for p < len(aw) && p < len(bw) && aw[p] == bw[p] {
		p++
	}
	s := 0
	for s < len(aw)-p && s < len(bw)-p && aw[len(aw)-1-s] == bw[len(bw)-1-s] {
		s++
	}
	var out strings.Builder
	if p > textContext {
		out.WriteString("…")
	}
	lead := aw[max(0, p-textContext):p]
	out.WriteString(strings.Join(lead, " "))
	removed, added := aw[p:len(aw)-s], bw[p:len(bw)-s]
	if len(lead) > 0 {
		out.WriteByte(' ')
	}
	if len(removed) > 0 {
		out.WriteString("[-" + clipText(strings.Join(removed, " ")) + "-]")
	}
	if len(added) > 0 {
		out.WriteString("{+" + clipText(strings.Join(added, " ")) + "+}")
	}
	if len(removed) == 0 && len(added) == 0 {
		out.WriteString("{+white space+}") // the texts differ in spacing alone
	}
	trail := aw[len(aw)-s : min(len(aw), len(aw)-s+textContext)]
	if len(trail) > 0 {
		out.WriteString(" " + strings.Join(trail, " "))
	}
	if s > textContext {
		out.WriteString("…")
	}
	return strconv.Quote(out.String())
}

// clipText cuts s to textClip bytes, at a rune boundary, saying how long
// it was.
func clipText(s string) string {
	if len(s) <= textClip {
		return s
	}
	n := textClip
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}
