package gateway

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestCanonicalJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{}`:                                      `{}`,
		` { "b" : 1 , "a" : [ true , null ] } `:   `{"a":[true,null],"b":1}`,
		`{"x":"<&>","y":1.50,"z":-0}`:             `{"x":"<&>","y":1.50,"z":-0}`,
		`{"n":{"d":4,"c":{"b":[{"z":1,"a":2}]}}}`: `{"n":{"c":{"b":[{"a":2,"z":1}]},"d":4}}`,
		`{"u":"\u00e9\ud83d\ude00"}`:              `{"u":"é😀"}`,
	} {
		got, err := CanonicalJSON([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("CanonicalJSON(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		`{"a":1,"a":2}`:   `repeat the key "a"`,
		`[1]`:             "must be a JSON object",
		`{"a":1} {"b":2}`: "after the object",
		`{"a":`:           "not valid JSON",
		strings.Repeat(`{"a":`, 200) + "1" + strings.Repeat("}", 200): "nest deeper",
	} {
		if _, err := CanonicalJSON([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CanonicalJSON(%.40s): got %v, want an error containing %q", in, err, want)
		}
	}
}

// Canonical JSON is a fixed point, and means what the input meant.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"b":[1,{"d":null,"c":"x"}],"a":true}`, `{"a":1e3,"b":"\u2028<"}`, `{"a":{"a":{"a":[]}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := CanonicalJSON(in)
		if err != nil {
			return
		}
		again, err := CanonicalJSON(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("not a fixed point: %s → %s (%v)", c, again, err)
		}
		var a, b any
		if json.Unmarshal(in, &a) != nil || json.Unmarshal(c, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("meaning changed: %s → %s", in, c)
		}
		if Fingerprint(c) != Fingerprint(again) {
			t.Fatal("fingerprint differs for equal bytes")
		}
	})
}
