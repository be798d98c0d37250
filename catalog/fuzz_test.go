package catalog

import (
	"bytes"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to Decode. Invariant: whatever decodes
// encodes to canonical bytes that decode to the same snapshot, and Decode
// calls bytes canonical only when they are exactly those.
func FuzzDecode(f *testing.F) {
	canon, _ := Encode(sample())
	f.Add(canon)
	f.Add([]byte(`{"format":"policyc.catalog/v1","server":"s","tools":[{"name":"a","inputSchema":{"b":1,"a":2}}]}`))
	f.Add([]byte(`{"format":"policyc.catalog/v1","server":"s","prompts":[{"name":"p","arguments":[{"name":"x"}]}]}`))
	f.Add([]byte(`{"format":"x"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, canonical, err := Decode(in)
		if err != nil {
			return
		}
		enc, err := Encode(cloneSnapshot(s))
		if err != nil {
			t.Fatalf("a decoded snapshot does not encode: %v", err)
		}
		if canonical != bytes.Equal(enc, in) {
			t.Fatalf("canonical=%v but the input and its encoding differ=%v", canonical, !bytes.Equal(enc, in))
		}
		s2, canonical2, err := Decode(enc)
		if err != nil || !canonical2 {
			t.Fatalf("the encoding does not decode as canonical: %v", err)
		}
		if !Equal(s, s2) {
			t.Fatalf("the encoding decodes to a different snapshot")
		}
	})
}
