package runtime

import "testing"

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
	} {
		got, ok := normalURI(c.in)
		if !ok || got != c.want {
			t.Errorf("normalURI(%q) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
	for _, in := range []string{"file:///srv/projects/app/.env%00.txt", "file:///srv/a\x00b", "file:///srv/%2500", "file:///srv/a%7Fb", "file:///srv/%252525252E",
		"file:///srv/projects/x%23/../../secrets/key", "file:///srv/projects/x%3F/../../secrets/key", "file:///srv/projects/app/.env/x%2523/..",
		"file://a%2Fb/c", "file://a%5Cb/c", "",
		// the bypasses of a review: spaces around, a scheme that is not one,
		// a host made by decoding, a scheme that always has a host without
		// one
		" repo://acme/secret", "repo://acme/secret ", "fil%65:///etc/shadow", "%75i://files/x.html", "repo%3A//acme/secret",
		"repo:%2F%2Facme/secret", `repo:\\acme\secret`, `https:/\internal.example/x`, "https:///internal.example/x",
		"https:internal.example/x", "https://internal.example@/x"} {
		if got, ok := normalURI(in); ok {
			t.Errorf("normalURI(%q) = %q, accepted a control character, endless escapes, an escaped delimiter or separator", in, got)
		}
	}
}

// FuzzNormalURI: whatever the bytes, the normal form is a fixed point (an
// upstream reading it again reads the same) and holds no control
// character, and a URI the fast path takes as normal is.
func FuzzNormalURI(f *testing.F) {
	for _, s := range []string{"file:///srv/projects/app/main.go", "repo://acme/x?y=1#z", "file:///srv/projects/app/%2Eenv", "file:///a/../b/./c//", `x:\..\y`, "ui://x/%252e%252e/y", "repo:a?b#c", "%", "%%41"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		n, ok := normalURI(uri)
		if !mayNotBeNormal(uri) {
			// The fast path must be sound: every reading is the URI.
			r, ok := readURI(uri)
			if !ok || r.normal != uri || r.base != uri || r.flat != uri || r.hostless != "" || r.trimmed != "" {
				t.Fatalf("mayNotBeNormal(%q) is false, but its readings are %+v, %v", uri, r, ok)
			}
		}
		if !ok {
			return
		}
		if hasControl(n) {
			t.Fatalf("normalURI(%q) = %q holds a control character", uri, n)
		}
		if again, ok := normalURI(n); !ok || again != n {
			t.Fatalf("normalURI(%q) = %q, but normalURI of that is %q, %v", uri, n, again, ok)
		}
	})
}
