package approval

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// maxTries is how many times a change is made again over another
// replica's change of the same request before it is given up.
const maxTries = 8

// isStale reports a change refused because another replica changed the
// request first; the gate has applied that change, and looks again.
func isStale(err error) bool {
	var se *staleError
	return errors.As(err, &se)
}

// storeLocked records r, made from e's request, with ev. When another
// replica changed the request first, its change is applied to e and a
// *staleError returned: the caller looks at e again.
func (g *Gate) storeLocked(e *entry, r *Request, ev *Event) error {
	err := g.store.put(r, ev)
	var se *staleError
	if errors.As(err, &se) {
		if se.cur == nil {
			return fmt.Errorf("request %s is no longer in the state database", r.ID)
		}
		g.applyLocked(e, se.cur)
	}
	return err
}

// applyRemote applies a request as another replica left it.
func (g *Gate) applyRemote(r *Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.installLocked(r)
}

// installLocked makes r, read from the shared store, the gate's: a request
// it did not know joins the fold (pending), the grants (in force) or the
// approvals once waiting for a call, unless it is past its retention (nil
// then); one it knew takes r's change.
func (g *Gate) installLocked(r *Request) *entry {
	if e := g.reqs[r.ID]; e != nil {
		g.applyLocked(e, r)
		return e
	}
	now := g.now()
	if !g.retained(r, now) {
		return nil // past its retention: let go here already, or never known
	}
	g.pruneLocked(now)
	e := &entry{r: *r}
	g.reqs[r.ID] = e
	switch {
	case r.Status == Pending:
		g.pending[e.foldKey()] = e
		g.armExpiry(e, now)
	case r.Active(now):
		k := e.grantKey()
		g.grants[k] = append(g.grants[k], e)
	case r.unused():
		g.readyLocked(e, now)
	}
	g.changedLocked()
	return e
}

// applyLocked takes cur, a newer revision of e's request, and answers the
// calls held here when it ends the request.
func (g *Gate) applyLocked(e *entry, cur *Request) {
	if cur.rev <= e.r.rev {
		return
	}
	old := e.r
	r := *cur
	r.Calls = max(r.Calls, old.Calls)
	e.r = r
	now := g.now()
	switch {
	case old.Status == Pending && r.Status != Pending:
		g.finishLocked(e)
		g.releaseLocked(e, now)
	case old.Status == Approved && old.Ran == "" && r.Ran != "":
		// Used (or lapsed) on another replica.
		if k := e.foldKey(); g.ready[k] == e {
			delete(g.ready, k)
			e.timer.Stop()
		}
	}
	g.changedLocked()
}

// releaseLocked answers the calls held for e, just decided or expired:
// denied or expired, all end; approved for a duration, all run; approved
// once, the oldest is chosen (or, with none held, the next identical call
// is), unless a call on another replica used it already.
func (g *Gate) releaseLocked(e *entry, now time.Time) {
	d := e.r.Decision
	switch {
	case e.r.Status == Denied:
		for _, w := range e.waiters {
			w.sig <- signal{kind: sigDeny}
		}
		e.waiters = nil
	case e.r.Status == Expired:
		for _, w := range e.waiters {
			w.sig <- signal{kind: sigExpired, reason: e.r.End}
		}
		e.waiters = nil
	case d.For == ForOnce && e.r.Ran != "":
		for _, w := range e.waiters {
			if e.r.Ran == "ran" {
				w.sig <- signal{kind: sigDuplicate}
			} else {
				w.sig <- signal{kind: sigNotRun, reason: strings.TrimPrefix(e.r.Ran, "not run: ")}
			}
		}
		e.waiters = nil
	case d.For == ForOnce && len(e.waiters) == 0:
		// No call is held for it: the agent's retry of the same call
		// uses it.
		g.readyLocked(e, now)
	case d.For == ForOnce:
		e.chosen = e.waiters[0]
		e.chosen.sig <- signal{kind: sigOnce}
	default:
		k := e.grantKey()
		g.grants[k] = append(g.grants[k], e)
		for _, w := range e.waiters {
			w.sig <- signal{kind: sigGrant}
		}
		e.waiters = nil
	}
}

// releaseHeldLocked ends the calls held here for e as the gateway stops,
// leaving the shared request pending.
func (g *Gate) releaseHeldLocked(e *entry) {
	if e.timer != nil {
		e.timer.Stop()
	}
	for _, w := range e.waiters {
		w.sig <- signal{kind: sigExpired, reason: gatewayStopped}
	}
	e.waiters = nil
	g.changedLocked()
}
