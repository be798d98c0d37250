package runtime

import (
	"strings"
	"testing"
)

// TestServerIndex looks up names of every length class the hash treats
// apart (empty, 1-3, 4-7, 8-16 and longer bytes), names that share their
// first and last bytes, and names the index does not hold.
func TestServerIndex(t *testing.T) {
	servers := map[string]*serverView{}
	var names []string
	for n := range 41 {
		for _, fill := range []string{"a", "b", "ab"} {
			name := strings.Repeat(fill, n)[:n]
			if n > 2 {
				name = "s" + name[1:n-1] + "z" // same ends, different middles
			}
			if _, dup := servers[name]; !dup {
				sv := &serverView{}
				for k := range sv.kinds {
					sv.kinds[k] = []*layer{{}}
				}
				servers[name] = sv
				names = append(names, name)
			}
		}
	}
	x := newServerIndex(servers)
	if got, want := len(x.slots), 2*len(servers); got < want {
		t.Fatalf("%d slots for %d servers; want at least %d", got, len(servers), want)
	}
	for _, name := range names {
		s := x.get(name)
		if s == nil || s.sv != servers[name] || s.name != name || s.own[Prompt] != s.sv.kinds[Prompt][0] {
			t.Errorf("get(%q) = %+v; want the slot of %q", name, s, name)
		}
	}
	for _, name := range []string{"c", "sz", "s?z", "saaaaz1", strings.Repeat("c", 16), strings.Repeat("s", 17) + "z", "\x00"} {
		if s := x.get(name); s != nil {
			t.Errorf("get(%q) = slot of %q; want nil", name, s.name)
		}
	}
	if s := newServerIndex(nil); s.get("") != nil || s.get("x") != nil {
		t.Error("an empty index found a server")
	}
}
