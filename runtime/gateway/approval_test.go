package gateway

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
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
		// Numbers are compared as written: a canonical form keeps them so,
		// 1e700 too, which no float64 holds.
		a, errIn := decodeNumbers(in)
		b, errOut := decodeNumbers(c)
		if errIn != nil || errOut != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("meaning changed: %s → %s (%v, %v)", in, c, errIn, errOut)
		}
		if Fingerprint(c) != Fingerprint(again) {
			t.Fatal("fingerprint differs for equal bytes")
		}
	})
}

// decodeNumbers decodes a JSON value with its numbers as json.Number.
func decodeNumbers(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// Every held call that does not run is told why, with its approval request
// and the instruction not to route around it, whatever its verdict: a call
// cancelled or whose session ended before a decision included.
func TestHeldText(t *testing.T) {
	v := Verdict{RequestID: "apr-7", URL: "http://admin/approvals/apr-7", By: "carol", Reason: "no"}
	for _, verdict := range []string{"denied", "timeout", "cancelled", "ended", "duplicate", "not_run"} {
		got := heldText("github__merge_pull_request", verdict, time.Minute, v, nil)
		if !strings.Contains(got, "(approval request apr-7)") || !strings.Contains(got, "Do not retry it") || strings.Contains(got, "<nil>") {
			t.Errorf("%s: %q does not name the request and say not to retry", verdict, got)
		}
		if verdict != "duplicate" && !strings.Contains(got, dontRouteAround) {
			t.Errorf("%s: %q does not tell the agent not to route around the refusal", verdict, got)
		}
	}
	for verdict, want := range map[string]string{
		"cancelled": "was cancelled before anyone decided, so it did not run",
		"ended":     "its session ended before anyone decided, so it did not run",
	} {
		if got := heldText("github__merge_pull_request", verdict, time.Minute, v, nil); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want it to say %q", verdict, got, want)
		}
	}
}
