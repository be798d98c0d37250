package approval

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
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
	if p.Incomplete() {
		t.Error("a whole preview is incomplete")
	}
	if !(&Preview{Fields: []Field{{"b", "1"}, {"a", NotShown}}}).Incomplete() {
		t.Error("a preview with a value not shown is not incomplete")
	}
	if !(&Preview{Fields: []Field{}, Omitted: 1}).Incomplete() {
		t.Error("a preview with a key omitted is not incomplete")
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
	// Names are cut, and say so: at PreviewChars characters with the
	// value, at ShortKeyBytes of the encoding where the value is not shown.
	for _, f := range p.Fields {
		enc, _ := json.Marshal(strings.TrimSuffix(f.Key, "…"))
		ok := utf8.RuneCountInString(f.Key) == PreviewChars+1
		if f.Value == NotShown {
			ok = len(enc)-2 <= ShortKeyBytes && len(enc)-2 > ShortKeyBytes-8
		}
		if !ok || !strings.HasSuffix(f.Key, "…") {
			t.Fatalf("key %q (value %q) is not cut as it should be", f.Key, f.Value)
		}
	}
}

// Keys chosen to cost the most per character (escaped in the preview's
// encoding) or to be many: the preview stays within its budget, accounts
// for every key, shows the names of the first MinNames keys (so that the
// real argument, sorted last, is not crowded out by fewer), and every
// further name that fits.
func TestPreviewAdversarialKeys(t *testing.T) {
	// MinNames short fields of the longest name fit in the budget.
	worst, _ := json.Marshal(Field{Key: strings.Repeat("a", ShortKeyBytes) + "…", Value: NotShown})
	if n := (MaxPreviewBytes - 40) / (len(worst) + 1); n < MinNames {
		t.Fatalf("only %d short fields fit, fewer than MinNames (%d)", n, MinNames)
	}
	crowd := func(c string, n int) map[string]string {
		m := map[string]string{"~command": "rm -rf /srv"}
		for i := range n {
			m[fmt.Sprintf("%c%s", 'a'+i%26, strings.Repeat(c, 100+i))] = strings.Repeat(c, 200)
		}
		return m
	}
	type tc struct {
		args map[string]string
		last bool // the last key's name is shown
	}
	cases := map[string]tc{}
	for _, c := range []string{"\\u2028", "\\x01", "<", `"`, "\\\\", "é"} {
		cases[c+" below MinNames"] = tc{crowd(c, MinNames-1), true}
		cases[c+" past MinNames"] = tc{crowd(c, 3*MinNames), false}
	}
	ones := map[string]string{}
	for i := range 90 {
		ones[string(rune('!'+i))] = strings.Repeat("v", 300)
	}
	cases["90 one-character keys"] = tc{ones, false}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(c.args)
			if err != nil {
				t.Fatal(err)
			}
			b = []byte(strings.NewReplacer(`\\u2028`, `\u2028`, `\\x01`, `\u0001`).Replace(string(b)))
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(b, &obj); err != nil || len(obj) != len(c.args) {
				t.Fatalf("the arguments do not decode to %d keys: %v", len(c.args), err)
			}
			p, ok := NewPreview(b)
			if !ok {
				t.Fatal("no preview")
			}
			enc, _ := json.Marshal(p)
			if len(enc) > MaxPreviewBytes {
				t.Fatalf("preview is %d bytes", len(enc))
			}
			if len(p.Fields)+p.Omitted != len(obj) || len(p.Fields) < min(MinNames, len(obj)) {
				t.Fatalf("%d fields + %d omitted for %d keys", len(p.Fields), p.Omitted, len(obj))
			}
			if c.last && p.Fields[len(p.Fields)-1].Key != "~command" {
				t.Fatalf("the last key is shown as %+v", p.Fields[len(p.Fields)-1])
			}
			// Were the next key's name to fit in its short form, it would
			// be shown.
			if p.Omitted > 0 {
				next := slices.Sorted(maps.Keys(obj))[len(p.Fields)]
				extra, _ := json.Marshal(Field{Key: shortName(next), Value: NotShown})
				// What the fields took (each with its comma, as NewPreview counts).
				used := len(enc) - len(`{"fields":[],"omitted":}`) - len(strconv.Itoa(p.Omitted)) + 1
				if used+len(extra)+1 <= MaxPreviewBytes-40 {
					t.Errorf("%d keys omitted with %d bytes used of %d; the next, %q, takes %d", p.Omitted, len(enc), MaxPreviewBytes, next, len(extra))
				}
			}
		})
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
		if want := referencePreview(in); !reflect.DeepEqual(p, want) {
			t.Fatalf("preview %+v, the reference's %+v", p, want)
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

// Neutral reaches every text field of a request, nested ones included (a
// field added later is caught here), and changes a copy: the request the
// gate keeps, and its shared preview, stay as they were.
func TestNeutralReachesEveryField(t *testing.T) {
	const evil = "x\x1b[2K\r\n\u202e\u2066\x7f\u009b\u3164"
	var r Request
	fill(reflect.ValueOf(&r).Elem(), evil)
	if r.Preview == nil || r.Decision == nil || r.Decision.Revoked == nil || r.Delivery == nil || len(r.Preview.Fields) == 0 {
		t.Fatal("fill left a nested part out")
	}
	n := Neutral(r)
	var strs []string
	walkStrings(reflect.ValueOf(n), &strs)
	if len(strs) < 25 {
		t.Fatalf("only %d text fields found", len(strs))
	}
	for _, s := range strs {
		if s != `x\x1b[2K\x0d\x0a\u202e\u2066\x7f\u009b\u3164` {
			t.Fatalf("a field reads %q after Neutral", s)
		}
	}
	var orig []string
	walkStrings(reflect.ValueOf(r), &orig)
	for _, s := range orig {
		if s != evil {
			t.Fatalf("Neutral changed the original: %q", s)
		}
	}
	plain := Request{ID: "apr-aaaaaaaaaaaaaaaa", Client: "claude-code 2.1", Tool: "merge_pull_request"}
	if n := Neutral(plain); !reflect.DeepEqual(n, plain) {
		t.Fatalf("Neutral changed plain text: %+v", n)
	}
}

// fill sets every string reachable from v to s, making pointers and one
// element of each slice on the way.
func fill(v reflect.Value, s string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), s)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), s)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), s)
	}
}

func walkStrings(v reflect.Value, out *[]string) {
	switch v.Kind() {
	case reflect.String:
		*out = append(*out, v.String())
	case reflect.Pointer:
		if !v.IsNil() {
			walkStrings(v.Elem(), out)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				walkStrings(v.Field(i), out)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			walkStrings(v.Index(i), out)
		}
	}
}

// Arguments sent to crowd the preview cannot push a key's name out of it:
// keys that sort first, with long values, get their values not shown
// before a later key goes unnamed; a short value is shown all the same.
func TestPreviewNamesFirst(t *testing.T) {
	args := map[string]any{"command": "rm -rf /srv", "z": 1}
	for i := range 30 {
		args[fmt.Sprintf("a%02d", i)] = strings.Repeat("x", 80)
	}
	b, _ := json.Marshal(args)
	p, ok := NewPreview(b)
	if !ok {
		t.Fatal("no preview")
	}
	enc, _ := json.Marshal(p)
	if len(enc) > MaxPreviewBytes || p.Omitted != 0 || len(p.Fields) != 32 {
		t.Fatalf("%d bytes, %d fields, %d omitted", len(enc), len(p.Fields), p.Omitted)
	}
	shown := map[string]string{}
	hidden := 0
	for _, f := range p.Fields {
		shown[f.Key] = f.Value
		if f.Value == NotShown {
			hidden++
		}
	}
	if shown["command"] != `"rm -rf /srv"` || shown["z"] != "1" {
		t.Errorf("command %q, z %q", shown["command"], shown["z"])
	}
	if hidden == 0 || shown["a00"] != `"`+strings.Repeat("x", 80)+`"` {
		t.Errorf("%d values not shown; a00 %q", hidden, shown["a00"])
	}
	// Past what even the names take, the rest are counted.
	many := map[string]int{}
	for i := range 100 {
		many[fmt.Sprintf("key-%03d", i)] = i
	}
	b, _ = json.Marshal(many)
	p, _ = NewPreview(b)
	if p.Omitted == 0 || len(p.Fields)+p.Omitted != 100 || p.Fields[0].Value != "0" {
		t.Errorf("%d fields, %d omitted, first %+v", len(p.Fields), p.Omitted, p.Fields[0])
	}
}

// referencePreview is NewPreview measuring every key, however many: what
// NewPreview's measuring only as many keys as can be shown must equal.
func referencePreview(args []byte) *Preview {
	var obj map[string]json.RawMessage
	json.Unmarshal(args, &obj)
	keys := slices.Sorted(maps.Keys(obj))
	p := &Preview{Fields: []Field{}}
	used, budget := 0, MaxPreviewBytes-40
	size := func(f Field) int { b, _ := json.Marshal(f); return len(b) + 1 }
	full, short := make([]Field, len(keys)), make([]Field, len(keys))
	least := make([]int, len(keys)+1)
	for i := len(keys) - 1; i >= 0; i-- {
		full[i] = Field{Key: name(keys[i]), Value: previewValue(obj[keys[i]])}
		short[i] = Field{Key: shortName(keys[i]), Value: NotShown}
		if size(full[i]) <= size(short[i]) {
			short[i] = full[i]
		}
		least[i] = least[i+1] + size(short[i])
	}
	for i := range keys {
		f := full[i]
		if used+size(f)+least[i+1] > budget {
			f = short[i]
		}
		if used+size(f) > budget {
			p.Omitted = len(keys) - i
			break
		}
		used += size(f)
		p.Fields = append(p.Fields, f)
	}
	return p
}

// Around the number of keys NewPreview measures (as many as the smallest
// fields fit in the budget), its preview is the reference's.
func TestPreviewMatchesReference(t *testing.T) {
	smallest, _ := json.Marshal(Field{})
	limit := (MaxPreviewBytes-40)/(len(smallest)+1) + 1
	for n := limit - 3; n <= limit+3; n++ {
		for _, value := range []string{`1`, `"` + strings.Repeat("v", 30) + `"`, `12345`} {
			var b strings.Builder
			b.WriteString("{")
			for i := range n {
				if i > 0 {
					b.WriteString(",")
				}
				// Keys of one and two characters, the last one long.
				k := string(rune('A' + i%58))
				if i >= 58 {
					k += "x"
				}
				if i == n-1 {
					k = "~" + strings.Repeat("k", 100)
				}
				fmt.Fprintf(&b, "%q:%s", k, value)
			}
			b.WriteString("}")
			p, _ := NewPreview([]byte(b.String()))
			if want := referencePreview([]byte(b.String())); !reflect.DeepEqual(p, want) {
				t.Errorf("%d keys of value %s: preview %+v, the reference's %+v", n, value, p, want)
			}
		}
	}
}
