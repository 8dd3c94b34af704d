package cache

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/topokit/topokit/topo"
)

// run applies the store watch's events, and watches the prefix again
// whenever the watch ends, until the Cache's context ends.
func (c *Cache) run(ch <-chan *topo.WatchDataRecursive) {
	defer c.loops.Done()
	for {
		err := c.consume(ch)
		if c.ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		c.endWatch()           // releases the ended watch's context
		catching := c.catching // ended by catchUp: the Cache stays Stale, with the outage's error
		c.broken = true
		switch {
		case catching:
		case c.relisting: // ended by relistFor
			c.setHealth(nil)
		default:
			c.log.Warn("topo cache watch ended, listing again", "err", err)
			c.setHealth(err)
		}
		c.mu.Unlock()
		if c.opts.Hooks.OnResync != nil {
			c.opts.Hooks.OnResync(err)
		}
		ch = c.rewatch()
		if ch == nil {
			return
		}
	}
}

// rewatch starts a new WatchRecursive and applies its initial list,
// retrying every RetryInterval until it succeeds or the Cache's context
// ends (then it returns nil).
func (c *Cache) rewatch() <-chan *topo.WatchDataRecursive {
	for {
		c.mu.RLock()
		seq := c.writeSeq
		c.mu.RUnlock()
		init, ch, sync, end, err := c.watch()
		if err == nil {
			c.mu.Lock()
			c.sync, c.endWatch, c.gen, c.received = sync, end, c.gen+1, 0
			c.relist(init, seq)
			c.mu.Unlock()
			return ch
		}
		if c.ctx.Err() != nil {
			return nil
		}
		c.log.Warn("topo cache cannot watch", "err", err)
		c.mu.Lock()
		c.down = true
		c.setHealth(err)
		c.mu.Unlock()
		select {
		case <-c.ctx.Done():
			return nil
		case <-time.After(c.opts.RetryInterval):
		}
	}
}

// consume applies events until ch closes, and returns the error that ended
// it (Interrupted when it closed without one).
func (c *Cache) consume(ch <-chan *topo.WatchDataRecursive) error {
	var end error = topo.NewError(topo.Interrupted, c.prefix)
	for ev := range ch {
		if ev.Err != nil && !topo.IsErrType(ev.Err, topo.NoNode) {
			end = ev.Err
			continue
		}
		c.mu.Lock()
		c.received++
		c.apply(ev)
		c.mu.Unlock()
	}
	return end
}

// apply applies one event of the store watch. Call with c.mu held.
func (c *Cache) apply(ev *topo.WatchDataRecursive) {
	if c.health == OverLimit || c.closed {
		return
	}
	c.confirmed = time.Now()
	c.passRev(ev.Revision, true)
	if c.down && !c.catchUp() {
		c.down = false
		c.setHealth(nil)
	}
	var e *entry
	if ev.Err == nil {
		e = &entry{value: ev.Contents, version: ev.Version}
	}
	c.set(ev.Path, e)
	c.settle(ev.Path, e, ev.Revision)
	if c.opts.MaxBytes > 0 && c.bytes > c.opts.MaxBytes {
		c.overLimit()
		return
	}
	c.signal()
}

// set stores (or with a nil e deletes) one file and tells the local
// watchers. Call with c.mu held.
func (c *Cache) set(p string, e *entry) {
	// A deletion of a file memory never held (created and deleted between
	// two coalesced events) is passed on too, as the store watch reports it.
	if old := c.files[p]; old != nil {
		c.bytes -= old.size(p)
		delete(c.files, p)
	}
	if e != nil {
		c.files[p] = e
		c.bytes += e.size(p)
	}
	c.notify(p, e)
}

// relist replaces memory with a new watch's initial list, telling local
// watchers of the difference only (files whose version or value changed,
// appeared or disappeared). Writes of this Cache that completed before the list was
// asked for (seq) are in it, so their pending marks go. Call with c.mu held.
func (c *Cache) relist(init []*topo.WatchDataRecursive, seq uint64) {
	if c.closed {
		return
	}
	if c.files == nil {
		c.files = make(map[string]*entry, len(init))
	}
	seen := make(map[string]bool, len(init))
	var listed int64
	for _, wd := range init {
		listed = max(listed, wd.Revision)
	}
	// A new watch: its first revision says whether the store's history
	// went back, before the differences are sent with the revision
	// memory had reached.
	c.revSeen = false
	if listed > 0 {
		c.wentBack(listed)
	}
	for _, wd := range init {
		seen[wd.Path] = true
		old := c.files[wd.Path]
		// The value is compared too: ZooKeeper's versions start again at 0
		// when a file is deleted and created again.
		if old != nil && old.version.String() == wd.Version.String() && bytes.Equal(old.value, wd.Contents) {
			continue
		}
		c.set(wd.Path, &entry{value: wd.Contents, version: wd.Version})
	}
	var gone []string
	for p := range c.files {
		if !seen[p] {
			gone = append(gone, p)
		}
	}
	slices.Sort(gone)
	for _, p := range gone {
		c.set(p, nil)
	}
	// The listing is newer than every event of the watch before it, so
	// the revision the Cache had reached still holds (unless the store's
	// history went back: see passRev). It is taken once memory holds all
	// of the listing: the differences sent to local watchers meanwhile
	// carry the revision from before.
	c.passRev(listed, true)
	for p, pd := range c.pending {
		pd.wants = slices.DeleteFunc(pd.wants, func(w want) bool { return w.seq <= seq })
		// The listing is a state of the store as an event is: it shows the
		// writes that completed while the watch was asked for, whose own
		// events the new watch will not send.
		c.settle(p, c.files[p], listed)
		if pd.inflight == 0 && len(pd.wants) == 0 {
			delete(c.pending, p)
		}
	}
	c.confirmed = time.Now()
	c.broken, c.down, c.catching, c.relisting = false, false, false, false
	c.setHealth(nil)
	if c.opts.MaxBytes > 0 && c.bytes > c.opts.MaxBytes {
		c.overLimit()
		return
	}
	c.signal()
}

// overLimit drops memory and turns the Cache into a pass-through for good.
// Call with c.mu held.
func (c *Cache) overLimit() {
	c.log.Warn("topo cache over its byte limit, serving from the store", "bytes", c.bytes, "max", c.opts.MaxBytes)
	c.files, c.bytes = nil, 0
	c.dropPending()
	c.err = &topo.Error{Code: topo.ResourceExhausted, Path: c.prefix, Err: ErrOverLimit}
	c.health, c.since = OverLimit, time.Now()
	if c.opts.Hooks.OnHealth != nil {
		c.opts.Hooks.OnHealth(OverLimit, c.since)
	}
	c.endWatchers(c.err)
	c.cancel()
	c.signal()
}

// probe reads one path every ProbeInterval to learn whether the store
// answers, until the Cache's context ends.
func (c *Cache) probe() {
	defer c.loops.Done()
	p := strings.TrimSuffix(c.prefix, "/") + "/~topokit-cache-probe"
	if c.prefix == "" || !strings.HasSuffix(c.prefix, "/") {
		p = c.prefix + "~topokit-cache-probe"
	}
	t := time.NewTicker(c.opts.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(c.ctx, max(c.opts.ProbeInterval, time.Second))
		_, _, err := c.conn.Get(ctx, p)
		cancel()
		if c.ctx.Err() != nil {
			return
		}
		if topo.IsErrType(err, topo.Timeout) {
			err = &topo.Error{Code: topo.Unavailable, Path: p, Err: err}
		}
		c.noteStore(err)
		c.mu.Lock()
		c.relistUnsure()
		c.mu.Unlock()
	}
}
