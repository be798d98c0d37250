package gateway

import (
	"bufio"
	"strings"
	"testing"
)

// An over-limit line is answered with no id when the id the scan of its
// start would read is not the message's: a number the prefix's end cuts
// (12 of 1234, the id of another call perhaps), or an id a later member
// within the prefix replaces. FuzzOverlongLineID found both.
func TestOverlongLineIDWholeAndLast(t *testing.T) {
	pad := func(n int) string { return strings.Repeat(" ", n) }
	tail := `"jsonrpc":"2.0","method":"tools/call","params":{"x":"` + strings.Repeat("y", MaxMessageBytes) + `"}}`
	for _, tc := range []struct{ line, want string }{
		// The id's digits straddle the end of the kept prefix.
		{`{` + pad(idPrefixBytes-len(`{"id":12`)) + `"id":1234,` + tail, `{"jsonrpc":"2.0","id":null,`},
		// The same id whole, a byte before the end, is read.
		{`{` + pad(idPrefixBytes-len(`{"id":1234,`)) + `"id":1234,` + tail, `{"jsonrpc":"2.0","id":1234,`},
		// Of repeated members the last counts, as for any other line.
		{`{"id":1,"id":2,` + tail, `{"jsonrpc":"2.0","id":2,`},
		{`{"id":1,"id":"two",` + tail, `{"jsonrpc":"2.0","id":"two",`},
	} {
		line, tooLong, err := readLine(bufio.NewReader(strings.NewReader(tc.line + "\n")))
		if err != nil || !tooLong {
			t.Fatalf("readLine: tooLong %v, err %v", tooLong, err)
		}
		_, _, reply := parseLine(line, tooLong)
		if !strings.HasPrefix(string(reply), tc.want) {
			t.Errorf("%.40q…: got %s, want prefix %s", tc.line, reply, tc.want)
		}
	}
}
