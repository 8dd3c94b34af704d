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

// msgResync is logged when a watch re-reads after a compaction.
const msgResync = "watch history compacted; re-reading"

const watchBuffer = 16 // capacity of Watch's and WatchRecursive's channels

// errCompacted: the history next resumes from was compacted.
var errCompacted = errors.New("etcd2topo: watch history compacted")

// stream is an etcd watch on a key or prefix that survives transient
// failures: when the client's channel ends it opens a new watch after the
// last revision seen, pausing between attempts; nothing is seen twice.
type stream struct {
	c    *Conn
	ctx  context.Context // the caller's
	key  string
	opts []clientv3.OpOption // WithPrefix() for a prefix, none for a key
	path string

	wch    clientv3.WatchChan
	cancel context.CancelFunc
	rev    int64 // every change up to rev is known to the user

	// onProgress, if set, is called by next with s.rev on each progress
	// notification (every event returned before was handled by then).
	onProgress func(rev int64)
}

// newStream opens a watch on key (with prefix, every key under it) at the
// current revision, waits for etcd to confirm it, then reads the current
// state (returned); the stream delivers every change after the read. At
// the current revision the watch is in etcd's synced group, notified as
// each write is applied; one at a past revision is caught up every 100 ms.
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

// ended returns Interrupted once the caller's context or the Conn ended.
func (s *stream) ended() error {
	if err := s.ctx.Err(); err != nil {
		return backendkit.Wrap(topo.Interrupted, s.path, err)
	}
	if s.c.isClosed() {
		return backendkit.Wrap(topo.Interrupted, s.path, errors.New("connection closed"))
	}
	return nil
}

// next returns the next events after s.rev, never none; errCompacted,
// ended's error, or PermissionDenied (never retried).
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

// read reads the watched key or prefix, retrying as next does.
func (s *stream) read() (*clientv3.GetResponse, error) {
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
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
	}
}

// follow hands each batch of events to events and, after a compaction,
// a re-read to resync (the watch reopens after it), until one returns
// false (nil) or the stream ends (next's or read's error).
func (s *stream) follow(resync func(*clientv3.GetResponse) bool, events func([]*clientv3.Event) bool) error {
	for {
		evs, err := s.next()
		if errors.Is(err, errCompacted) {
			var resp *clientv3.GetResponse
			if resp, err = s.read(); err == nil {
				if !resync(resp) {
					return nil
				}
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

// Watch returns the current contents and ModRevision of filePath, or
// NoNode, and a channel of its later changes (see newStream: none missed).
// After a compaction it re-reads the file and sends its value, or NoNode
// if it was deleted meanwhile (also when it was re-created since: its
// CreateRevision tells). Revision (topo.WatchData) is the read's
// header revision for a read value, the change's revision for an event.
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
		last, created := kv.ModRevision, kv.CreateRevision
		err := s.follow(func(resp *clientv3.GetResponse) bool {
			// Another CreateRevision: the file was deleted (and
			// re-created) in the compacted history.
			if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != created {
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

// WatchRecursive returns every file under prefix, each with its own
// ModRevision, and a channel of per-file changes and deletes (Err
// NoNode); lock and election keys are left out. Like Watch, after a
// compaction it re-reads and reports every file changed, added or gone.
// Revision (topo.WatchData) is the listing's header revision for the
// initial values; an event's revision on the last event of a revision,
// the one before otherwise; a re-read's header revision on its last
// difference.
func (c *Conn) WatchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, error) {
	init, out, _, err := c.WatchRecursiveSyncRevision(ctx, prefix)
	return init, out, err
}

// WatchRecursiveSyncRevision is WatchRecursiveSync whose sync also
// returns the revision the watch passed with its first n events, at least
// its Get's (topo/cache's RevisionSyncWatcher). Same errors.
func (c *Conn) WatchRecursiveSyncRevision(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, func(context.Context) (uint64, int64, error), error) {
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
	var sent uint64 // events sent, by the goroutine running s.next
	s.onProgress = func(rev int64) { ws.advance(rev, sent) }
	known := backendkit.Snapshot{} // file -> ModRevision last reported, CreateRevision
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
		// send sends batch (up to rev; the i-th at revs[i], or nil),
		// stamped by backendkit.Stamp, and moves ws to rev.
		send := func(batch []*topo.WatchDataRecursive, revs []int64, rev int64) bool {
			mark = backendkit.Stamp(batch, revs, mark, rev)
			for _, wd := range batch {
				out <- wd
				sent++
			}
			ws.advance(rev, sent)
			return true
		}
		err := s.follow(func(resp *clientv3.GetResponse) bool {
			// Not in revision order: only the last moves the mark.
			return send(known.Diff(c.files(resp.Kvs)), nil, resp.Header.Revision)
		}, func(evs []*clientv3.Event) bool {
			var batch []*topo.WatchDataRecursive
			var revs []int64
			for _, ev := range evs {
				rel := c.rel(ev.Kv.Key)
				if topo.IsReserved(rel) {
					continue
				}
				wd := &topo.WatchDataRecursive{Path: rel, WatchData: topo.WatchData{Contents: ev.Kv.Value, Version: topo.NumericVersion(ev.Kv.ModRevision)}}
				if ev.Type == mvccpb.DELETE {
					delete(known, rel)
					wd.WatchData = topo.WatchData{Err: topo.NewError(topo.NoNode, rel)}
				} else {
					known[rel] = backendkit.Seen{Version: ev.Kv.ModRevision, Created: ev.Kv.CreateRevision}
				}
				batch, revs = append(batch, wd), append(revs, ev.Kv.ModRevision)
			}
			// etcd sends the events of one revision in one response.
			return send(batch, revs, s.rev)
		})
		// Both handlers go on: follow ends only with an error.
		out <- &topo.WatchDataRecursive{Path: p, WatchData: topo.WatchData{Err: err}}
	}()
	return initial, out, ws.sync, nil
}

func (c *Conn) files(kvs []*mvccpb.KeyValue) []backendkit.FileState {
	var out []backendkit.FileState
	for _, kv := range kvs {
		if rel := c.rel(kv.Key); !topo.IsReserved(rel) {
			out = append(out, backendkit.FileState{Path: rel, Contents: kv.Value, Version: kv.ModRevision, Created: kv.CreateRevision})
		}
	}
	return out
}
