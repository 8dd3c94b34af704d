package cache

import "github.com/topokit/topokit/topo"

// pending tracks the writes of this Cache to one path that the store watch
// has not delivered yet. While a path is pending its reads go to the
// store, so that a writer reads its own writes.
type pending struct {
	inflight int    // writes sent and not answered yet
	wants    []want // completed writes the watch has not delivered yet
	// last is the last event of the path delivered while a write was in
	// flight (nil entry: a deletion), so that a write whose event came
	// before its answer is not waited for; lastRev is its revision (see
	// deliveredBy).
	last    *entry
	hasLast bool
	lastRev int64
	// answered is the highest NumericVersion this Cache's writes of the
	// path were answered with while it has been pending.
	answered int64
}

// want is one completed write: the version it wrote, or nil for a
// deletion. seq numbers its answer among this Cache's writes; start is the
// number of writes answered when it was sent, so that every write with a
// seq up to start came before it in the store. For a deletion, after is
// the highest version this Cache's writes of the path had been answered
// with when it was sent (pending.answered): the deletion's store revision
// is above it.
//
// unsure marks a deletion that a deletion event delivered while it was in
// flight may not show (another writer's, see Cache.syncDeletes): it is
// waited for until a later deletion event or a relist, and the probe asks
// for that relist (see Cache.relistUnsure).
type want struct {
	version    topo.Version
	seq, start uint64
	after      int64
	unsure     bool
}

// ticket is what begin hands to end: the write's start and after (see
// want).
type ticket struct {
	start uint64
	after int64
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
// same version counts. (An event matching several wants may still be the
// earliest one's only: see settle.)
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
// returns the write's ticket for end. Call with c.mu held.
func (c *Cache) begin(p string) ticket {
	pd := c.pending[p]
	if pd == nil {
		pd = &pending{}
		c.pending[p] = pd
	}
	pd.inflight++
	return ticket{start: c.writeSeq, after: pd.answered}
}

// end records the answer of a write begun on p with ticket t: ok with the
// version written (nil for a deletion), or !ok when it failed (nothing to
// wait for: a failed write wrote nothing, or its outcome is unknown to the
// writer too). synced says that memory already holds the write (a barrier
// passed after it: nothing to wait for either). unsure says that the
// event of the path delivered while it was in flight (pending.last) may
// not show it (see Cache.syncDeletes): it is waited for all the same.
// Call with c.mu held.
func (c *Cache) end(p string, t ticket, v topo.Version, ok, synced, unsure bool) {
	pd := c.pending[p]
	pd.inflight--
	c.writeSeq++
	if n, isNum := v.(topo.NumericVersion); ok && isNum {
		pd.answered = max(pd.answered, int64(n))
	}
	// Once the Cache no longer watches (closed, or over its limit) no
	// event will deliver the write, and every read goes to the store.
	watching := !c.closed && c.health != OverLimit
	if ok && !synced && watching {
		w := want{version: v, seq: c.writeSeq, start: t.start, unsure: unsure}
		if v == nil {
			w.after = t.after
		}
		if unsure || !pd.hasLast || !w.deliveredBy(pd.last, pd.lastRev > 0) {
			pd.wants = append(pd.wants, w)
		}
		if unsure && c.opts.ProbeInterval <= 0 {
			c.relistFor(p) // no probe to ask for it later
		}
	}
	if pd.inflight == 0 {
		pd.last, pd.hasLast, pd.lastRev = nil, false, 0
		if len(pd.wants) == 0 {
			delete(c.pending, p)
		}
	}
	c.signal()
}

// relistUnsure asks for a relist (see relistFor) when a deletion of this
// Cache is still waited for as unsure (see want): nothing but a later
// deletion event of its path (there is none when the event taken was
// its own) or a relist settles it. The probe calls it every
// ProbeInterval, so that deletions made meanwhile share one relist. Call
// with c.mu held.
func (c *Cache) relistUnsure() {
	for p, pd := range c.pending {
		for _, w := range pd.wants {
			if w.unsure {
				c.relistFor(p)
				return
			}
		}
	}
}

// dropPending forgets the writes waited for, when the Cache stops
// watching (Close, OverLimit): reads go to the store from then on. Writes
// still in flight keep their entries until they end. Call with c.mu held.
func (c *Cache) dropPending() {
	for p, pd := range c.pending {
		pd.wants = nil
		if pd.inflight == 0 {
			delete(c.pending, p)
		}
	}
}

// settle applies an event of the store watch to p's pending writes; rev
// is its revision (topo.WatchData.Revision, 0 when it carries none: see
// deliveredBy). Call with c.mu held.
func (c *Cache) settle(p string, e *entry, rev int64) {
	pd := c.pending[p]
	if pd == nil {
		return
	}
	// Each write the event shows is delivered, and so is every write of
	// the path answered before one of those was sent (it came earlier in
	// the store, so the event shows a later state; its own event may have
	// been coalesced away). Writes answered earlier but sent concurrently
	// are not: they may reach the store in another order.
	//
	// An event that matches several wants may be the earliest one's only,
	// the others' events still on their way: a deletion event may be an
	// earlier life's deletion (it carries no version), and without a
	// revision (ZooKeeper) a version may be the same version of an
	// earlier life. Such an event shows the earliest it matches, and a
	// later deletion too only when its revision says that it came after
	// every write of this Cache answered before that deletion was sent
	// (want.after; the revision is a lower bound, so a coalesced event may
	// fail to say so). It is then no write in flight's either (see
	// pending.last).
	var upTo uint64
	last := -1 // the last want the event shows
	shown := make([]bool, len(pd.wants))
	for i, w := range pd.wants {
		if !w.deliveredBy(e, rev > 0) {
			continue
		}
		if last >= 0 && (rev == 0 || e == nil && rev < w.after) {
			break
		}
		shown[i], upTo, last = true, max(upTo, w.start), i
	}
	if pd.inflight > 0 && (last < 0 || rev > 0 && e != nil) {
		pd.last, pd.hasLast, pd.lastRev = e, true, rev
	}
	kept := pd.wants[:0]
	for i, w := range pd.wants {
		if shown[i] || w.seq <= upTo {
			continue
		}
		kept = append(kept, w)
	}
	pd.wants = kept
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
