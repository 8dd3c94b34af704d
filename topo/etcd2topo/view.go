package etcd2topo

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo/claims"
)

// queueView is the Conn's view of one queue's entries while its waiters
// wait there: one read of the prefix, then one watch from the read's
// revision, so a handover costs one event per Conn with waiters, not a
// read (docs/layout-etcd.md, "Wait"). It is as good as a read: it shows
// the queue at its revision, an entry absent at or past its token is gone
// for good, and once no entry older than e is left at or past e's token
// none will be (tokens only grow).
type queueView struct {
	q         claims.Queue
	prefix    string
	cancel    context.CancelFunc
	ready     chan struct{} // closed once the first read is in (or it failed)
	readyOnce sync.Once
	refs      int // users, under the Conn's mu

	mu      sync.Mutex
	rev     int64                       // every event up to rev is applied
	entries map[string]*mvccpb.KeyValue // the entries at rev, by key
	// waits: per awaited key, a channel closed at its next event.
	waits  map[string]chan struct{}
	broken chan struct{} // closed when the watch ended: use a new view
	err    error         // why the read or the watch failed
}

// openView returns the Conn's view of q, started if need be, once its
// first read is in; release it with closeView. Errors are watchEnded's.
func (c *Conn) openView(ctx context.Context, q claims.Queue) (*queueView, error) {
	prefix := c.queuePrefix(q)
	c.mu.Lock()
	v := c.views[prefix]
	if v == nil {
		vctx, cancel := context.WithCancel(clientv3.WithRequireLeader(c.ctx))
		v = &queueView{q: q, prefix: prefix, cancel: cancel, ready: make(chan struct{}),
			entries: map[string]*mvccpb.KeyValue{}, waits: map[string]chan struct{}{}, broken: make(chan struct{})}
		c.views[prefix] = v
		go v.run(vctx, c)
	}
	v.refs++
	c.mu.Unlock()
	select {
	case <-v.ready:
	case <-ctx.Done():
	}
	if err := v.failure(ctx, c); err != nil {
		c.closeView(v)
		return nil, err
	}
	return v, nil
}

// liveView is openView of a view in use and sound only, else nil.
func (c *Conn) liveView(q claims.Queue) *queueView {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.views[c.queuePrefix(q)]
	if v == nil {
		return nil
	}
	select {
	case <-v.ready:
	default:
		return nil
	}
	if v.failure(context.Background(), c) != nil {
		return nil
	}
	v.refs++
	return v
}

// closeView releases v; the last user stops it.
func (c *Conn) closeView(v *queueView) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v.refs--; v.refs == 0 {
		v.cancel()
		if c.views[v.prefix] == v {
			delete(c.views, v.prefix)
		}
	}
}

// run reads the queue, then applies the watch's events until the watch
// ends, which breaks the view (the next waiter starts another).
func (v *queueView) run(ctx context.Context, c *Conn) {
	defer func() {
		c.mu.Lock()
		if c.views[v.prefix] == v {
			delete(c.views, v.prefix)
		}
		c.mu.Unlock()
		close(v.broken)
		v.readyOnce.Do(func() { close(v.ready) })
	}()
	resp, err := c.cli.Get(ctx, v.prefix, clientv3.WithPrefix())
	if err != nil {
		v.mu.Lock()
		v.err = err
		v.mu.Unlock()
		return
	}
	v.mu.Lock() // the view is in the Conn's map already: others may look
	v.rev = resp.Header.Revision
	for _, kv := range resp.Kvs {
		v.apply(kv)
	}
	v.mu.Unlock()
	v.readyOnce.Do(func() { close(v.ready) })
	for wr := range c.cli.Watch(ctx, v.prefix, clientv3.WithPrefix(), clientv3.WithRev(v.rev+1)) {
		if wr.CompactRevision != 0 || wr.Canceled || wr.Err() != nil {
			v.mu.Lock()
			v.err = wr.Err()
			v.mu.Unlock()
			return
		}
		v.mu.Lock()
		for _, ev := range wr.Events {
			key := string(ev.Kv.Key)
			delete(v.entries, key)
			if ev.Type == mvccpb.PUT {
				v.apply(ev.Kv)
			}
			v.rev = ev.Kv.ModRevision
			if ch, ok := v.waits[key]; ok {
				close(ch)
				delete(v.waits, key)
			}
		}
		v.mu.Unlock()
	}
}

// apply adds kv to the view if it is an entry (called with mu held).
func (v *queueView) apply(kv *mvccpb.KeyValue) {
	if v.q.Native || queueEntry(kv, v.prefix) {
		v.entries[string(kv.Key)] = kv
	}
}

// failure returns nil while v is sound and ctx lives, else watchEnded's.
func (v *queueView) failure(ctx context.Context, c *Conn) error {
	select {
	case <-v.broken:
	default:
		if ctx.Err() == nil {
			return nil
		}
	}
	v.mu.Lock()
	err := v.err
	v.mu.Unlock()
	return c.watchEnded(ctx, err, v.q.Path)
}

// at calls f under v.mu once the view shows e's put and at every later
// event of its key, until f returns true. Errors are watchEnded's.
func (v *queueView) at(ctx context.Context, c *Conn, e claims.Entry, f func() bool) error {
	for {
		v.mu.Lock()
		if v.rev >= e.Token && f() {
			v.mu.Unlock()
			return nil
		}
		ch, ok := v.waits[e.Key]
		if !ok {
			ch = make(chan struct{})
			v.waits[e.Key] = ch
		}
		v.mu.Unlock()
		if err := v.failure(ctx, c); err != nil {
			return err
		}
		select {
		case <-ch:
		case <-v.broken:
		case <-ctx.Done():
		}
	}
}

// ahead is Ahead from v, in one pass.
func (v *queueView) ahead(ctx context.Context, c *Conn, e claims.Entry, n int) (ahead []claims.Entry, in bool, err error) {
	var near []*mvccpb.KeyValue // the nearest ahead of e, nearest last
	err = v.at(ctx, c, e, func() bool {
		kv := v.entries[e.Key]
		if in = kv != nil && tokenOf(v.q, kv) == e.Token; !in {
			return true
		}
		for _, kv := range v.entries {
			if t := tokenOf(v.q, kv); t < e.Token && (len(near) < n || t > tokenOf(v.q, near[0])) {
				i, _ := slices.BinarySearchFunc(near, t, func(x *mvccpb.KeyValue, t int64) int { return cmp.Compare(tokenOf(v.q, x), t) })
				near = slices.Insert(near, i, kv)
				if len(near) > n {
					near = near[1:]
				}
			}
		}
		return true
	})
	if err != nil {
		return nil, false, err
	}
	return queueEntries(v.q, near, v.prefix), in, nil
}
