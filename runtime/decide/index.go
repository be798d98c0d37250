package decide

import (
	"hash/maphash"
	"math/bits"
	"math/rand/v2"

	"github.com/policyc/policyc/runtime/table"
)

// serverIndex finds a view's servers by name for Decide: open addressing
// over a power-of-two table at most half full. A name of up to 16 bytes, as
// server names nearly always are, is keyed by two words of its bytes and its
// length, which spell it exactly: a slot holds them, so a lookup compares
// three numbers and reads no string. A longer name is keyed by its
// hash/maphash hash and compared in full.
type serverIndex struct {
	k0, k1 uint64       // keys of the short-name hash
	seed   maphash.Seed // of the long-name hash
	mask   uint64
	slots  []serverSlot
}

type serverSlot struct {
	// w0, w1 and n are the key of a short name (see key); for a longer
	// name w0 is its hash, w1 is 0 and n is longName.
	w0, w1 uint64
	n      uint8
	// narrowed says which kinds have narrowing layers after own, so that
	// a decision with none reads no serverView.
	narrowed [table.NumKinds]bool
	sv       *serverView            // nil: the slot is free
	own      [table.NumKinds]*layer // each kind's first layer, the server's own
	_        [8]byte                // a slot is one cache line
}

// longName is the n of a slot whose name is longer than 16 bytes.
const longName = 255

func newServerIndex(servers map[string]*serverView) serverIndex {
	size := 1
	for size < 2*len(servers) {
		size *= 2
	}
	x := serverIndex{k0: rand.Uint64(), k1: rand.Uint64(), seed: maphash.MakeSeed(), mask: uint64(size - 1), slots: make([]serverSlot, size)}
	for name, sv := range servers {
		sv.name = name
		w0, w1, n, h := x.key(name)
		i := h & x.mask
		for x.slots[i].sv != nil {
			i = (i + 1) & x.mask
		}
		x.slots[i] = serverSlot{w0: w0, w1: w1, n: n, sv: sv}
		for k, layers := range sv.kinds {
			x.slots[i].own[k] = layers[0]
			x.slots[i].narrowed[k] = len(layers) > 1
		}
	}
	return x
}

// key returns the key of a server name and its hash. A name of up to 16
// bytes is read as two words, overlapping when shorter than 16 bytes (for 1
// to 3 bytes the first, middle and last byte): with the length they are the
// name, and one multiplication mixes them into the hash, a third of the
// cost of hash/maphash, which hashes longer names. Collisions of hashes cost
// probes, never answers: get compares keys.
func (x *serverIndex) key(name string) (w0, w1 uint64, n uint8, h uint64) {
	switch l := len(name); {
	case l > 16:
		h = maphash.String(x.seed, name)
		return h, 0, longName, h
	case l >= 8:
		w0, w1 = le64(name), le64(name[l-8:])
	case l >= 4:
		w0, w1 = le32(name), le32(name[l-4:])
	case l > 0:
		w0 = uint64(name[0])<<16 | uint64(name[l>>1])<<8 | uint64(name[l-1])
	}
	n = uint8(len(name))
	hi, lo := bits.Mul64(w0^x.k0, w1^x.k1^uint64(n))
	return w0, w1, n, hi ^ lo
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
	w0, w1, n, h := x.key(name)
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		s := &x.slots[i]
		if s.sv == nil {
			return nil
		}
		if s.w0 == w0 && s.w1 == w1 && s.n == n && (n != longName || s.sv.name == name) {
			return s
		}
	}
}
