package decide

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/policyc/policyc/runtime/table"
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
					sv.kinds[table.Prompt] = append(sv.kinds[table.Prompt], &layer{})
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
		if s == nil || s.sv != servers[name] || s.sv.name != name {
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
			t.Errorf("get(%q) = slot of %q; want nil", name, s.sv.name)
		}
	}
	if s := newServerIndex(nil); s.get("") != nil || s.get("x") != nil {
		t.Error("an empty index found a server")
	}
}

// TestServerIndexCollision gives an unknown long name's hash to a held long
// name's slot, placed where the unknown name's probe starts, as a collision
// would: only the comparison of names tells them apart, and the unknown
// name must stay unknown (a deny).
func TestServerIndexCollision(t *testing.T) {
	servers := map[string]*serverView{}
	for _, name := range []string{"github", "a-server-with-a-long-name", "another-server-with-a-long-name", "linear"} {
		sv := &serverView{}
		for k := range sv.kinds {
			sv.kinds[k] = []*layer{{}}
		}
		servers[name] = sv
	}
	for _, unknown := range []string{"a-server-with-a-long-namf", "a-server-with-a-long-name-", strings.Repeat("x", 17)} {
		x := newServerIndex(servers)
		h, _, _, _ := x.key(unknown)
		start := h & x.mask
		long := -1
		for i := range x.slots {
			if x.slots[i].sv != nil && x.slots[i].n == longName {
				long = i
				break
			}
		}
		if long < 0 {
			t.Fatal("no long-name slot")
		}
		x.slots[start], x.slots[long] = x.slots[long], x.slots[start]
		x.slots[start].w0 = h
		if s := x.get(unknown); s != nil {
			t.Errorf("get(%q) with a colliding hash = slot of %q; want nil", unknown, s.sv.name)
		}
		// The probe did meet the colliding slot: without the name, it
		// would have matched.
		if s := &x.slots[start]; s.w0 != h || s.w1 != 0 || s.n != longName {
			t.Fatalf("slot %d does not collide with %q", start, unknown)
		}
	}
}

// TestServerIndexKeys checks that a short name's key spells it: distinct
// names of up to 16 bytes never share a key, so get may compare keys
// instead of names. Every name of up to 5 bytes over four bytes, NUL among
// them, and random names of 6 to 16 bytes that differ in one byte, are
// tried.
func TestServerIndexKeys(t *testing.T) {
	x := newServerIndex(nil)
	type key struct {
		w0, w1 uint64
		n      uint8
	}
	seen := map[key]string{}
	check := func(name string) {
		w0, w1, n, _ := x.key(name)
		if n == longName {
			t.Fatalf("key(%q): long", name)
		}
		k := key{w0, w1, n}
		if other, ok := seen[k]; ok && other != name {
			t.Fatalf("%q and %q share a key", name, other)
		}
		seen[k] = name
	}
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		check(prefix)
		if n == 0 {
			return
		}
		for _, c := range []string{"a", "b", "\xff", "\x00"} {
			gen(prefix+c, n-1)
		}
	}
	gen("", 5)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		b := make([]byte, 6+rng.IntN(11))
		for i := range b {
			b[i] = byte('a' + rng.IntN(3))
		}
		check(string(b))
		b[rng.IntN(len(b))] ^= 1
		check(string(b))
	}
}
