package etcd2topo

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// driver implements claims.Driver for c, over the queues and leases of the
// package doc. An entry's token is its ModRevision: an entry someone
// rewrote moves to the back with a new token, and its holder has lost it.
// A session is a lease: a shared one or the entry's own.
type driver struct{ c *Conn }

// queuePrefix returns the key prefix of q's entries.
func (c *Conn) queuePrefix(q claims.Queue) string {
	if q.Native {
		return q.Path + "/"
	}
	if q.Election {
		return c.electionPrefix(q.Path)
	}
	return c.dirPrefix(q.Path) + locksDir + "/"
}

// electionPrefix returns the queue of election n's candidates.
func (c *Conn) electionPrefix(n string) string {
	return c.key(electionsDir + "/" + n + "/" + locksDir + "/")
}

// valueKey returns the value key of candidate key of election q (doc.go).
func (c *Conn) valueKey(q claims.Queue, key string) string {
	return c.valuesPrefix(q.Path) + key[len(c.electionPrefix(q.Path)):]
}

// queueEntry reports whether kv is an entry of the queue prefix.
func queueEntry(kv *mvccpb.KeyValue, prefix string) bool {
	return kv.Lease != 0 && len(kv.Key) > len(prefix) && !strings.Contains(string(kv.Key[len(prefix):]), "/")
}

// leaseName names an entry's lease in errors (LockHeldError's Session)
// and to SessionTTL: "lease " and its id in decimal.
func leaseName(id int64) string { return leaseNamePrefix + strconv.FormatInt(id, 10) }

const leaseNamePrefix = "lease "

func entryOf(kv *mvccpb.KeyValue) claims.Entry {
	return claims.Entry{Token: kv.ModRevision, Key: string(kv.Key), Session: leaseName(kv.Lease), Contents: string(kv.Value)}
}

// stillOurs reports whether kv (e's key read or in an event; nil: absent)
// still shows e on lease l: created at its token, on l, and (Vitess
// layout) never rewritten since.
func stillOurs(q claims.Queue, kv *mvccpb.KeyValue, e claims.Entry, l *lease) bool {
	return kv != nil && kv.CreateRevision == e.Token && kv.Lease == int64(l.id) &&
		(q.Native || kv.ModRevision == e.Token)
}

func tokenOf(q claims.Queue, kv *mvccpb.KeyValue) int64 {
	if q.Native {
		return kv.CreateRevision
	}
	return kv.ModRevision
}

// errLeaseGone: the lease vanished before its keepalive noticed.
var errLeaseGone = errors.New("etcd2topo: lease gone")

// errLeaseGivenUp: this Conn gave the lease up (no renewal acknowledged
// within its TTL) while a request on it was in flight; LockLost.
var errLeaseGivenUp = errors.New("etcd2topo: this Conn gave its lease up: no renewal was acknowledged within the lease's TTL")

// errKeyBusy: the lease's name in the queue is taken.
var errKeyBusy = errors.New("etcd2topo: entry name in use")

// Create implements claims.Driver: one transaction puts the entry on the
// lease if its key does not exist (a candidate's value key with it) and
// reads what the options need (files below the directory; the oldest
// entries for Exclusive, a few others otherwise).
func (d driver) Create(ctx context.Context, q claims.Queue, contents string, opts claims.CreateOptions) (claims.Entry, *claims.Session, error) {
	c := d.c
	ttl := int64(0) // 0: the shared-th shared lease
	shared := 0
	switch {
	case !q.Election && !opts.RequireFiles && !opts.Exclusive && opts.TTL == 0: // LockName
		ttl = ttlSeconds(c.opts.NamedLockTTL)
	case opts.TTL != 0 && ttlSeconds(opts.TTL) != ttlSeconds(c.opts.LockTTL):
		ttl = ttlSeconds(opts.TTL)
	}
	for attempt := 0; ; attempt++ {
		var l *lease
		var err error
		if ttl != 0 {
			l, err = c.grant(ctx, ttl, q.Path, true)
		} else {
			l, err = c.sharedLease(ctx, q.Path, shared)
		}
		if err != nil {
			return claims.Entry{}, nil, err
		}
		e, err := d.put(ctx, q, contents, opts, l)
		switch {
		case err == nil:
			return e, l.sess, nil
		case errors.Is(err, errKeyBusy) && !l.own:
			if shared++; shared == maxSharedLeases {
				ttl = ttlSeconds(c.opts.LockTTL)
			}
			continue
		case errors.Is(err, errLeaseGone) && attempt == 0:
			c.untrack(l) // gone in etcd: nothing to revoke
			continue
		}
		if l.own && c.untrack(l) { // put's removal did not revoke it
			c.revokeAsync(l, true)
		}
		if errors.Is(err, errLeaseGone) {
			return claims.Entry{}, nil, rpctypes.ErrLeaseNotFound
		}
		return claims.Entry{}, nil, err
	}
}

// put is one attempt of Create on lease l.
func (d driver) put(ctx context.Context, q claims.Queue, contents string, opts claims.CreateOptions, l *lease) (claims.Entry, error) {
	c := d.c
	prefix := c.queuePrefix(q)
	key := prefix + strconv.FormatInt(int64(l.id), 10)
	if q.Native {
		key = nativeKey(q.Path, l.id)
	}
	if !c.takeKey(key) {
		return claims.Entry{}, errKeyBusy
	}
	// A request stuck on a cut-off connection must not outlast the lease.
	bctx, cancel := backendkit.Linked(ctx, l.lostCtx)
	defer cancel()
	value := contents
	if q.Native { // the value in the entry
		value = string(opts.Value)
	}
	ops := []clientv3.Op{clientv3.OpPut(key, value, clientv3.WithLease(l.id))}
	if q.Election && !q.Native {
		ops = append(ops, clientv3.OpPut(c.valueKey(q, key), string(opts.Value), clientv3.WithLease(l.id)))
	}
	nfiles := len(ops)
	if opts.RequireFiles {
		// A file is a key in [dir/, dir/locks/) or [dir/locks0, end of
		// dir/) ('0' follows '/'); keys-only reads of one key are answered
		// from etcd's index in constant time.
		dirPrefix := c.dirPrefix(q.Path)
		start := dirPrefix
		if start == "" {
			start = "\x00" // an empty root: etcd rejects ""
		}
		ops = append(ops,
			clientv3.OpGet(start, clientv3.WithRange(prefix), clientv3.WithKeysOnly(), clientv3.WithLimit(1)),
			clientv3.OpGet(dirPrefix+locksDir+"0", clientv3.WithRange(clientv3.GetPrefixRangeEnd(dirPrefix)),
				clientv3.WithKeysOnly(), clientv3.WithLimit(1)))
	}
	// Whether it heads the queue: for TryLock the oldest keys (the head is
	// named when busy); otherwise any two, unsorted so etcd visits no more
	// (alone there, it heads). Values included: etcd 3.7 leaves the Lease
	// out of keys-only ranges (etcd-io/etcd#22209).
	nqueue := len(ops)
	if opts.Exclusive {
		ops = append(ops, clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithLimit(4),
			clientv3.WithSort(orderOf(q), clientv3.SortAscend)))
	} else {
		ops = append(ops, clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithLimit(2)))
	}
	for attempt := 0; ; attempt++ {
		resp, err := c.cli.Txn(bctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(ops...).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				c.freeKey(key)
				return claims.Entry{}, errLeaseGone
			}
			// Outcome unknown unless refused: see removeUnknown.
			if isPermanent(err) {
				c.freeKey(key)
			} else {
				d.removeUnknown(q, l, key)
			}
			if l.lost() && ctx.Err() == nil {
				return claims.Entry{}, errLeaseGivenUp
			}
			return claims.Entry{}, err
		}
		if !resp.Succeeded {
			kvs := resp.Responses[0].GetResponseRange().Kvs
			if attempt == 0 && len(kvs) == 1 && kvs[0].Lease == int64(l.id) {
				// A late put of our own earlier attempt: delete it.
				if _, err := c.cli.Txn(bctx).
					If(clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision)).
					Then(clientv3.OpDelete(key)).Commit(); err != nil {
					c.freeKey(key)
					return claims.Entry{}, err
				}
				continue
			}
			c.freeKey(key)
			return claims.Entry{}, errKeyBusy
		}
		rev := resp.Header.Revision
		e := claims.Entry{Token: rev, Key: key, Session: leaseName(int64(l.id)), Contents: contents}
		rs := resp.Responses
		if opts.RequireFiles && len(rs[nfiles].GetResponseRange().Kvs) == 0 && len(rs[nfiles+1].GetResponseRange().Kvs) == 0 {
			d.remove(q, l, key, rev)
			_, _, gerr := c.Get(ctx, q.Path)
			return claims.Entry{}, backendkit.LockNeedsFiles(q.Path, q.Path != "" && gerr == nil)
		}
		rr := rs[nqueue].GetResponseRange()
		queue := queueEntries(q, rr.Kvs, prefix)
		e.Granted = len(queue) == 1 && queue[0].Key == key && !rr.More
		if opts.Exclusive && !e.Granted {
			var err error
			if len(queue) == 0 && rr.More { // non-entry keys filled the limit
				queue, err = d.List(ctx, q)
			}
			if err == nil && len(queue) > 0 && queue[0].Key == key {
				e.Granted = true
			} else {
				d.remove(q, l, key, rev)
				if err == nil && len(queue) == 0 {
					err = claims.ErrNotHeld
				}
				if err != nil {
					return claims.Entry{}, err
				}
				return claims.Entry{}, &claims.BusyError{Head: queue[0]}
			}
		}
		return e, nil
	}
}

// List implements claims.Driver: one read of the queue prefix, in the
// queue's order (values included, see put).
func (d driver) List(ctx context.Context, q claims.Queue) ([]claims.Entry, error) {
	prefix := d.c.queuePrefix(q)
	resp, err := d.c.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(orderOf(q), clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	return queueEntries(q, resp.Kvs, prefix), nil
}

func orderOf(q claims.Queue) clientv3.SortTarget {
	if q.Native {
		return clientv3.SortByCreateRevision
	}
	return clientv3.SortByModRevision
}

func queueEntries(q claims.Queue, kvs []*mvccpb.KeyValue, prefix string) []claims.Entry {
	var out []claims.Entry
	for _, kv := range kvs {
		switch {
		case q.Native:
			out = append(out, nativeEntry(q, kv))
		case queueEntry(kv, prefix):
			out = append(out, entryOf(kv))
		}
	}
	return out
}

// Ahead implements claims.Aheader: from the Conn's view of q if it keeps
// one (no request); else one limited read of the entries not newer than
// e, newest first (e first, else it is gone); the whole queue when
// non-entry keys filled the limit.
func (d driver) Ahead(ctx context.Context, q claims.Queue, e claims.Entry, n int) ([]claims.Entry, bool, error) {
	if v := d.c.liveView(q); v != nil {
		vctx, cancel := context.WithTimeout(ctx, viewWait)
		ahead, in, err := v.ahead(vctx, d.c, e, n)
		cancel()
		d.c.closeView(v)
		if err == nil || ctx.Err() != nil {
			return ahead, in, err
		}
	}
	prefix := d.c.queuePrefix(q)
	atMost := clientv3.WithMaxModRev(e.Token)
	if q.Native {
		atMost = clientv3.WithMaxCreateRev(e.Token)
	}
	resp, err := d.c.cli.Get(ctx, prefix, clientv3.WithPrefix(), atMost, clientv3.WithLimit(int64(n)+2),
		clientv3.WithSort(orderOf(q), clientv3.SortDescend))
	if err != nil {
		return nil, false, err
	}
	queue := queueEntries(q, resp.Kvs, prefix)
	in := len(queue) > 0 && queue[0].Key == e.Key && queue[0].Token == e.Token
	if resp.More && (len(queue) == 0 || in && len(queue) <= n) {
		queue, err = d.List(ctx, q)
		if err != nil {
			return nil, false, err
		}
		i := slices.IndexFunc(queue, func(x claims.Entry) bool { return x.Key == e.Key && x.Token == e.Token })
		if i < 0 {
			return nil, false, nil
		}
		return queue[max(0, i-n):i], true, nil
	}
	if !in {
		return nil, false, nil
	}
	ahead := queue[1:min(len(queue), n+1)]
	slices.Reverse(ahead)
	return ahead, true, nil
}

// viewWait bounds Ahead's wait for a (lagging) view to show the entry.
const viewWait = time.Second

// Delete implements claims.Driver: one transaction comparing the entry's
// token deletes it and a candidate's value key; an own lease is revoked.
// Once the Conn is closed it sends nothing and returns ErrNotHeld: Close
// revoked the Conn's leases, and their entries with them.
func (d driver) Delete(ctx context.Context, q claims.Queue, s *claims.Session, e claims.Entry) error {
	if d.c.closed.Load() {
		// Close marks every lease of the Conn lost and revokes it: the
		// entry goes with its lease. The closed client would fail a
		// delete only after seconds of retries; nothing is sent.
		return claims.ErrNotHeld
	}
	lost := s.IsLost()
	ok, err := d.delete(ctx, q, s.Ref().(*lease), e.Key, e.Token)
	if err != nil {
		return err
	}
	if !ok || lost {
		return claims.ErrNotHeld
	}
	return nil
}

// delete is Delete of key at token rev (0: any entry of the name on l);
// ok is false when it was not there. The name is freed unless the
// outcome is unknown.
func (d driver) delete(ctx context.Context, q claims.Queue, l *lease, key string, rev int64) (ok bool, err error) {
	c := d.c
	if l.own {
		_, err := c.cli.Revoke(ctx, l.id)
		if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return false, err
		}
		c.untrack(l)
		c.freeKey(key)
		return err == nil, nil
	}
	resp, err := d.deleteTxn(ctx, q, l, key, rev)
	if err != nil {
		if isPermanent(err) {
			c.freeKey(key)
		}
		return false, err
	}
	c.freeKey(key)
	return resp.Succeeded, nil
}

// deleteTxn is delete's transaction on a shared lease; Succeeded says
// whether the entry was there.
func (d driver) deleteTxn(ctx context.Context, q claims.Queue, l *lease, key string, rev int64) (*clientv3.TxnResponse, error) {
	cmp := clientv3.Compare(clientv3.ModRevision(key), "=", rev)
	switch {
	case rev == 0:
		cmp = clientv3.Compare(clientv3.LeaseValue(key), "=", l.id)
	case q.Native:
		cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", rev)
	}
	var others []clientv3.Op
	if q.Election && !q.Native {
		others = append(others, clientv3.OpDelete(d.c.valueKey(q, key)))
	}
	return d.c.cli.Txn(ctx).If(cmp).
		Then(append([]clientv3.Op{clientv3.OpDelete(key)}, others...)...).
		Else(others...).Commit()
}

// lateWindow is how long removeUnknown watches for a late put (etcd stops
// waiting after about 7 s; a put applied later escapes: docs/layout-etcd.md).
const lateWindow = 15 * time.Second

// removeUnknown removes the entry key a put of unknown outcome (timed out
// or abandoned) may have written on l. Its first attempt runs before it
// returns (bounded by defaultCleanupTimeout), so that a Lock given up
// returns once its entry is gone and the next contender never waits on
// an entry nobody owns; the rest runs in the background. The put may be
// applied after a first removal found nothing, leaving on the shared
// lease an entry no claim removes, blocking later lockers for the Conn's
// life. So the removal is retried until etcd answers (or the lease or
// Conn goes), and if it found nothing, the key is watched for lateWindow
// and a put on l removed too; the name stays taken meanwhile, so no later
// entry of the Conn is mistaken for the late one. An own lease is revoked
// instead: no put on it can be applied after.
func (d driver) removeUnknown(q claims.Queue, l *lease, key string) {
	if l.own {
		d.remove(q, l, key, 0)
		return
	}
	c := d.c
	lctx, cancel := backendkit.Linked(c.ctx, l.lostCtx)
	// op deletes the key if on l; done: deleted, or no answer before
	// the Conn or the lease went (rev: the answer's revision).
	var rev int64
	var done bool
	op := func(ctx context.Context) error {
		resp, err := d.deleteTxn(ctx, q, l, key, 0)
		if err == nil {
			rev, done = resp.Header.Revision, resp.Succeeded
		}
		return err
	}
	del := func(first error) {
		done = true
		c.retry(lctx, "deleting "+key, op, first)
	}
	done = true
	first := c.attempt(lctx, "deleting "+key, op)
	go func() {
		defer c.freeKey(key)
		defer cancel()
		if first != nil {
			del(first)
		}
		if done {
			return
		}
		wctx, stop := context.WithTimeout(lctx, lateWindow)
		defer stop()
		for wr := range c.cli.Watch(wctx, key, clientv3.WithRev(rev+1)) {
			late := wr.Err() != nil // compacted or cancelled: look once more
			for _, ev := range wr.Events {
				late = late || ev.Type == mvccpb.PUT && ev.Kv.Lease == int64(l.id)
			}
			if late {
				del(c.attempt(lctx, "deleting "+key, op))
				return
			}
		}
	}()
}

// remove is delete for an entry Create gives up, through untilDone.
func (d driver) remove(q claims.Queue, l *lease, key string, rev int64) {
	d.c.untilDone("deleting "+key, false, func(ctx context.Context) error {
		_, err := d.delete(ctx, q, l, key, rev)
		return err
	})
}

// Held implements claims.Driver: the lease proven alive before and after
// one read showing the entry unchanged since its put, on its lease.
func (d driver) Held(ctx context.Context, q claims.Queue, s *claims.Session, e claims.Entry) (bool, error) {
	l := s.Ref().(*lease)
	if l.lost() {
		return false, nil
	}
	resp, err := d.c.cli.Get(ctx, e.Key) // with values, see put
	if err != nil {
		return false, err
	}
	return len(resp.Kvs) == 1 && stillOurs(q, resp.Kvs[0], e, l) && !l.lost(), nil
}

// Monitor implements claims.Monitor: a watch of e's key from just after
// its token (no read needed), until done closes or the lease or Conn
// goes. An event showing the key deleted or no longer e (stillOurs) ends
// the claim at once (Session.LoseEntry), also for one before Monitor
// began. Past a compaction it reads the key; a watch etcd ends is opened
// again, 20 ms to 1 s apart.
func (d driver) Monitor(q claims.Queue, s *claims.Session, e claims.Entry, done <-chan struct{}) {
	c, l := d.c, s.Ref().(*lease)
	ctx, cancel := backendkit.Linked(l.lostCtx, c.ctx)
	go func() {
		select {
		case <-done:
		case <-ctx.Done():
		}
		cancel()
	}()
	go func() {
		defer cancel()
		w := &stream{c: c, ctx: ctx, key: e.Key, path: q.Path, rev: e.Token}
		w.open(e.Token + 1)
		defer w.cancel()
		// nil: the entry is no longer ours.
		err := w.follow(func(resp *clientv3.GetResponse) bool {
			return len(resp.Kvs) == 1 && stillOurs(q, resp.Kvs[0], e, l)
		}, func(evs []*clientv3.Event) bool {
			for _, ev := range evs {
				if ev.Type == mvccpb.DELETE || !stillOurs(q, ev.Kv, e, l) {
					return false
				}
			}
			return true
		})
		if err == nil {
			l.sess.LoseEntry(e.Key, e.Token)
		}
	}()
}

// takeKey reserves the entry name key for one entry of this Conn; false
// if taken (the second of two entries in one queue takes another lease).
func (c *Conn) takeKey(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, used := c.keysInUse[key]; used {
		return false
	}
	c.keysInUse[key] = struct{}{}
	return true
}

func (c *Conn) freeKey(key string) {
	c.mu.Lock()
	delete(c.keysInUse, key)
	c.mu.Unlock()
}

// MapError implements claims.Driver (convertError; ctx may be nil).
func (d driver) MapError(ctx context.Context, err error, path string) error {
	return d.c.convertError(ctx, err, path)
}
