package decide

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/policyc/policyc/runtime/principal"
)

// A principal the gateway decides for may be a principal.Ref: a name with
// the groups an identity provider's token gave it (bob groups=dev,ops
// iss=... sub=...). Its groups pick narrowing layers exactly as listed
// membership does, in addition to the groups the policy lists the name in
// and the name's own scope: a view is composed for each distinct name and
// group set the first time one is asked about, and kept, so that every
// later decision for it is the lookup a listed principal's is.

// maxComposed bounds the name and group sets whose views a table keeps.
// Past it a view is composed for every decision: slower, never wrong.
const maxComposed = 1 << 16

// composer builds the views of a table: at load, for every principal the
// policy names; after, for the name and group sets of principal
// references.
type composer struct {
	t        *Table
	scopes   []scopeLayers
	everyone []int            // the scopes that apply to everyone
	applies  map[string][]int // by principal name, the scopes of its own (listed groups, its principal scope)
	groups   map[string]int   // by group name, its scope

	mu     sync.Mutex
	shared map[string]*view // by the scopes it is made of
	key    []byte

	// refs holds the views of the references asked about, by the whole
	// reference: a map replaced whole on each addition (under mu), so
	// that a decision's lookup is one atomic load and a map read, with
	// no parsing. It has room for maxComposedFast references; decided
	// holds the views by name and group set (principal.Decided), up to
	// maxComposed of them, for the references past that.
	refs     atomic.Pointer[map[string]*view]
	decided  sync.Map
	ndecided atomic.Int64
}

// maxComposedFast bounds refs: each addition copies it.
const maxComposedFast = 4096

func newComposer(t *Table, scopes []scopeLayers, everyone []int, applies map[string][]int) *composer {
	c := &composer{t: t, scopes: scopes, everyone: everyone, applies: applies, groups: map[string]int{}, shared: map[string]*view{}}
	c.refs.Store(&map[string]*view{})
	for i, sc := range scopes {
		if g, ok := strings.CutPrefix(sc.Name, "group:"); ok {
			c.groups[g] = i
		}
	}
	return c
}

// isRef says whether p is a principal reference with groups or an
// issuer, not a plain name (no name has a space; a tool's made-up asker
// such as "(a member of group x)" may, and is looked up by name).
func isRef(p string) bool { return principal.IsRef(p) }

// refView is the view of a principal reference: the name's own scopes,
// everyone's, and those of the groups the reference names (a group the
// table does not have narrows nothing). It allocates nothing for a name
// and group set seen before.
func (t *Table) refView(ref string) *view {
	c := t.comp
	if v := (*c.refs.Load())[ref]; v != nil {
		return v
	}
	key := principal.Decided(ref)
	if v, ok := c.decided.Load(key); ok {
		c.keep(ref, v.(*view))
		return v.(*view)
	}
	name, groups := principal.Name(key), principal.Groups(key)
	var idx []int
	for g := range strings.SplitSeq(groups, ",") {
		if i, ok := c.groups[g]; ok && g != "" {
			idx = append(idx, i)
		}
	}
	idx = append(append(idx, c.everyone...), c.applies[name]...)
	slices.Sort(idx)
	v := c.view(slices.Compact(idx))
	if c.ndecided.Load() < maxComposed {
		if _, loaded := c.decided.LoadOrStore(strings.Clone(key), v); !loaded {
			c.ndecided.Add(1)
		}
	}
	c.keep(ref, v)
	return v
}

// keep remembers v as the view of ref, while refs has room.
func (c *composer) keep(ref string, v *view) {
	if len(*c.refs.Load()) >= maxComposedFast {
		return // full: no lock taken on the way
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.refs.Load()
	if _, ok := old[ref]; ok || len(old) >= maxComposedFast {
		return
	}
	m := make(map[string]*view, len(old)+1)
	for k, w := range old {
		m[k] = w
	}
	m[strings.Clone(ref)] = v
	c.refs.Store(&m)
}

// view is the view of the scopes idx, sorted: one already built for
// the same scopes, else a new one. Safe for concurrent use.
func (c *composer) view(idx []int) *view {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.key = c.key[:0]
	for _, i := range idx {
		c.key = strconv.AppendInt(append(c.key, ','), int64(i), 10)
	}
	if v := c.shared[string(c.key)]; v != nil {
		return v
	}
	v := c.build(idx)
	c.shared[string(c.key)] = v
	return v
}
