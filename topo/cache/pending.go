package cache

import (
	"slices"

	"github.com/topokit/topokit/topo"
)

// pending tracks the writes of this Cache to one path that the store watch
// has not delivered yet. While a path is pending its reads go to the
// store, so that a writer reads its own writes.
type pending struct {
	inflight int    // writes sent and not answered yet
	wants    []want // completed writes the watch has not delivered yet
	// last is the last event of the path delivered while a write was in
	// flight (nil entry: a deletion), so that a write whose event came
	// before its answer is not waited for; lastOrdered is its ordered (see
	// deliveredBy).
	last        *entry
	hasLast     bool
	lastOrdered bool
}

// want is one completed write: the version it wrote, or nil for a
// deletion. seq numbers its answer among this Cache's writes; start is the
// number of writes answered when it was sent, so that every write with a
// seq up to start came before it in the store.
type want struct {
	version    topo.Version
	seq, start uint64
}

// deliveredBy reports whether an event of the path (nil e: a deletion)
// shows w or a later write: the same version, a deletion for a deletion,
// or, when ordered, a greater NumericVersion. ordered says that the event
// carries a store revision (topo.WatchData.Revision > 0: etcd, Consul,
// memorytopo), whose versions are store-wide revisions that only grow,
// across a file's deletion and re-creation too. ZooKeeper's events carry
// none, and its versions start again at 0 in each life of a file: there a
// greater version may be an earlier life's (an update's event still on
// its way when the Cache deleted and re-created the file), so only the
// same version counts.
func (w want) deliveredBy(e *entry, ordered bool) bool {
	if w.version == nil || e == nil {
		return w.version == nil && e == nil
	}
	if e.version.String() == w.version.String() {
		return true
	}
	a, ok1 := w.version.(topo.NumericVersion)
	b, ok2 := e.version.(topo.NumericVersion)
	return ordered && ok1 && ok2 && b > a
}

// begin marks p as written by this Cache, before the write is sent, and
// returns the write's start for end. Call with c.mu held.
func (c *Cache) begin(p string) uint64 {
	pd := c.pending[p]
	if pd == nil {
		pd = &pending{}
		c.pending[p] = pd
	}
	pd.inflight++
	return c.writeSeq
}

// end records the answer of a write begun on p: ok with the version written
// (nil for a deletion), or !ok when it failed (nothing to wait for: a
// failed write wrote nothing, or its outcome is unknown to the writer too).
// synced says that memory already holds the write (a barrier passed after
// it: nothing to wait for either). Call with c.mu held.
func (c *Cache) end(p string, start uint64, v topo.Version, ok, synced bool) {
	pd := c.pending[p]
	pd.inflight--
	c.writeSeq++
	if ok && !synced {
		w := want{version: v, seq: c.writeSeq, start: start}
		if !pd.hasLast || !w.deliveredBy(pd.last, pd.lastOrdered) {
			pd.wants = append(pd.wants, w)
		}
	}
	if pd.inflight == 0 {
		pd.last, pd.hasLast, pd.lastOrdered = nil, false, false
		if len(pd.wants) == 0 {
			delete(c.pending, p)
		}
	}
	c.signal()
}

// settle applies an event of the store watch to p's pending writes;
// ordered says whether it carries a store revision (see deliveredBy). Call
// with c.mu held.
func (c *Cache) settle(p string, e *entry, ordered bool) {
	pd := c.pending[p]
	if pd == nil {
		return
	}
	if pd.inflight > 0 {
		pd.last, pd.hasLast, pd.lastOrdered = e, true, ordered
	}
	// Each write the event shows is delivered, and so is every write of
	// the path answered before one of those was sent (it came earlier in
	// the store, so the event shows a later state; its own event may have
	// been coalesced away). Writes answered earlier but sent concurrently
	// are not: they may reach the store in another order.
	var upTo uint64
	for _, w := range pd.wants {
		if w.deliveredBy(e, ordered) {
			upTo = max(upTo, w.start)
		}
	}
	pd.wants = slices.DeleteFunc(pd.wants, func(w want) bool { return w.deliveredBy(e, ordered) || w.seq <= upTo })
	if pd.inflight == 0 && len(pd.wants) == 0 {
		delete(c.pending, p)
	}
}

// pendingUnder reports whether a path starting with prefix is pending
// (exact: p itself when exact is set). Call with c.mu held.
func (c *Cache) pendingUnder(p string, exact bool) bool {
	if exact {
		return c.pending[p] != nil
	}
	for q := range c.pending {
		if len(q) >= len(p) && q[:len(p)] == p {
			return true
		}
	}
	return false
}
