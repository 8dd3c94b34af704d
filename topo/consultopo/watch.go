package consultopo

import (
	"bytes"
	"context"
	"hash/maphash"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// watchRetryMax caps the backoff between failed blocking queries.
const watchRetryMax = 2 * time.Second

// nextIndex returns the WaitIndex after a query on prev that returned
// last: 0 (answered at once) when the index went back (a restarted agent).
func nextIndex(prev, last uint64) uint64 {
	if last < prev {
		return 0
	}
	return last
}

// pollLoop runs blocking queries from index until handle (given each
// answer's X-Consul-Index) returns false (nil), wctx ends (its error), or
// a permanent error (returned); others are retried with backoff.
func (c *Conn) pollLoop(wctx context.Context, index uint64, query func(*api.QueryOptions) (*api.QueryMeta, error), handle func(index uint64) bool) error {
	retry := 50 * time.Millisecond
	for {
		meta, err := query(c.blocking(c.queryOptions(wctx), index))
		switch {
		case wctx.Err() != nil:
			return wctx.Err()
		case isPermanent(err):
			return err
		case err != nil:
			// The agent may come back empty, its index lower (a
			// restarted dev agent): ask for the state at once, not past
			// an index it may not reach for a WatchPollDuration.
			index = 0
			if !backendkit.Sleep(wctx, retry) {
				return wctx.Err()
			}
			retry = min(2*retry, watchRetryMax)
			continue
		}
		retry = 50 * time.Millisecond
		index = nextIndex(index, meta.LastIndex)
		if !handle(meta.LastIndex) {
			return nil
		}
	}
}

// Watch implements topo.Conn.Watch with blocking queries on the file's
// key, shared by the Conn's watches of the key that saw the same value at
// the same index (a keyWatch: one connection for several Watch calls,
// each still with its own first value, NoNode and cancellation). The
// current value comes back at once (NoNode, no channel, when absent). A
// new ModifyIndex sends the new value; a delete, also one followed by a
// re-creation (a new CreateIndex, as on etcd), sends NoNode and closes the
// channel, and so does a file at the indexes last seen but with other
// contents (written again by an agent that lost its state, a restarted
// dev agent); ctx ending or Close sends Interrupted. Store errors are
// retried with backoff (a restarted dev agent, empty, shows as a delete);
// an ACL refusal sends PermissionDenied and closes. Other errors as for
// Get. Revision is the highest X-Consul-Index seen. The query takes one
// of Options.MaxBlockingQueries' slots: past the bound a change arrives
// late, never lost.
func (c *Conn) Watch(ctx context.Context, filePath string) (*topo.WatchData, <-chan *topo.WatchData, error) {
	p, err := backendkit.Begin(ctx, filePath, topo.CleanFilePath, c.isClosed)
	if err != nil {
		return nil, nil, err
	}
	key := c.key(p)
	pair, meta, err := c.kv.Get(key, c.queryOptions(ctx))
	if err != nil {
		return nil, nil, c.convertError(ctx, err, p)
	}
	if pair == nil {
		return nil, nil, topo.NewError(topo.NoNode, p)
	}
	current := &topo.WatchData{Contents: value(pair), Version: topo.NumericVersion(pair.ModifyIndex), Revision: int64(meta.LastIndex)}

	wctx, cancel := backendkit.Linked(ctx, c.ctx)
	ch := make(chan *topo.WatchData, 1)
	sub := &keySub{notify: make(chan struct{}, 1)}
	kw := c.joinKeyWatch(key, pair, meta.LastIndex, sub)
	go func() {
		defer close(ch)
		defer cancel()
		defer kw.leave(sub)
		version, created, mark := pair.ModifyIndex, pair.CreateIndex, current.Revision
		contents := current.Contents // of the last value sent
		for {
			// An answer of the shared query applies as one of the watch's
			// own would (answers missed while the reader was slow are
			// older states, which its own query would have skipped too).
			var a *keyAnswer
			select {
			case <-wctx.Done():
			case <-sub.notify:
				if a = sub.take(); a == nil {
					continue
				}
			}
			if a != nil && isPermanent(a.err) {
				backendkit.Send(wctx, ch, &topo.WatchData{Err: c.convertError(wctx, a.err, p)})
				return
			}
			if a == nil || a.err != nil {
				break // wctx ended, or the query did, with the Conn: so does wctx
			}
			mark = max(mark, int64(a.index))
			got := a.got
			if got != nil && (got.CreateIndex != created ||
				got.ModifyIndex == version && !bytes.Equal(value(got), contents)) {
				// Another file: re-created between two answers, or
				// written by an agent that lost its state (a
				// restarted dev agent) at indexes the lost file had.
				got = nil
			}
			if got == nil {
				backendkit.Send(wctx, ch, &topo.WatchData{Err: topo.NewError(topo.NoNode, p), Revision: mark})
				return
			}
			if got.ModifyIndex == version {
				continue
			}
			version, contents = got.ModifyIndex, value(got)
			if !backendkit.Send(wctx, ch, &topo.WatchData{Contents: contents, Version: topo.NumericVersion(version), Revision: mark}) {
				break
			}
		}
		// wctx ended: Interrupted goes out anyway (the contract has the
		// reader drain).
		<-wctx.Done()
		ch <- &topo.WatchData{Err: backendkit.Wrap(topo.Interrupted, p, context.Cause(wctx))}
	}()
	return current, ch, nil
}

// WatchRecursive implements topo.Conn.WatchRecursive with blocking
// queries over the prefix, each answer compared with the previous one
// (backendkit.Snapshot, and contentSums): new and changed files are sent
// with their value, vanished ones with NoNode, in path order; a file
// deleted and created again between two answers (a new CreateIndex) is
// sent with NoNode, then its value. Lock and
// election keys and other tools' files at reserved paths are left out; an
// empty prefix is no error; a prefix with keys the token may not read is
// PermissionDenied, at the start or when an answer leaves keys out (as for
// List), never reported as deletions. Interrupted, retries, ACL refusals
// and the bound on blocking queries as for Watch. Revision is the
// listing's X-Consul-Index for the initial values and the last difference
// of an answer; the others carry the one reached before.
func (c *Conn) WatchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, error) {
	pfx, err := backendkit.Begin(ctx, prefix, topo.CleanPrefix, c.isClosed)
	if err != nil {
		return nil, nil, err
	}
	keyPrefix := c.dirPrefix("") + pfx
	pairs, meta, err := c.kv.List(keyPrefix, c.queryOptions(ctx))
	if err := unfiltered(meta, err); err != nil {
		return nil, nil, c.convertError(ctx, err, pfx)
	}
	known := backendkit.Snapshot{}
	sums := contentSums{seed: maphash.MakeSeed(), m: map[string]uint64{}}
	files, _, _ := c.files(pairs)
	sums.check(known, files)
	initial := known.Diff(files)
	for _, e := range initial {
		e.Revision = int64(meta.LastIndex)
	}

	wctx, cancel := backendkit.Linked(ctx, c.ctx)
	ch := make(chan *topo.WatchDataRecursive, 8)
	go func() {
		defer close(ch)
		defer cancel()
		var got api.KVPairs // the answer to the last query
		mark := int64(meta.LastIndex)
		err := c.pollLoop(wctx, meta.LastIndex, func(q *api.QueryOptions) (meta *api.QueryMeta, err error) {
			got, meta, err = c.kv.List(keyPrefix, q)
			return meta, unfiltered(meta, err)
		}, func(index uint64) bool {
			files, _, _ := c.files(got)
			sums.check(known, files)
			events := known.Diff(files)
			mark = backendkit.Stamp(events, nil, mark, int64(index))
			for _, e := range events {
				if !backendkit.Send(wctx, ch, e) {
					return false
				}
			}
			return true
		})
		if isPermanent(err) {
			backendkit.Send(wctx, ch, &topo.WatchDataRecursive{Path: pfx, WatchData: topo.WatchData{Err: c.convertError(wctx, err, pfx)}})
		} else { // wctx ended
			ch <- &topo.WatchDataRecursive{Path: pfx, WatchData: topo.WatchData{Err: backendkit.Wrap(topo.Interrupted, pfx, context.Cause(wctx))}}
		}
	}()
	return initial, ch, nil
}

// contentSums is a hash of the contents of every file a WatchRecursive
// knows, by path: an agent that lost its state (a restarted dev agent)
// starts its indexes over, and may write a file again, with other
// contents, at the very ModifyIndex the watch last reported for it.
type contentSums struct {
	seed maphash.Seed
	m    map[string]uint64
}

// check records the contents of files, a whole answer, and marks in known
// (as version -1, which no file has) every file that has the version known
// but other contents, so that known.Diff reports it.
func (cs *contentSums) check(known backendkit.Snapshot, files []backendkit.FileState) {
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		seen[f.Path] = true
		sum := maphash.Bytes(cs.seed, f.Contents)
		if v, ok := known[f.Path]; ok && v.Version == f.Version && cs.m[f.Path] != sum {
			known[f.Path] = backendkit.Seen{Version: -1, Created: v.Created}
		}
		cs.m[f.Path] = sum
	}
	for p := range cs.m {
		if !seen[p] {
			delete(cs.m, p)
		}
	}
}

// keyWatch is the blocking queries on one file's key shared by the Conn's
// Watch calls of it (its subscribers), each answer handed to every one.
// It runs until its last subscriber leaves, the Conn closes, or a
// permanent error (handed on as the final answer).
type keyWatch struct {
	c      *Conn
	key    string
	cancel context.CancelFunc

	mu    sync.Mutex
	index uint64      // of the last answer
	pair  *api.KVPair // the last answer; read-only once published
	subs  map[*keySub]struct{}
	done  bool // no more answers: no new subscriber
}

// keyAnswer is one answer of a keyWatch's query, or (err set) its end.
type keyAnswer struct {
	got   *api.KVPair
	index uint64
	err   error
}

// keySub is one Watch's place on a keyWatch: the latest answer not yet
// taken (replacing an older one, as a slow reader's own query would ask
// only when it is ready; a final one stays).
type keySub struct {
	mu     sync.Mutex
	a      *keyAnswer
	notify chan struct{} // capacity 1
}

func (s *keySub) put(a *keyAnswer) {
	s.mu.Lock()
	if s.a == nil || s.a.err == nil {
		s.a = a
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *keySub) take() *keyAnswer {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.a
	s.a = nil
	return a
}

// joinKeyWatch adds s to the Conn's keyWatch of key when its last answer
// is pair at index, what the joining Watch read (so it goes on exactly as
// a query of its own from index would), else starts a keyWatch there.
func (c *Conn) joinKeyWatch(key string, pair *api.KVPair, index uint64, s *keySub) *keyWatch {
	c.mu.Lock()
	kw := c.keyWatches[key]
	c.mu.Unlock()
	if kw != nil && kw.join(pair, index, s) {
		return kw
	}
	pctx, cancel := context.WithCancel(c.ctx)
	kw = &keyWatch{c: c, key: key, cancel: cancel, index: index, pair: pair, subs: map[*keySub]struct{}{s: {}}}
	c.mu.Lock()
	c.keyWatches[key] = kw
	c.mu.Unlock()
	go kw.run(pctx)
	return kw
}

func (kw *keyWatch) join(pair *api.KVPair, index uint64, s *keySub) bool {
	kw.mu.Lock()
	defer kw.mu.Unlock()
	last := kw.pair
	if kw.done || last == nil || kw.index != index || last.ModifyIndex != pair.ModifyIndex ||
		last.CreateIndex != pair.CreateIndex || !bytes.Equal(value(last), value(pair)) {
		return false
	}
	kw.subs[s] = struct{}{}
	return true
}

// leave removes s; the last subscriber to leave ends the queries.
func (kw *keyWatch) leave(s *keySub) {
	kw.mu.Lock()
	delete(kw.subs, s)
	last := len(kw.subs) == 0 && !kw.done
	if last {
		kw.done = true
	}
	kw.mu.Unlock()
	if last {
		kw.drop()
		kw.cancel()
	}
}

// drop removes kw from the Conn's keyWatches, if still there.
func (kw *keyWatch) drop() {
	kw.c.mu.Lock()
	if kw.c.keyWatches[kw.key] == kw {
		delete(kw.c.keyWatches, kw.key)
	}
	kw.c.mu.Unlock()
}

// run polls the key from kw.index, handing every answer to the
// subscribers, until ctx ends or a permanent error (pollLoop's error).
func (kw *keyWatch) run(ctx context.Context) {
	defer kw.cancel()
	var got *api.KVPair // the answer to the last query
	err := kw.c.pollLoop(ctx, kw.index, func(q *api.QueryOptions) (meta *api.QueryMeta, err error) {
		got, meta, err = kw.c.kv.Get(kw.key, q)
		return meta, err
	}, func(index uint64) bool {
		kw.publish(&keyAnswer{got: got, index: index})
		return true
	})
	kw.publish(&keyAnswer{err: err})
}

// publish records a and hands it to every subscriber; an error is last.
func (kw *keyWatch) publish(a *keyAnswer) {
	kw.mu.Lock()
	if a.err != nil {
		kw.done = true
	} else {
		kw.index, kw.pair = a.index, a.got
	}
	subs := slices.Collect(maps.Keys(kw.subs))
	kw.mu.Unlock()
	if a.err != nil {
		kw.drop()
	}
	for _, s := range subs {
		s.put(a)
	}
}
