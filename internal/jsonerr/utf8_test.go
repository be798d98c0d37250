package jsonerr

import "testing"

func TestFirstInvalidUTF8(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", -1}, {"plain", -1}, {"é😀", -1},
		{"\xff", 0}, {"ab\xffc", 2}, {"é\xe2\x82", 2}, {"a\xed\xa0\x80", 1}, // a truncated rune, a surrogate
	} {
		if got := FirstInvalidUTF8([]byte(tc.in)); got != tc.want {
			t.Errorf("FirstInvalidUTF8(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestLineColumn(t *testing.T) {
	b := []byte("ab\né😀x\n\xff")
	for _, tc := range []struct{ off, line, col int }{
		{0, 1, 1}, {2, 1, 3}, {3, 2, 1}, {9, 2, 3}, {10, 2, 4}, {11, 3, 1}, {99, 3, 2},
	} {
		if l, c := LineColumn(b, tc.off); l != tc.line || c != tc.col {
			t.Errorf("LineColumn(%d) = %d:%d, want %d:%d", tc.off, l, c, tc.line, tc.col)
		}
	}
}
