package approval

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPreview(t *testing.T) {
	long := strings.Repeat("é", 100)
	p, ok := NewPreview([]byte(fmt.Sprintf(`{"b":%q,"a":1.50,"c":[1,2,3],"d":{"x":{"y":1}},"e":null,"f":true,"g":"line\nbreak\u202e","h":[],"i":{},"j":"short"}`, long)))
	if !ok {
		t.Fatal("not a preview")
	}
	want := []Field{
		{"a", "1.50"},
		{"b", `"` + strings.Repeat("é", 80) + `"… (100 characters)`},
		{"c", "[array of 3]"},
		{"d", "{object with 1 key}"},
		{"e", "null"},
		{"f", "true"},
		{"g", `"line\nbreak\u202e"`},
		{"h", "[empty array]"},
		{"i", "{empty object}"},
		{"j", `"short"`},
	}
	if len(p.Fields) != len(want) || p.Omitted != 0 {
		t.Fatalf("got %+v", p)
	}
	for i, f := range p.Fields {
		if f != want[i] {
			t.Errorf("field %d: got %+v, want %+v", i, f, want[i])
		}
	}
	for _, bad := range []string{`[]`, `"s"`, `1`, `null`, `{`, ``} {
		if _, ok := NewPreview([]byte(bad)); ok {
			t.Errorf("%q made a preview", bad)
		}
	}
}

// Many keys, long keys: the preview stops at 2 KB and counts what it left
// out.
func TestPreviewBound(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < 200; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%q:%q", fmt.Sprintf("key-%03d-%s", i, strings.Repeat("k", 100)), strings.Repeat("v", 200))
	}
	b.WriteString("}")
	p, ok := NewPreview([]byte(b.String()))
	if !ok {
		t.Fatal("no preview")
	}
	enc, _ := json.Marshal(p)
	if len(enc) > MaxPreviewBytes {
		t.Fatalf("preview is %d bytes", len(enc))
	}
	if p.Omitted == 0 || len(p.Fields)+p.Omitted != 200 {
		t.Fatalf("%d fields shown, %d omitted", len(p.Fields), p.Omitted)
	}
	if k := p.Fields[0].Key; utf8.RuneCountInString(k) != PreviewChars {
		t.Fatalf("key not cut: %q", k)
	}
}

// Whatever the arguments, the preview is at most 2 KB, shows top-level
// keys only, never more than 80 characters of a string, and nothing of a
// nested value.
func FuzzPreview(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"b"}`, `{"a":[{"secret":"s"}],"b":{"c":"d"}}`, `{"x":"` + strings.Repeat("y", 300) + `"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var obj map[string]any
		if json.Unmarshal(in, &obj) != nil || obj == nil {
			if _, ok := NewPreview(in); ok && !json.Valid(in) {
				t.Fatalf("preview of invalid JSON %q", in)
			}
			return
		}
		p, ok := NewPreview(in)
		if !ok {
			t.Fatalf("no preview of an object: %q", in)
		}
		enc, _ := json.Marshal(p)
		if len(enc) > MaxPreviewBytes {
			t.Fatalf("preview is %d bytes", len(enc))
		}
		if len(p.Fields)+p.Omitted != len(obj) {
			t.Fatalf("%d fields + %d omitted for %d keys", len(p.Fields), p.Omitted, len(obj))
		}
		for _, fd := range p.Fields {
			switch fd.Value[0] {
			case '[':
				if !strings.HasPrefix(fd.Value, "[array") && !strings.HasPrefix(fd.Value, "[empty") {
					t.Fatalf("array shown as %q", fd.Value)
				}
			case '{':
				if !strings.HasPrefix(fd.Value, "{object") && !strings.HasPrefix(fd.Value, "{empty") {
					t.Fatalf("object shown as %q", fd.Value)
				}
			}
			if fd.Value[0] == '"' {
				q := fd.Value[:strings.LastIndex(fd.Value, `"`)+1]
				var s string
				if json.Unmarshal([]byte(q), &s) == nil && utf8.RuneCountInString(s) > PreviewChars {
					t.Fatalf("string value longer than %d characters: %q", PreviewChars, fd.Value)
				}
			}
		}
	})
}
