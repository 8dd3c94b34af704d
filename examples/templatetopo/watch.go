package templatetopo

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Watches. A watch registers its watcher in the request that reads the
// current value, so no write falls between; the store records later
// changes in it (Store.record) and the watch's goroutine sends them: rapid
// writes of one file coalesce; a deletion is always sent.

// Watch implements topo.Conn.Watch. The first value is read in the call
// (NoNode, with no channel, when the file is absent). A deletion sends
// NoNode and closes the channel; ctx's end or Close sends Interrupted and
// closes it. While the Conn is cut nothing is sent; what happened arrives
// after Heal.
func (c *Conn) Watch(ctx context.Context, filePath string) (*topo.WatchData, <-chan *topo.WatchData, error) {
	if err := backendkit.CheckContext(ctx, filePath); err != nil {
		return nil, nil, err
	}
	p, err := topo.CleanFilePath(filePath)
	if err != nil {
		return nil, nil, err
	}
	var cur *file
	var w *watcher
	err = c.do(func(s *Store) error {
		f := s.files[c.full(p)]
		if f == nil {
			return errNotFound
		}
		cur, w = f.snapshot(), s.watch(c.full(p), true)
		return nil
	})
	if err != nil {
		return nil, nil, c.mapErr(ctx, err, p)
	}
	ch := make(chan *topo.WatchData, 1)
	go func() {
		defer close(ch)
		defer c.unwatch(w)
		for {
			changes, ok := c.take(ctx, w)
			if !ok {
				ch <- &topo.WatchData{Err: topo.NewError(topo.Interrupted, p)}
				return
			}
			for _, chg := range changes {
				if chg.gone {
					ch <- &topo.WatchData{Err: topo.NewError(topo.NoNode, p)}
					return
				}
				ch <- &topo.WatchData{Contents: chg.now.data, Version: topo.NumericVersion(chg.now.version)}
			}
		}
	}()
	return &topo.WatchData{Contents: cur.data, Version: topo.NumericVersion(cur.version)}, ch, nil
}

// WatchRecursive implements topo.Conn.WatchRecursive: the current files
// below the plain string prefix, then per-file events in path order for
// each batch of changes (a deletion is an event with Err NoNode and the
// channel stays open; a file deleted and created again gives its deletion,
// then its new value). ctx's end or Close sends Interrupted and closes the
// channel.
func (c *Conn) WatchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, error) {
	if err := backendkit.CheckContext(ctx, prefix); err != nil {
		return nil, nil, err
	}
	p, err := topo.CleanPrefix(prefix)
	if err != nil {
		return nil, nil, err
	}
	var initial []*topo.WatchDataRecursive
	var w *watcher
	err = c.do(func(s *Store) error {
		fp := c.fullPrefix(p)
		for full, f := range s.files {
			if strings.HasPrefix(full, fp) {
				initial = append(initial, &topo.WatchDataRecursive{Path: c.rel(full),
					WatchData: topo.WatchData{Contents: append([]byte{}, f.data...), Version: topo.NumericVersion(f.version)}})
			}
		}
		w = s.watch(fp, false)
		return nil
	})
	if err != nil {
		return nil, nil, c.mapErr(ctx, err, p)
	}
	slices.SortFunc(initial, func(a, b *topo.WatchDataRecursive) int { return strings.Compare(a.Path, b.Path) })
	ch := make(chan *topo.WatchDataRecursive, 1)
	go func() {
		defer close(ch)
		defer c.unwatch(w)
		for {
			changes, ok := c.take(ctx, w)
			if !ok {
				ch <- &topo.WatchDataRecursive{Path: p, WatchData: topo.WatchData{Err: topo.NewError(topo.Interrupted, p)}}
				return
			}
			for _, full := range slices.Sorted(maps.Keys(changes)) {
				chg, path := changes[full], c.rel(full)
				if chg.gone {
					ch <- &topo.WatchDataRecursive{Path: path, WatchData: topo.WatchData{Err: topo.NewError(topo.NoNode, path)}}
				}
				if chg.now != nil {
					ch <- &topo.WatchDataRecursive{Path: path, WatchData: topo.WatchData{Contents: chg.now.data, Version: topo.NumericVersion(chg.now.version)}}
				}
			}
		}
	}()
	return initial, ch, nil
}

// take waits until w has changes and takes them, as a request of the
// watch (Conn.observe). It reports false when ctx ended or the Conn was
// closed first.
func (c *Conn) take(ctx context.Context, w *watcher) (map[string]*change, bool) {
	for {
		select {
		case <-w.signal:
		case <-ctx.Done():
			return nil, false
		case <-c.closing:
			return nil, false
		}
		var changes map[string]*change
		if _, ok := c.observe(ctx, func(*Store) { changes, w.pending = w.pending, map[string]*change{} }); !ok {
			return nil, false
		}
		if len(changes) > 0 {
			return changes, true
		}
	}
}

// unwatch removes w from the store.
func (c *Conn) unwatch(w *watcher) {
	defer c.store.lock()()
	delete(c.store.watchers, w)
}
