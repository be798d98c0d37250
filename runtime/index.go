package runtime

import (
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
)

// serverIndex finds a view's servers by name for Decide: open addressing
// over a power-of-two table at most half full, each slot holding the
// name's hash, so that a lookup compares the name's bytes only once it has
// found its slot.
type serverIndex struct {
	k0, k1 uint64       // keys of the short-name hash
	seed   maphash.Seed // of the long-name hash
	mask   uint64
	slots  []serverSlot
}

type serverSlot struct {
	hash uint64
	sv   *serverView // nil: the slot is free
	name string
	// own is each kind's first layer, the server's own, and narrowed says
	// which kinds have narrowing layers after it, so that a decision with
	// none reads no serverView.
	own      [numKinds]*layer
	narrowed [numKinds]bool
}

func newServerIndex(servers map[string]*serverView) serverIndex {
	size := 1
	for size < 2*len(servers) {
		size *= 2
	}
	x := serverIndex{k0: rand.Uint64(), k1: rand.Uint64(), seed: maphash.MakeSeed(), mask: uint64(size - 1), slots: make([]serverSlot, size)}
	for name, sv := range servers {
		h := x.hash(name)
		i := h & x.mask
		for x.slots[i].sv != nil {
			i = (i + 1) & x.mask
		}
		x.slots[i] = serverSlot{hash: h, sv: sv, name: name}
		for k, layers := range sv.kinds {
			x.slots[i].own[k] = layers[0]
			x.slots[i].narrowed[k] = len(layers) > 1
		}
	}
	return x
}

// hash hashes a server name. A name of up to 16 bytes, as server names
// nearly always are, is read as two words (overlapping when shorter than
// 16 bytes) that one multiplication mixes: a third of the cost of
// hash/maphash, which hashes longer names. Collisions cost probes, never
// answers: get compares names.
func (x *serverIndex) hash(name string) uint64 {
	n := len(name)
	var a, b uint64
	switch {
	case n > 16:
		return maphash.String(x.seed, name)
	case n >= 8:
		a, b = le64(name), le64(name[n-8:])
	case n >= 4:
		a, b = le32(name), le32(name[n-4:])
	case n > 0:
		a = uint64(name[0])<<16 | uint64(name[n>>1])<<8 | uint64(name[n-1])
	}
	hi, lo := bits.Mul64(a^x.k0, b^x.k1^uint64(n))
	return hi ^ lo
}

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func le32(s string) uint64 {
	_ = s[3]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}

// get returns the slot of the server called name, or nil.
func (x *serverIndex) get(name string) *serverSlot {
	h := x.hash(name)
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		s := &x.slots[i]
		if s.sv == nil {
			return nil
		}
		if s.hash == h && s.name == name {
			return s
		}
	}
}
