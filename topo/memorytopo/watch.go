package memorytopo

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// watcher is one Watch or WatchRecursive. Writers push events into it
// without blocking; its goroutine (run) forwards them, coalescing per
// file while the caller is slow. A writer sends a Watch's change straight
// into the caller's channel when nothing is pending or in flight.
type watcher struct {
	c         *Conn
	full      string // full path (Watch) or full prefix (WatchRecursive)
	recursive bool
	notify    chan struct{} // capacity 1: "something is pending"
	broken    chan struct{} // closed by Factory.BreakWatches
	brokenErr error         // set before broken is closed

	mu      sync.Mutex
	pending map[string]*fileState // full path -> latest state (nil = deleted)
	order   []string              // paths in pending, in first-pushed order
	// deleted holds the paths of pending states (never nil) pushed over a
	// pending deletion: the deletion is sent first, never coalesced away
	// (a WatchRecursive reports a re-created file deleted, then again).
	// Made at its first use.
	deleted map[string]bool
	direct  chan *topo.WatchData // a Watch's channel; nil for WatchRecursive
	busy    bool                 // the goroutine holds a popped event
	slot    int                  // a Watch's index in fileWatches.slots
	popped  uint64               // events the goroutine has taken
	// last is the revision of the last change pushed, mark the Revision
	// of the last event taken: last once nothing older is pending. A
	// direct send sets neither: a Watch has one file, so its goroutine
	// reads mark only right after a push.
	last, mark int64
}

func (fs *fileState) watchData(rev int64) *topo.WatchData {
	return &topo.WatchData{Contents: bytes.Clone(fs.contents), Version: fs.ver, Revision: rev}
}

// fileWatches is the Watches of one file, one slot each, holding what a
// writer needs to send a change without a lock or a read of the watcher.
// A slot's queued changes with the pushes to its file, which the store's
// locking serialises.
type fileWatches struct {
	slots []fileWatch
}

type fileWatch struct {
	out chan *topo.WatchData // w.direct
	w   *watcher
	// queued: the last change for w was queued by w.push, so the next
	// one goes through push too, in order. While false, w has nothing
	// pending nor in flight, so a direct send keeps the order.
	queued bool
}

// notify tells the Watches of the file at full path p its new state fs
// (nil: deleted) at revision rev. Never blocks.
func (fw *fileWatches) notify(p string, fs *fileState, rev int64) {
	for i := range fw.slots {
		sl := &fw.slots[i]
		// len is a hint: a full channel skips the copy.
		if !sl.queued && fs != nil && len(sl.out) < cap(sl.out) {
			select {
			case sl.out <- fs.watchData(rev):
				continue
			default:
			}
		}
		sl.queued = !sl.w.push(p, fs, rev)
	}
}

// remove unregisters w, if slotted here, and reports whether no slot is left.
func (fw *fileWatches) remove(w *watcher) (empty bool) {
	last := len(fw.slots) - 1
	if w.slot > last || fw.slots[w.slot].w != w {
		return false
	}
	moved := fw.slots[last]
	fw.slots[w.slot] = moved
	moved.w.slot = w.slot
	fw.slots[last] = fileWatch{}
	fw.slots = fw.slots[:last]
	return last == 0
}

// register registers a watcher of full (a prefix when recursive) once c
// is open and read has read the current state at revision rev, where it
// starts; read's error registers nothing.
func (c *Conn) register(p, full string, recursive bool, direct chan *topo.WatchData, read func(rev int64) error) (*watcher, error) {
	s := c.s
	s.lock()
	defer s.mu.Unlock()
	if err := c.closedErr(p); err != nil {
		return nil, err
	}
	rev := s.rev.Load()
	if err := read(rev); err != nil {
		return nil, err
	}
	w := &watcher{c: c, full: full, recursive: recursive, direct: direct, notify: make(chan struct{}, 1), broken: make(chan struct{}), pending: map[string]*fileState{}, last: rev, mark: rev}
	if recursive {
		s.recWatchers[w] = struct{}{}
		return w, nil
	}
	fw := s.fileWatchers[full]
	if fw == nil {
		fw = &fileWatches{}
		s.fileWatchers[full] = fw
	}
	w.slot = len(fw.slots)
	fw.slots = append(fw.slots, fileWatch{out: w.direct, w: w})
	return w, nil
}

func recursiveData(rel string, fs *fileState, rev int64) *topo.WatchDataRecursive {
	if fs == nil {
		return &topo.WatchDataRecursive{Path: rel, WatchData: topo.WatchData{Err: topo.NewError(topo.NoNode, rel), Revision: rev}}
	}
	return &topo.WatchDataRecursive{Path: rel, WatchData: *fs.watchData(rev)}
}

// push records the state fs (nil: deleted) of the file at full path p at
// revision rev, and reports whether it sent it straight to the caller.
// Never blocks.
func (w *watcher) push(p string, fs *fileState, rev int64) (sent bool) {
	w.mu.Lock()
	w.last = rev
	if w.direct != nil && fs != nil && len(w.order) == 0 && !w.busy {
		// The channel is open: run closes it only after unregistering w.
		select {
		case w.direct <- fs.watchData(rev):
			w.mark = rev
			w.mu.Unlock()
			return true
		default:
		}
	}
	old, ok := w.pending[p]
	switch {
	case !ok:
		w.order = append(w.order, p)
	case old == nil && fs != nil:
		if w.deleted == nil {
			w.deleted = map[string]bool{}
		}
		w.deleted[p] = true
	case fs == nil:
		delete(w.deleted, p) // the pending state is a deletion again
	}
	w.pending[p] = fs
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
	return false
}

// pop takes the oldest pending event, with the revision the watch has
// reached (mark); w is busy until a pop finds none.
func (w *watcher) pop() (p string, fs *fileState, rev int64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.order) == 0 {
		w.busy = false
		return "", nil, 0, false
	}
	w.busy = true
	w.popped++
	p = w.order[0]
	if w.deleted[p] {
		delete(w.deleted, p)
		return p, nil, w.mark, true
	}
	w.order = w.order[1:]
	fs = w.pending[p]
	delete(w.pending, p)
	if len(w.order) == 0 {
		w.mark = w.last
	}
	return p, fs, w.mark, true
}

// notifyFile tells the watchers of the file at full path p its new state
// fs (nil: deleted) at revision rev. With mu held only for reading
// (updateInPlace), fs is never nil and no WatchRecursive is registered.
func (s *store) notifyFile(p string, fs *fileState, rev int64) {
	if fw := s.fileWatchers[p]; fw != nil {
		fw.notify(p, fs, rev)
		if fs == nil {
			// A Watch ends with the delete.
			delete(s.fileWatchers, p)
		}
	}
	for w := range s.recWatchers {
		if strings.HasPrefix(p, w.full) {
			w.push(p, fs, rev)
		}
	}
}

func (s *store) breakWatchers(err error) int {
	s.lock()
	defer s.mu.Unlock()
	n := 0
	end := func(w *watcher) {
		w.brokenErr = err
		close(w.broken)
		n++
	}
	for p, fw := range s.fileWatchers {
		for _, sl := range fw.slots {
			end(sl.w)
		}
		delete(s.fileWatchers, p)
	}
	for w := range s.recWatchers {
		end(w)
		delete(s.recWatchers, w)
	}
	return n
}

func (s *store) unregister(w *watcher) {
	s.lock()
	defer s.mu.Unlock()
	if w.recursive {
		delete(s.recWatchers, w)
		return
	}
	if fw := s.fileWatchers[w.full]; fw != nil && fw.remove(w) {
		delete(s.fileWatchers, w.full)
	}
}

// interrupted returns the Err of a stopped watch's last event: the error
// given to BreakWatches, or Interrupted.
func (w *watcher) interrupted(ctx context.Context, p string) error {
	select {
	case <-w.broken:
		return faultErr(w.brokenErr, p)
	default:
	}
	cause := ctx.Err()
	if cause == nil {
		cause = errors.New("connection closed")
	}
	return backendkit.Wrap(topo.Interrupted, p, cause)
}

// Watch implements topo.Conn.Watch with one goroutine, which exits once
// the last event is received. Revision is the store's for the current
// value, the change's for an event.
func (c *Conn) Watch(ctx context.Context, filePath string) (*topo.WatchData, <-chan *topo.WatchData, error) {
	p, err := c.begin(ctx, OpWatch, filePath, topo.CleanFilePath)
	if err != nil {
		return nil, nil, err
	}
	out := make(chan *topo.WatchData, 1)
	var cur *topo.WatchData
	wr, err := c.register(p, c.full(p), false, out, func(rev int64) error {
		n := c.s.lookup(c.full(p))
		if n == nil || n.file.Load() == nil {
			return topo.NewError(topo.NoNode, p)
		}
		cur = n.file.Load().watchData(rev)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	go run(ctx, wr, out, func(_ string, fs *fileState, rev int64) (*topo.WatchData, bool) {
		if fs == nil {
			return &topo.WatchData{Err: topo.NewError(topo.NoNode, p), Revision: rev}, true
		}
		return fs.watchData(rev), false
	}, func() *topo.WatchData {
		return &topo.WatchData{Err: wr.interrupted(ctx, p)}
	})
	return cur, out, nil
}

// run forwards w's events to out until one event reports last or, once
// ctx ends, the Conn closes or w breaks, the pending ones and
// interrupted's. Then it closes out.
func run[T any](ctx context.Context, w *watcher, out chan<- T, event func(full string, fs *fileState, rev int64) (T, bool), interrupted func() T) {
	defer close(out)
	stopped := false
	stop := func() {
		stopped = true
		w.c.s.unregister(w)
	}
	// send delivers ev, stopping w first if it stops while blocked.
	send := func(ev T) {
		if !stopped {
			select {
			case out <- ev:
				return
			case <-ctx.Done():
			case <-w.c.done:
			case <-w.broken:
			}
			stop()
		}
		out <- ev
	}
	for {
		select {
		case <-w.notify:
		case <-ctx.Done():
			stop()
		case <-w.c.done:
			stop()
		case <-w.broken:
			stop()
		}
		for {
			full, fs, rev, ok := w.pop()
			if !ok {
				break
			}
			ev, last := event(full, fs, rev)
			send(ev)
			if last {
				if !stopped {
					w.c.s.unregister(w)
				}
				return
			}
		}
		if stopped {
			out <- interrupted()
			return
		}
	}
}

// WatchRecursive implements topo.Conn.WatchRecursive with one goroutine,
// which exits once the final event is received. The initial list is
// sorted by path, maybe empty; events of one file may be coalesced, the
// last carrying its latest state, but a deletion is not: a file deleted
// and created again is reported deleted, then with its new state.
// Revision is the store's for the initial list; for an event, that of
// the last change queued once no other is queued, the one reached before
// otherwise.
func (c *Conn) WatchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, error) {
	cur, out, _, err := c.WatchRecursiveSyncRevision(ctx, prefix)
	return cur, out, err
}

// WatchRecursiveSync is WatchRecursive plus sync, as topo/cache's
// SyncWatcher describes. Writes queue their events before they return,
// so sync returns the events taken plus those queued. sync is counted,
// partitioned and faulted as a Get of prefix (Closed after Close), and
// returns Interrupted once the watch has ended.
func (c *Conn) WatchRecursiveSync(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, func(context.Context) (uint64, error), error) {
	cur, out, sync, err := c.WatchRecursiveSyncRevision(ctx, prefix)
	if err != nil {
		return nil, nil, nil, err
	}
	return cur, out, backendkit.SyncCount(sync), nil
}

// WatchRecursiveSyncRevision is WatchRecursiveSync whose sync also
// returns the store's revision (topo/cache's RevisionSyncWatcher): while
// a WatchRecursive is registered every write queues its events under the
// write lock, so every change up to that revision is among the n events.
// Same errors.
func (c *Conn) WatchRecursiveSyncRevision(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, func(context.Context) (uint64, int64, error), error) {
	p, err := c.begin(ctx, OpWatchRecursive, prefix, topo.CleanPrefix)
	if err != nil {
		return nil, nil, nil, err
	}
	cur := []*topo.WatchDataRecursive{}
	wr, err := c.register(p, c.fullPrefix(p), true, nil, func(rev int64) error {
		c.s.walkPrefix(c.fullPrefix(p), func(full string, fs *fileState) {
			cur = append(cur, recursiveData(c.rel(full), fs, rev))
		})
		return nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	slices.SortFunc(cur, func(a, b *topo.WatchDataRecursive) int { return strings.Compare(a.Path, b.Path) })
	out := make(chan *topo.WatchDataRecursive)
	go run(ctx, wr, out, func(full string, fs *fileState, rev int64) (*topo.WatchDataRecursive, bool) {
		return recursiveData(c.rel(full), fs, rev), false
	}, func() *topo.WatchDataRecursive {
		return &topo.WatchDataRecursive{Path: p, WatchData: topo.WatchData{Err: wr.interrupted(ctx, p)}}
	})
	sync := func(sctx context.Context) (uint64, int64, error) {
		p, err := c.begin(sctx, OpGet, prefix, topo.CleanPrefix)
		if err != nil {
			return 0, 0, err
		}
		select {
		case <-wr.broken:
		case <-ctx.Done():
		default:
			s := c.s
			s.rlock()
			defer s.mu.RUnlock()
			wr.mu.Lock()
			defer wr.mu.Unlock()
			return wr.popped + uint64(len(wr.order)+len(wr.deleted)), s.rev.Load(), nil
		}
		return 0, 0, wr.interrupted(ctx, p)
	}
	return cur, out, sync, nil
}
