package cache

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/topokit/topokit/topo"
)

// ErrSlowWatcher is wrapped (in a ResourceExhausted *topo.Error) by the
// last event of a local watcher that fell Options.WatcherBuffer events
// behind and was dropped.
var ErrSlowWatcher = errors.New("cache: watcher fell too far behind and was dropped")

// ErrOverLimit is wrapped (in a ResourceExhausted *topo.Error) by the last
// event of the local watchers of a Cache whose subtree outgrew
// Options.MaxBytes, and by State().Err of that Cache.
var ErrOverLimit = errors.New("cache: subtree larger than Options.MaxBytes, serving from the store")

// Cache is a topo.Conn that answers reads under its prefix from memory (see
// the package documentation). It is safe for concurrent use.
type Cache struct {
	conn   topo.Conn
	prefix string
	opts   Options
	log    *slog.Logger
	ctx    context.Context // ends with Close or when the Cache goes OverLimit
	cancel context.CancelFunc
	loops  sync.WaitGroup
	once   sync.Once

	mu        sync.RWMutex
	files     map[string]*entry
	bytes     int64
	pending   map[string]*pending // paths with writes of this Cache not yet seen by the watch
	writeSeq  uint64              // counts completed writes of this Cache
	watchers  map[*watcher]struct{}
	changed   chan struct{} // closed and replaced whenever memory or pending change
	health    Health
	since     time.Time // when health last changed
	confirmed time.Time
	err       error
	sync      syncFunc           // the store watch's, if its Conn is a SyncWatcher
	gen       uint64             // counts store watches started
	received  uint64             // events received on the current store watch
	rev       int64              // memory reflects every change up to this store revision (see Info.Revision)
	revFloor  int64              // after the store's revisions went back: the highest rev before; rev stays 0 until one reaches it
	revSeen   bool               // the current store watch has passed a revision (see passRev)
	broken    bool               // the watch ended and no relist succeeded since
	down      bool               // the store was last seen failing (probe or pass-through), or is catching up
	catching  bool               // the store answers again after an outage: the watch was ended for a relist (see catchUp)
	relisting bool               // the watch was ended for a relist that settles a deletion (see relistFor)
	endWatch  context.CancelFunc // ends the current store watch
	closed    bool
}

// entry is one cached file.
type entry struct {
	value   []byte
	version topo.Version
}

func (e *entry) size(path string) int64 { return int64(len(path) + len(e.value)) }

// New returns a Cache of the files under prefix (a plain string prefix, as
// in Conn.List; "" caches the whole cell) read through conn. It starts one
// WatchRecursive on prefix and returns once memory holds the prefix's
// files; it returns that call's error (InvalidPath for a bad prefix,
// Unavailable when the store cannot be reached, ...) and then owns
// nothing. The Cache owns conn from then on: its Close closes conn, unless
// Options.LeaveConnOpen is set.
func New(conn topo.Conn, prefix string, opts Options) (*Cache, error) {
	p, err := topo.CleanPrefix(prefix)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	now := time.Now()
	c := &Cache{conn: conn, prefix: p, opts: opts, log: opts.Logger.With("cache", p), ctx: ctx, cancel: cancel,
		pending: map[string]*pending{}, watchers: map[*watcher]struct{}{}, changed: make(chan struct{}),
		since: now}
	init, ch, sync, end, err := c.watch()
	if err != nil {
		cancel()
		return nil, err
	}
	c.mu.Lock()
	c.sync, c.endWatch = sync, end
	c.relist(init, 0)
	c.mu.Unlock()
	c.loops.Add(1)
	go c.run(ch)
	if opts.ProbeInterval > 0 {
		c.loops.Add(1)
		go c.probe()
	}
	return c, nil
}

// Unwrap returns the Conn the Cache reads through.
func (c *Cache) Unwrap() topo.Conn { return c.conn }

// Prefix returns the canonical prefix the Cache holds.
func (c *Cache) Prefix() string { return c.prefix }

// State returns the Cache's current condition.
func (c *Cache) State() State {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return State{Health: c.health, Since: c.since, Confirmed: c.confirmed, Err: c.err,
		Files: len(c.files), Bytes: c.bytes, Watchers: len(c.watchers), Revision: c.rev}
}

// Close stops the store watch, ends every local watcher with Interrupted
// and closes the wrapped Conn; later calls return Closed. With
// Options.LeaveConnOpen the Conn stays open and later calls go to it, as
// in Bypass mode. State().Health is Closed from then on (Hooks.OnHealth
// is called with it). Idempotent.
func (c *Cache) Close() {
	c.once.Do(func() {
		c.cancel()
		c.mu.Lock()
		c.closed = true
		c.health, c.since = Closed, time.Now()
		if c.opts.Hooks.OnHealth != nil {
			c.opts.Hooks.OnHealth(Closed, c.since)
		}
		c.dropPending()
		c.endWatchers(topo.NewError(topo.Interrupted, c.prefix))
		c.mu.Unlock()
		c.loops.Wait()
		if !c.opts.LeaveConnOpen {
			c.conn.Close()
		}
	})
}

// covers reports whether the canonical path or prefix p is under the
// Cache's prefix.
func (c *Cache) covers(p string) bool { return strings.HasPrefix(p, c.prefix) }

// serving reports whether memory may answer now, and whether the answer is
// stale. Call with c.mu held.
func (c *Cache) serving() (ok, stale bool) {
	switch {
	case c.closed || c.health == OverLimit:
		return false, false
	case c.health == Healthy:
		return true, false
	case c.opts.MaxStaleness > 0 && time.Since(c.since) <= c.opts.MaxStaleness:
		return true, true
	}
	return false, false
}

// setHealth recomputes the health from broken and down, recording err as
// the reason when it leaves Healthy. Call with c.mu held.
func (c *Cache) setHealth(err error) {
	h := Healthy
	switch {
	case c.health == OverLimit || c.health == Closed:
		return
	case c.down:
		h = Stale
	case c.broken:
		h = Resyncing
	}
	if h == Healthy {
		err = nil
	}
	if err != nil || h == Healthy {
		c.err = err
	}
	if h == c.health {
		return
	}
	// Since marks the start of an outage: moving between Resyncing and
	// Stale keeps it, so MaxStaleness counts from the first failure.
	if h == Healthy || c.health == Healthy {
		c.since = time.Now()
	}
	c.log.Info("topo cache health", "health", h.String(), "err", err)
	c.health = h
	if c.opts.Hooks.OnHealth != nil {
		c.opts.Hooks.OnHealth(h, c.since)
	}
}

// signal wakes everyone waiting for memory or pending writes to change.
// Call with c.mu held.
func (c *Cache) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// noteStore notes the outcome of a call on the store made by the Cache or
// passed through it: Unavailable marks the store down; a success or a
// definite answer (NoNode, BadVersion, ...) marks it up; errors of the
// caller's context, and Closed, say nothing about the store.
func (c *Cache) noteStore(err error) {
	switch topo.CodeOf(err) {
	case topo.Timeout, topo.Interrupted, topo.Closed:
		return
	}
	down := topo.IsErrType(err, topo.Unavailable)
	c.mu.RLock()
	same := c.down == down && (down || time.Since(c.confirmed) < 100*time.Millisecond)
	c.mu.RUnlock()
	if same {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !down {
		c.confirmed = time.Now()
		if c.down && c.catchUp() {
			return
		}
		err = nil // an answer is no reason to leave Healthy: State().Err keeps the failure's
	}
	c.down = down
	c.setHealth(err)
}

// catchUp is called when the store is seen answering again (a probe, a
// call passed through, an event of the store watch) while the Cache is
// down. Memory may lag the store then: the watch resumed by the backend
// may still be on its way through what changed during the outage (and
// reads past MaxStaleness were answered by the store, newer than
// memory). So instead of turning Healthy, the Cache ends its store watch
// and lists the prefix again (see run); it stays Stale until that relist,
// which reads the store after the outage, has been applied. catchUp
// reports whether it did so (or already had); false when no relist is
// needed for it: the watch already ended (the relist under way will
// read the store), or the Cache no longer watches. Call with c.mu held.
func (c *Cache) catchUp() bool {
	if c.broken || c.closed || c.health == OverLimit {
		return false
	}
	if !c.catching {
		c.catching = true
		c.log.Info("topo cache: the store answers again, listing the prefix to catch up")
		c.endWatch()
	}
	return true
}

// relistFor ends the store watch so that the Cache lists the prefix
// again (Resyncing meanwhile), when a write of p can be settled by
// nothing else: a listing asked for after the write completed settles it
// (see relist). Nothing to do when the watch already ended (a relist is
// under way) or the Cache no longer watches. Call with c.mu held.
func (c *Cache) relistFor(p string) {
	if c.broken || c.closed || c.health == OverLimit || c.catching || c.relisting {
		return
	}
	c.relisting = true
	c.log.Info("topo cache: listing the prefix again to settle a deletion another writer's may be taken for", "path", p)
	c.endWatch()
}

// passRev records that memory reflects every change up to the store
// revision rev (0: none said), which the store watch passed (an event, a
// listing) or, with first unset, a barrier read. Revisions only grow in
// a store's history, and along one watch (topo.WatchData.Revision), so
// the first one a watch passes being below the revision already reached
// means that the store's history went back: a Consul agent that lost its
// state starts its indexes again. The revisions reached before say
// nothing of the new history then: rev is 0 (no promise) until the
// store's revisions reach the highest one from before, so that it never
// overstates and its non-zero values never decrease. Call with c.mu
// held.
func (c *Cache) passRev(rev int64, first bool) {
	if rev <= 0 {
		return
	}
	if first && !c.revSeen {
		c.revSeen = true
		c.wentBack(rev)
	}
	if c.revFloor > 0 {
		if rev < c.revFloor {
			return
		}
		c.revFloor = 0
	}
	c.rev = max(c.rev, rev)
}

// wentBack notes that the store's history went back when rev, the first
// revision a new store watch passed, is below the revision memory had
// reached (see passRev). Call with c.mu held.
func (c *Cache) wentBack(rev int64) {
	if rev >= c.rev || c.revFloor > 0 {
		return
	}
	c.log.Warn("topo cache: the store's revisions went back (it lost its history): Info.Revision is 0 until they pass the highest before", "revision", rev, "before", c.rev)
	c.revFloor, c.rev = c.rev, 0
}

// hook reports a read's outcome.
func (c *Cache) hook(op string, o Outcome) {
	if c.opts.Hooks.OnRead != nil {
		c.opts.Hooks.OnRead(op, o)
	}
}
