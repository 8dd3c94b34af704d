package cache

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/topokit/topokit/topo"
)

// watcher is one local Watch (one file) or WatchRecursive (a prefix) fed
// from memory. Its channel has room for Options.WatcherBuffer events plus
// the last one (an error), so sending never blocks.
type watcher struct {
	path      string
	recursive bool
	file      chan *topo.WatchData          // Watch
	tree      chan *topo.WatchDataRecursive // WatchRecursive
	buf       int
	stop      func() bool // stops the watcher's end by its context
}

func (w *watcher) matches(p string) bool {
	if w.recursive {
		return strings.HasPrefix(p, w.path)
	}
	return p == w.path
}

func (w *watcher) full() bool {
	if w.recursive {
		return len(w.tree) >= w.buf
	}
	return len(w.file) >= w.buf
}

// send queues one event (nil e: a deletion), with the revision memory
// has reached (see Info.Revision). Call with c.mu held.
func (w *watcher) send(p string, e *entry, rev int64) {
	wd := topo.WatchData{Err: topo.NewError(topo.NoNode, p), Revision: rev}
	if e != nil {
		wd = topo.WatchData{Contents: e.value, Version: e.version, Revision: rev}
	}
	if w.recursive {
		w.tree <- &topo.WatchDataRecursive{Path: p, WatchData: wd}
	} else {
		w.file <- &wd
	}
}

// Watch implements topo.Conn.Watch. A file under the prefix is watched
// from memory in Cached mode (sharing the Cache's one store watch): the
// current value, then every change the store watch delivers, in order; a
// deletion sends NoNode and closes the channel; ctx ending or Close sends
// Interrupted and closes it. A watcher that falls Options.WatcherBuffer
// events behind gets a ResourceExhausted *topo.Error wrapping
// ErrSlowWatcher and its channel closes. Contents slices are shared by
// every local watcher and must not be modified. Other paths, other modes,
// a file memory does not hold (the store then says NoNode, or watches a
// file created since) and a Cache that may not serve (see GetWithInfo) use
// the wrapped Conn's Watch; a file with a write of this Cache not yet delivered by the watch
// is waited for first (up to ctx), so its current value includes the
// write. Revision (see topo.WatchData) is the revision memory had reached
// (Info.Revision) when the value was taken or the event applied; the
// differences a relist applies carry the revision from before it.
//
// Neither the current value nor the events say whether memory was stale:
// a Watch registered while the Cache is Stale or Resyncing (within
// MaxStaleness) gets the value memory holds, unmarked, and while the
// store cannot be reached a local watcher simply gets no event. Use
// WatchWithInfo for the current value's Info, and State or
// Hooks.OnHealth for the Cache's health afterwards.
func (c *Cache) Watch(ctx context.Context, filePath string) (*topo.WatchData, <-chan *topo.WatchData, error) {
	cur, ch, _, err := c.WatchWithInfo(ctx, filePath)
	return cur, ch, err
}

// WatchWithInfo is Watch that also says where the current value came
// from, as GetWithInfo does: FromMemory for a local watcher, with Stale
// set when the Cache was not Healthy then (memory may lag the store;
// the events that follow carry no such mark: see Watch), Confirmed and
// Revision; for a watch of the wrapped Conn FromMemory is false and
// Confirmed the time of the call. Same errors as Watch.
func (c *Cache) WatchWithInfo(ctx context.Context, filePath string) (*topo.WatchData, <-chan *topo.WatchData, Info, error) {
	p, ok := c.memoryPath(ctx, filePath)
	if ok && modeOf(ctx, c.opts.Mode) == Cached && c.settled(ctx, p, true) {
		w := &watcher{path: p, buf: c.opts.WatcherBuffer, file: make(chan *topo.WatchData, c.opts.WatcherBuffer+1)}
		var cur *entry
		var info Info
		if c.register(ctx, w, &info, func() bool { cur = c.files[p]; return cur != nil }) && cur != nil {
			return &topo.WatchData{Contents: slices.Clone(cur.value), Version: cur.version, Revision: info.Revision}, w.file, info, nil
		}
	}
	cur, ch, err := c.conn.Watch(ctx, filePath)
	return cur, ch, Info{Confirmed: time.Now()}, err
}

// WatchRecursive implements topo.Conn.WatchRecursive. A prefix that starts
// with the Cache's prefix is watched from memory in Cached mode, as Watch
// is: every file under it (sorted by path), then every change and
// deletion (NoNode, the channel stays open) the store watch delivers, in
// order, with the same end events and Revision as Watch. As for Watch,
// nothing in the initial values or the events says that memory was
// stale: see WatchRecursiveWithInfo.
func (c *Cache) WatchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, error) {
	cur, ch, _, err := c.WatchRecursiveWithInfo(ctx, prefix)
	return cur, ch, err
}

// WatchRecursiveWithInfo is WatchRecursive that also says where the
// initial values came from, as WatchWithInfo does. Same errors as
// WatchRecursive.
func (c *Cache) WatchRecursiveWithInfo(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, Info, error) {
	p, err := topo.CleanPrefix(prefix)
	if err == nil && ctx.Err() == nil && c.covers(p) && modeOf(ctx, c.opts.Mode) == Cached && c.settled(ctx, p, false) {
		w := &watcher{path: p, recursive: true, buf: c.opts.WatcherBuffer,
			tree: make(chan *topo.WatchDataRecursive, c.opts.WatcherBuffer+1)}
		cur := []*topo.WatchDataRecursive{}
		var info Info
		if c.register(ctx, w, &info, func() bool {
			for path, e := range c.files {
				if strings.HasPrefix(path, p) {
					cur = append(cur, &topo.WatchDataRecursive{Path: path,
						WatchData: topo.WatchData{Contents: slices.Clone(e.value), Version: e.version, Revision: c.rev}})
				}
			}
			return true
		}) {
			slices.SortFunc(cur, func(a, b *topo.WatchDataRecursive) int { return strings.Compare(a.Path, b.Path) })
			return cur, w.tree, info, nil
		}
	}
	cur, ch, err := c.conn.WatchRecursive(ctx, prefix)
	return cur, ch, Info{Confirmed: time.Now()}, err
}

// settled waits until no write of this Cache under p (p itself when exact)
// is pending, for at most a few seconds or until ctx ends, and reports
// whether memory may serve then.
func (c *Cache) settled(ctx context.Context, p string, exact bool) bool {
	limit := time.NewTimer(5 * time.Second)
	defer limit.Stop()
	for {
		c.mu.RLock()
		ok, _ := c.serving()
		busy := c.pendingUnder(p, exact)
		changed := c.changed
		c.mu.RUnlock()
		if !ok || !busy {
			return ok
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		case <-limit.C:
			return false
		}
	}
}

// register reports whether memory may still serve, and if so fills info
// (as an answer from memory), runs initial (under the lock, reading the
// initial values) and adds w to the local watchers when initial returns
// true.
func (c *Cache) register(ctx context.Context, w *watcher, info *Info, initial func() bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok, stale := c.serving()
	if !ok {
		return false
	}
	*info = Info{FromMemory: true, Stale: stale, Confirmed: c.confirmed, Revision: c.rev}
	if !initial() {
		return true
	}
	c.watchers[w] = struct{}{}
	c.countWatchers()
	w.stop = context.AfterFunc(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.endWatcher(w, topo.NewError(topo.Interrupted, w.path))
	})
	return true
}

// notify sends one change (nil e: a deletion) to the local watchers of p,
// dropping those whose buffer is full. Call with c.mu held.
func (c *Cache) notify(p string, e *entry) {
	for w := range c.watchers {
		if !w.matches(p) {
			continue
		}
		if w.full() {
			c.log.Warn("topo cache dropping a slow watcher", "path", w.path, "buffer", w.buf)
			c.endWatcher(w, &topo.Error{Code: topo.ResourceExhausted, Path: w.path, Err: ErrSlowWatcher})
			continue
		}
		w.send(p, e, c.rev)
		if e == nil && !w.recursive {
			c.endWatcher(w, nil) // Watch's deletion event is its last
		}
	}
}

// endWatcher sends err (if not nil) as w's last event and closes its
// channel. Call with c.mu held.
func (c *Cache) endWatcher(w *watcher, err error) {
	if _, ok := c.watchers[w]; !ok {
		return
	}
	delete(c.watchers, w)
	if err != nil {
		if w.recursive {
			w.tree <- &topo.WatchDataRecursive{Path: w.path, WatchData: topo.WatchData{Err: err}}
		} else {
			w.file <- &topo.WatchData{Err: err}
		}
	}
	if w.recursive {
		close(w.tree)
	} else {
		close(w.file)
	}
	w.stop()
	c.countWatchers()
}

// endWatchers ends every local watcher with err. Call with c.mu held.
func (c *Cache) endWatchers(err error) {
	for w := range c.watchers {
		c.endWatcher(w, err)
	}
}

func (c *Cache) countWatchers() {
	if c.opts.Hooks.OnWatchers != nil {
		c.opts.Hooks.OnWatchers(len(c.watchers))
	}
}
