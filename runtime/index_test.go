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
				if len(servers)%3 == 0 { // a narrowing layer after the server's own
					sv.kinds[Prompt] = append(sv.kinds[Prompt], &layer{})
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
		if s == nil || s.sv != servers[name] || s.name != name {
			t.Errorf("get(%q) = %+v; want the slot of %q", name, s, name)
			continue
		}
		for k, layers := range s.sv.kinds {
			if s.own[k] != layers[0] || s.narrowed[k] != (len(layers) > 1) {
				t.Errorf("get(%q): kind %d: own %p narrowed %t; want %p, %t", name, k, s.own[k], s.narrowed[k], layers[0], len(layers) > 1)
			}
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

// TestServerIndexCollision makes an unknown name's hash equal to a held
// server's, as a collision would: only the comparison of names tells them
// apart, and the unknown name must stay unknown (a deny).
func TestServerIndexCollision(t *testing.T) {
	servers := map[string]*serverView{}
	for _, name := range []string{"github", "linear", "filesystem", "memory", "a-server-with-a-long-name"} {
		sv := &serverView{}
		for k := range sv.kinds {
			sv.kinds[k] = []*layer{{}}
		}
		servers[name] = sv
	}
	x := newServerIndex(servers)
	for _, unknown := range []string{"githuB", "linea", "a-server-with-a-long-namf", "", "x"} {
		h := x.hash(unknown)
		// Give every slot the unknown name's hash: wherever its probe
		// goes, the hashes match.
		saved := make([]uint64, len(x.slots))
		for i := range x.slots {
			saved[i], x.slots[i].hash = x.slots[i].hash, h
		}
		if s := x.get(unknown); s != nil {
			t.Errorf("get(%q) with colliding hashes = slot of %q; want nil", unknown, s.name)
		}
		for i := range x.slots {
			x.slots[i].hash = saved[i]
		}
	}
}
