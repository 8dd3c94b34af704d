package etcd2topo

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// msgResync is the debug message logged each time a watch finds its
// history compacted and re-reads the current state.
const msgResync = "watch history compacted; re-reading"

// watchBuffer is the capacity of the channels Watch and WatchRecursive
// return.
const watchBuffer = 16

// errCompacted tells follow that the history next was resuming from was
// compacted: it reads the current state and reopens the watch after it.
var errCompacted = errors.New("etcd2topo: watch history compacted")

// stream is one etcd watch on a key or a prefix that survives transient
// failures: it remembers the last revision it saw and, when the etcd
// client's watch channel ends (no leader, member gone for good, ...),
// opens a new watch from the next revision, pausing between attempts.
// Events at or below that revision are dropped, so nothing is seen twice.
type stream struct {
	c    *Conn
	ctx  context.Context // the caller's
	key  string
	opts []clientv3.OpOption // WithPrefix() for a prefix, none for a key
	path string

	wch    clientv3.WatchChan
	cancel context.CancelFunc
	rev    int64 // every change up to rev is known to the user

	// onProgress, if set, is called with s.rev on each progress
	// notification, from next (every event next returned before was
	// handled by then).
	onProgress func(rev int64)
}

// newStream opens a watch on key (or on every key under it, with prefix)
// at the store's current revision, waits until etcd confirms it, then
// reads the current state (returned), from whose revision on the stream
// delivers every change. Opening at the current revision rather than at a
// past one puts the watch in etcd's synced watcher group, which is
// notified as each write is applied; a watch at a past revision is caught
// up by a background pass every 100 ms.
func (c *Conn) newStream(ctx context.Context, key string, prefix bool, path string) (*stream, *clientv3.GetResponse, error) {
	s := &stream{c: c, ctx: ctx, key: key, path: path}
	if prefix {
		s.opts = []clientv3.OpOption{clientv3.WithPrefix()}
	}
	s.open(0, clientv3.WithCreatedNotify())
	if err := c.watchCreated(ctx, s.wch, path); err != nil {
		s.cancel()
		if errors.Is(err, errRewatch) {
			return nil, nil, backendkit.Wrap(topo.Unavailable, path, errors.New("etcd refused the watch (no leader?)"))
		}
		return nil, nil, err
	}
	resp, err := s.c.cli.Get(s.ctx, s.key, s.opts...)
	if err != nil {
		s.cancel()
		return nil, nil, c.convertError(ctx, err, path)
	}
	s.rev = resp.Header.Revision
	return s, resp, nil
}

func (s *stream) open(rev int64, extra ...clientv3.OpOption) {
	var wctx context.Context
	wctx, s.cancel = s.c.watchContext(s.ctx)
	opts := slices.Concat([]clientv3.OpOption{clientv3.WithProgressNotify()}, extra, s.opts)
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	s.wch = s.c.cli.Watch(wctx, s.key, opts...)
}

// ended returns the Interrupted error that ends a watch whose caller's
// context ended or whose Conn closed, or nil if neither happened.
func (s *stream) ended() error {
	if err := s.ctx.Err(); err != nil {
		return backendkit.Wrap(topo.Interrupted, s.path, err)
	}
	if s.c.isClosed() {
		return backendkit.Wrap(topo.Interrupted, s.path, errors.New("connection closed"))
	}
	return nil
}

// next returns the next events after s.rev. It returns errCompacted when
// the history needed to resume was compacted (see follow), an Interrupted error when the caller's context ended
// or the Conn closed, and PermissionDenied (never retried) when etcd
// cancelled the watch for want of permission. It never returns an empty batch.
func (s *stream) next() ([]*clientv3.Event, error) {
	backoff := 20 * time.Millisecond
	for {
		wr, ok := <-s.wch
		if ok && !wr.Canceled && wr.Err() == nil {
			if wr.IsProgressNotify() {
				s.rev = max(s.rev, wr.Header.Revision)
				if s.onProgress != nil {
					s.onProgress(s.rev)
				}
				continue
			}
			evs := wr.Events[:0:0]
			for _, ev := range wr.Events {
				if ev.Kv.ModRevision > s.rev {
					evs = append(evs, ev)
				}
			}
			if len(evs) > 0 {
				s.rev = evs[len(evs)-1].Kv.ModRevision
				return evs, nil
			}
			continue
		}
		if err := s.ended(); err != nil {
			return nil, err
		}
		s.cancel()
		if ok && isPermanent(wr.Err()) {
			return nil, backendkit.Wrap(topo.PermissionDenied, s.path, wr.Err())
		}
		if ok && wr.CompactRevision != 0 {
			s.c.log.Debug(msgResync, "path", s.path, "rev", s.rev)
			return nil, errCompacted
		}
		if ok {
			s.c.log.Debug("watch ended; resuming", "path", s.path, "rev", s.rev, "err", wr.Err())
		}
		if !s.c.sleep(s.ctx, backoff) { // the caller's ctx ended, or the Conn closed
			return nil, s.ended()
		}
		backoff = min(2*backoff, time.Second)
		s.open(s.rev + 1)
	}
}

// read reads the watched key or prefix until it succeeds, pausing between
// failures, or returns the ending error, or the PermissionDenied error of
// a refused read (never retried).
func (s *stream) read() (*clientv3.GetResponse, error) {
	backoff := 20 * time.Millisecond
	for {
		resp, err := s.c.cli.Get(s.ctx, s.key, s.opts...)
		if err == nil {
			return resp, nil
		}
		if e := s.ended(); e != nil {
			return nil, e
		}
		if isPermanent(err) {
			return nil, s.c.convertError(s.ctx, err, s.path)
		}
		s.c.log.Debug("re-reading a watched path", "path", s.path, "err", err)
		if !s.c.sleep(s.ctx, backoff) {
			return nil, s.ended()
		}
		backoff = min(2*backoff, time.Second)
	}
}

// follow hands each batch of events after s.rev to events and, when the
// history was compacted, a re-read of the current state to resync (the
// watch then reopens after it), until one of them returns false (nil) or
// the stream ends (next's or read's error).
func (s *stream) follow(resync func(*clientv3.GetResponse) bool, events func([]*clientv3.Event) bool) error {
	for {
		evs, err := s.next()
		if errors.Is(err, errCompacted) {
			var resp *clientv3.GetResponse
			if resp, err = s.read(); err == nil {
				if !resync(resp) {
					return nil
				}
				s.cancel()
				s.rev = resp.Header.Revision
				s.open(s.rev + 1)
				continue
			}
		}
		if err != nil {
			return err
		}
		if !events(evs) {
			return nil
		}
	}
}

// Watch returns the current contents and ModRevision of filePath and a
// channel of its later changes. It opens an etcd watch at the current
// revision first and reads the file second, so that no change is missed
// and changes arrive as soon as etcd applies them. The watch resumes from
// the last revision it saw after transient failures and member changes;
// if that history was compacted, it re-reads the file and sends its
// current value (or NoNode if it was deleted meanwhile). It returns NoNode
// (and no channel) if the file does not exist. Revision (see
// topo.WatchData) is the read's header revision for the current value and
// a re-read, the change's revision for an event.
func (c *Conn) Watch(ctx context.Context, filePath string) (*topo.WatchData, <-chan *topo.WatchData, error) {
	p, err := backendkit.Begin(ctx, filePath, topo.CleanFilePath, c.isClosed)
	if err != nil {
		return nil, nil, err
	}
	s, resp, err := c.newStream(ctx, c.key(p), false, p)
	if err != nil {
		return nil, nil, err
	}
	if len(resp.Kvs) == 0 {
		s.cancel()
		return nil, nil, topo.NewError(topo.NoNode, p)
	}
	kv := resp.Kvs[0]
	cur := &topo.WatchData{Contents: kv.Value, Version: topo.NumericVersion(kv.ModRevision), Revision: resp.Header.Revision}
	out := make(chan *topo.WatchData, watchBuffer)
	go func() {
		defer close(out)
		defer s.cancel()
		last := kv.ModRevision
		err := s.follow(func(resp *clientv3.GetResponse) bool {
			if len(resp.Kvs) == 0 {
				out <- &topo.WatchData{Err: topo.NewError(topo.NoNode, p), Revision: resp.Header.Revision}
				return false
			}
			if kv := resp.Kvs[0]; kv.ModRevision > last {
				last = kv.ModRevision
				out <- &topo.WatchData{Contents: kv.Value, Version: topo.NumericVersion(kv.ModRevision), Revision: resp.Header.Revision}
			}
			return true
		}, func(evs []*clientv3.Event) bool {
			for _, ev := range evs {
				if ev.Type == mvccpb.DELETE {
					out <- &topo.WatchData{Err: topo.NewError(topo.NoNode, p), Revision: ev.Kv.ModRevision}
					return false
				}
				last = ev.Kv.ModRevision
				out <- &topo.WatchData{Contents: ev.Kv.Value, Version: topo.NumericVersion(ev.Kv.ModRevision), Revision: ev.Kv.ModRevision}
			}
			return true
		})
		if err != nil {
			out <- &topo.WatchData{Err: err}
		}
	}()
	return cur, out, nil
}

// WatchRecursive returns every file whose path starts with prefix, each
// with its own ModRevision, and a channel of per-file changes and deletes
// (Err NoNode). Lock and election keys are left out. Like Watch, it opens
// the etcd watch at the current revision before reading, and resumes after
// transient failures; if the history was compacted it re-reads the prefix
// and reports every file that changed, appeared or disappeared meanwhile.
// Revision (see topo.WatchData) is the listing's header revision for the
// initial values; for an event, its change's revision if it is the last
// event of that revision, the revision before otherwise; after a re-read,
// the read's header revision on the last difference.
func (c *Conn) WatchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, error) {
	init, out, _, err := c.watchRecursive(ctx, prefix)
	return init, out, err
}

// watchRecursive is WatchRecursive, also returning how far its channel
// has got.
func (c *Conn) watchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, *watchSync, error) {
	p, err := backendkit.Begin(ctx, prefix, topo.CleanPrefix, c.isClosed)
	if err != nil {
		return nil, nil, nil, err
	}
	k := c.key(p)
	s, resp, err := c.newStream(ctx, k, true, p)
	if err != nil {
		return nil, nil, nil, err
	}
	ws := &watchSync{s: s, rev: s.rev, moved: make(chan struct{}), done: make(chan struct{})}
	var sent uint64 // events sent, by the goroutine below (which runs s.next)
	s.onProgress = func(rev int64) { ws.advance(rev, sent) }
	known := backendkit.Snapshot{} // file -> ModRevision last reported
	initial := known.Diff(c.files(resp.Kvs))
	for _, wd := range initial {
		wd.Revision = resp.Header.Revision
	}
	out := make(chan *topo.WatchDataRecursive, watchBuffer)
	go func() {
		defer close(ws.done)
		defer close(out)
		defer s.cancel()
		mark := resp.Header.Revision // the Revision of the last value sent
		// sendAll sends batch, changes made by revisions up to rev (the
		// i-th at revs[i]; revs nil when not known), stamped (see
		// backendkit.Stamp).
		sendAll := func(batch []*topo.WatchDataRecursive, revs []int64, rev int64) {
			mark = backendkit.Stamp(batch, revs, mark, rev)
			for _, wd := range batch {
				out <- wd
				sent++
			}
		}
		var batch []*topo.WatchDataRecursive
		var revs []int64
		add := func(wd *topo.WatchDataRecursive, rev int64) {
			batch, revs = append(batch, wd), append(revs, rev)
		}
		err := s.follow(func(resp *clientv3.GetResponse) bool {
			// The differences are not in revision order: until the
			// last, the watch has got no further than before.
			sendAll(known.Diff(c.files(resp.Kvs)), nil, resp.Header.Revision)
			ws.advance(resp.Header.Revision, sent)
			return true
		}, func(evs []*clientv3.Event) bool {
			batch, revs = batch[:0], revs[:0]
			for _, ev := range evs {
				rel := c.rel(ev.Kv.Key)
				if topo.IsReserved(rel) {
					continue
				}
				if ev.Type == mvccpb.DELETE {
					delete(known, rel)
					add(&topo.WatchDataRecursive{Path: rel, WatchData: topo.WatchData{Err: topo.NewError(topo.NoNode, rel)}}, ev.Kv.ModRevision)
					continue
				}
				known[rel] = ev.Kv.ModRevision
				add(&topo.WatchDataRecursive{Path: rel, WatchData: topo.WatchData{
					Contents: ev.Kv.Value, Version: topo.NumericVersion(ev.Kv.ModRevision)}}, ev.Kv.ModRevision)
			}
			// etcd sends the events of one revision in one response.
			sendAll(batch, revs, s.rev)
			ws.advance(s.rev, sent)
			return true
		})
		// Both handlers go on: follow ends only with an error.
		out <- &topo.WatchDataRecursive{Path: p, WatchData: topo.WatchData{Err: err}}
	}()
	return initial, out, ws, nil
}

// files returns the files among kvs, a read of a prefix, in kvs' order:
// keys at reserved paths (lock and election keys) are left out.
func (c *Conn) files(kvs []*mvccpb.KeyValue) []backendkit.FileState {
	var out []backendkit.FileState
	for _, kv := range kvs {
		if rel := c.rel(kv.Key); !topo.IsReserved(rel) {
			out = append(out, backendkit.FileState{Path: rel, Contents: kv.Value, Version: kv.ModRevision})
		}
	}
	return out
}
