package decide

import (
	"slices"
	"strings"
	"testing"
)

func TestNormalURI(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"file:///srv/projects/app/main.go", "file:///srv/projects/app/main.go"},
		{"file:///srv/projects/app/%2Eenv", "file:///srv/projects/app/.env"},
		{"file:///srv/projects/app/%2eenv", "file:///srv/projects/app/.env"},
		{"file:///srv/projects/app/.%65nv", "file:///srv/projects/app/.env"},
		{"file:///srv/projects/app/%252Eenv", "file:///srv/projects/app/.env"}, // decoded twice
		{"file:///srv/projects/app/.env/.", "file:///srv/projects/app/.env"},
		{"file:///srv/projects/app/.env/", "file:///srv/projects/app/.env/"},
		{"file:///srv/projects/app/.env%2F", "file:///srv/projects/app/.env/"},
		{"file:///srv/projects/app/sub/../.env", "file:///srv/projects/app/.env"},
		{"file:///srv/projects/../../etc/shadow", "file:///etc/shadow"},
		{"file:///srv/projects/%2E%2E/secrets/key", "file:///srv/secrets/key"},
		{"file:///srv//projects///app", "file:///srv/projects/app"},
		{`file:///srv/projects/app\..\..\secrets`, "file:///srv/secrets"},
		{"file:///srv/projects/app%5C.env", "file:///srv/projects/app/.env"},
		{"FILE://LocalHost/Srv/App", "file:///Srv/App"}, // the path keeps its case
		{"file:/etc/passwd", "file:///etc/passwd"},
		{"file:etc/passwd", "file:///etc/passwd"},
		{"file://localhost:99/etc/shadow", "file:///etc/shadow"},
		{"file://evil@localhost/etc/shadow", "file:///etc/shadow"},
		{"file://Host.Example/share/x", "file://host.example/share/x"},
		{"https://user:pw@Example.com:8443/a/../b", "https://example.com:8443/b"},
		{"file:///srv/projects/app/.env?x", "file:///srv/projects/app/.env?x"},
		{"file:///srv/a/../b?c/../d#e/../f", "file:///srv/b?c/../d#e/../f"}, // query and fragment as written
		{"UI://github/app.html", "ui://github/app.html"},
		{"repo://acme/widgets?ref=../main#x/../y", "repo://acme/widgets?ref=../main#x/../y"}, // query and fragment as they are
		{"repo:acme/./widgets", "repo:acme/widgets"},
		{"file:///srv/projects/app%20dir/x", "file:///srv/projects/app dir/x"},
		{"file:///srv/100%", "file:///srv/100%"}, // not an escape
		{"file:///", "file:///"},
		{"https://internal.example", "https://internal.example/"},
		{"https://internal.example.:0443/x", "https://internal.example/x"},
		{"https://internal.example:/x", "https://internal.example/x"},
		{"http://127.0.0.1:80/x", "http://127.0.0.1/x"},
		{"https://example.com/wiki/C%23", "https://example.com/wiki/C#"}, // its readings are decided too
		{"https://example.com/search?q=line1%0Aline2", "https://example.com/search?q=line1%0Aline2"},
		{"notes", "notes"},
		{"docs:///x", "docs:///x"},
		{"file:///C:/Users/x", "file:///C:/Users/x"},
	} {
		got, ok := normalURI(c.in)
		if !ok || got != c.want {
			t.Errorf("normalURI(%q) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
	for _, in := range []string{"file:///srv/projects/app/.env%00.txt", "file:///srv/a\x00b", "file:///srv/%2500", "file:///srv/a%7Fb", "file:///srv/%252525252E",
		"file://a%2Fb/c", "file://a%5Cb/c", "",
		// spaces around, a scheme that is not one,
		// a host made by decoding, a scheme that always has a host without
		// one
		" repo://acme/secret", "repo://acme/secret ", "fil%65:///etc/shadow", "%75i://files/x.html", "repo%3A//acme/secret",
		"repo:%2F%2Facme/secret", `repo:\\acme\secret`, `https:/\internal.example/x`, "https:///internal.example/x",
		"https:internal.example/x", "https://internal.example@/x",
		// a file: host made by backslashes or decoding,
		// hosts a URL parser reads otherwise, Unicode spaces around
		`file:\\evilhost\etc\shadow`, `file:/\evilhost/etc/shadow`, "file:%2F%2Fevilhost/etc/shadow", "file:/%2Fevilhost/etc/shadow",
		"http://2130706433/x", "http://127.1/x", "http://0x7f.0.0.1/x", "https://ｉｎｔｅｒｎａｌ.example/x", "https://inter\u00adnal.example/x",
		"\u00a0repo://acme/secret", "repo://acme/secret\u0085", "repo://acme/secret\u3000", "ui:/open/app.html", "ui:open/app.html",
		"https://example.com:99999/x"} {
		if got, ok := normalURI(in); ok {
			t.Errorf("normalURI(%q) = %q; want no sound reading", in, got)
		}
	}
}

// TestURIReadings: the readings a URI is decided in, besides itself.
func TestURIReadings(t *testing.T) {
	for _, c := range []struct {
		uri  string
		want []string // "!" marks a reading where only a deny rule counts
	}{
		{"file:///srv/projects/app/main.go", nil},
		{"file:///srv/projects/app/.env/", []string{"!file:///srv/projects/app/.env"}},
		{"file:///srv/p/x?/../../s/k", []string{"file:///srv/p/x", "file:///srv/s/k"}},
		{"file:///srv/p/app/x?/../.env/", []string{"file:///srv/p/app/x", "file:///srv/p/app/.env/", "!file:///srv/p/app/.env"}},
		{"file:///srv/p/x#/../app/.env?/../y", []string{"file:///srv/p/x", "file:///srv/p/app/.env", "file:///srv/p/app/y"}},
		{"file://h/x?/../../etc/shadow", []string{"file://h/x", "!file:///x", "file://h/etc/shadow", "!file:///etc/shadow"}},
		{"https://example.com/wiki/C%23", []string{"https://example.com/wiki/C#", "https://example.com/wiki/C"}},
	} {
		_, rs, ok := readURI(c.uri)
		if !ok {
			t.Errorf("readURI(%q): no sound reading", c.uri)
			continue
		}
		var got []string
		for _, r := range rs {
			n := r.name
			if r.ruleOnly {
				n = "!" + n
			}
			got = append(got, n)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("readURI(%q) readings\n got %q\nwant %q", c.uri, got, c.want)
		}
	}
}

// FuzzNormalURI: whatever the bytes, reading a URI does not panic, a
// normal form holds no NUL, and a URI the fast path takes as its own only
// reading is: readURI finds no other.
func FuzzNormalURI(f *testing.F) {
	for _, s := range []string{"file:///srv/projects/app/main.go", "repo://acme/x?y=1#z", "file:///srv/projects/app/%2Eenv", "file:///a/../b/./c//", `x:\..\y`, "ui://x/%252e%252e/y", "repo:a?b#c", "%", "%%41", "https://a.example:0443/x?y/../z", "file://h/x#/../y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		n, rs, ok := readURI(uri)
		if !mayNotBeNormal(uri) {
			if !ok || n != uri {
				t.Fatalf("mayNotBeNormal(%q) is false, but its normal form is %q, %v", uri, n, ok)
			}
			for _, r := range rs {
				if r.name != uri {
					t.Fatalf("mayNotBeNormal(%q) is false, but it has the reading %+v", uri, r)
				}
			}
		}
		if ok && strings.ContainsRune(n, 0) {
			t.Fatalf("normal form %q of %q holds a NUL", n, uri)
		}
	})
}
