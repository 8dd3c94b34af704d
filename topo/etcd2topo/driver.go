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

// The claims driver: the Conn's locks and elections run on the claims
// engine (topo/claims), over this driver of etcd's primitives.
//
// A queue is a key prefix, <root>/<dir>/locks/ for a lock on dir and
// <root>/elections/<name>/locks/ for an election, as Vitess lays them out.
// An entry is a key directly under the prefix (no further "/") attached
// to a lease and named after it (the lease id in decimal), holding the
// lock's contents or the candidate's id. Keys without a lease and deeper
// keys (files other tools wrote there) are no entries. The queue is
// ordered by ModRevision, as Vitess orders it: an entry's token is its
// ModRevision, which for an entry never rewritten is its CreateRevision;
// an entry rewritten by someone moves to the back with a new token, and
// its holder, which knows it by its old token, has lost it.
//
// Why tokens only grow (the argument every driver makes for its store):
// etcd revisions only grow and survive restarts; the engine grants an
// entry only once it heads its queue, so every older entry has left it,
// and every later entry is put at a greater revision.
//
// A session is a lease (lease.go): the Conn's shared lease for Lock,
// TryLock and elections, or a lease of the entry's own (LockWithTTL with
// a TTL other than Options.LockTTL, LockName, and a second lock of one
// directory through one Conn, whose name the shared lease has taken).
// Removing an entry on a lease of its own revokes the lease.

// driver implements claims.Driver for c.
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

// valueKey returns the key of the value published beside candidate key of
// election q (see doc.go).
func (c *Conn) valueKey(q claims.Queue, key string) string {
	return c.valuesPrefix(q.Path) + key[len(c.electionPrefix(q.Path)):]
}

// queueEntry reports whether kv is an entry of the queue prefix: a key
// directly under it, attached to a lease.
func queueEntry(kv *mvccpb.KeyValue, prefix string) bool {
	return kv.Lease != 0 && len(kv.Key) > len(prefix) && !strings.Contains(string(kv.Key[len(prefix):]), "/")
}

// leaseName is how an entry's lease is named in errors (LockHeldError's
// Session): "lease " and its id in decimal.
func leaseName(id int64) string { return leaseNamePrefix + strconv.FormatInt(id, 10) }

// leaseNamePrefix starts every leaseName.
const leaseNamePrefix = "lease "

// entryOf is the engine's view of kv, an entry.
func entryOf(kv *mvccpb.KeyValue) claims.Entry {
	return claims.Entry{Token: kv.ModRevision, Key: string(kv.Key), Session: leaseName(kv.Lease), Contents: string(kv.Value)}
}

// entries returns the entries of queue prefix in kvs, oldest first.
func entries(kvs []*mvccpb.KeyValue, prefix string) []*mvccpb.KeyValue {
	var out []*mvccpb.KeyValue
	for _, kv := range kvs {
		if queueEntry(kv, prefix) {
			out = append(out, kv)
		}
	}
	slices.SortFunc(out, func(a, b *mvccpb.KeyValue) int { return int(a.ModRevision - b.ModRevision) })
	return out
}

// stillOurs reports whether kv (a read or an event of e's key; nil:
// absent) still shows e on lease l: created at its token, on l, and, in
// the Vitess layout, never rewritten since.
func stillOurs(q claims.Queue, kv *mvccpb.KeyValue, e claims.Entry, l *lease) bool {
	if kv == nil || kv.CreateRevision != e.Token || kv.Lease != int64(l.id) {
		return false
	}
	return q.Native || kv.ModRevision == e.Token
}

// sameEntry reports whether kv, a read of e's key, still shows e (on
// whatever lease): the same token.
func sameEntry(q claims.Queue, kv *mvccpb.KeyValue, e claims.Entry) bool {
	if q.Native {
		return kv.CreateRevision == e.Token
	}
	return kv.ModRevision == e.Token
}

// errLeaseGone tells Create that the lease vanished before its keepalive
// noticed: a new lease may succeed.
var errLeaseGone = errors.New("etcd2topo: lease gone")

// errKeyBusy tells Create that the lease's name in the queue is taken: it
// uses a lease of its own instead.
var errKeyBusy = errors.New("etcd2topo: entry name in use")

// Create implements claims.Driver: one transaction puts the entry on the
// lease if its key does not exist (a candidate's value key with it, on
// the same lease) and reads what the options need (files below the
// directory; the whole queue for Exclusive). The lease is the shared one,
// or one of the entry's own (see above).
func (d driver) Create(ctx context.Context, q claims.Queue, contents string, opts claims.CreateOptions) (claims.Entry, *claims.Session, error) {
	c := d.c
	ttl := int64(0) // the shared lease
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
			l, err = c.grant(ctx, ttl, q.Path)
			if l != nil {
				l.own = true
			}
		} else {
			l, err = c.sharedLease(ctx, q.Path)
		}
		if err != nil {
			return claims.Entry{}, nil, err
		}
		e, err := d.put(ctx, q, contents, opts, l)
		switch {
		case err == nil:
			return e, l.sess, nil
		case errors.Is(err, errKeyBusy) && !l.own:
			ttl = ttlSeconds(c.opts.LockTTL)
			continue
		case errors.Is(err, errLeaseGone) && attempt == 0:
			c.dropLease(l)
			continue
		}
		if l.own {
			c.dropLeaseAsync(l, true)
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
	name := prefix + strconv.FormatInt(int64(l.id), 10)
	if q.Native {
		name = nativeKey(q.Path, l.id)
	}
	key, ok := c.takeKey(name)
	if !ok {
		return claims.Entry{}, errKeyBusy
	}
	bctx, cancel := l.bind(ctx)
	defer cancel()
	ops := []clientv3.Op{clientv3.OpPut(key, contents, clientv3.WithLease(l.id))}
	var with []string
	switch {
	case q.Native: // the value in the entry
		ops = []clientv3.Op{clientv3.OpPut(key, string(opts.Value), clientv3.WithLease(l.id))}
	case q.Election:
		vkey := c.valueKey(q, key)
		with = []string{vkey}
		ops = append(ops, clientv3.OpPut(vkey, string(opts.Value), clientv3.WithLease(l.id)))
	}
	nfiles := len(ops)
	if opts.RequireFiles {
		// The directory holds a file when some key is under it outside
		// its locks/ directory: in [dir/, dir/locks/) or in [dir/locks0,
		// end of dir/) ('0' follows '/'). Keys-only reads limited to one
		// key are answered from etcd's index in constant time.
		dirPrefix := c.dirPrefix(q.Path)
		start := dirPrefix
		if start == "" {
			start = "\x00" // the lowest key (an empty root): etcd rejects ""
		}
		ops = append(ops,
			clientv3.OpGet(start, clientv3.WithRange(prefix), clientv3.WithKeysOnly(), clientv3.WithLimit(1)),
			clientv3.OpGet(dirPrefix+locksDir+"0", clientv3.WithRange(clientv3.GetPrefixRangeEnd(dirPrefix)),
				clientv3.WithKeysOnly(), clientv3.WithLimit(1)))
	}
	nqueue := len(ops)
	if opts.Exclusive {
		// Values included: etcd 3.7 leaves the Lease out of keys-only
		// ranges (etcd-io/etcd#22209), and an entry is known by it.
		ops = append(ops, clientv3.OpGet(prefix, clientv3.WithPrefix()))
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
			// The put may have been applied (a timeout leaves that
			// unknown): remove the key, or a stale key on the shared lease
			// would block every later locker for as long as the Conn lives.
			// A refusal (PermissionDenied) applied nothing.
			if isPermanent(err) {
				c.freeKey(key)
			} else {
				d.remove(q, l, key, 0, true, with)
			}
			if l.lost() && ctx.Err() == nil {
				return claims.Entry{}, rpctypes.ErrLeaseNotFound
			}
			return claims.Entry{}, err
		}
		if !resp.Succeeded {
			kvs := resp.Responses[0].GetResponseRange().Kvs
			if attempt == 0 && len(kvs) == 1 && kvs[0].Lease == int64(l.id) {
				// A late put of one of our own earlier attempts: delete it.
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
		c.clusterID.CompareAndSwap(0, resp.Header.ClusterId)
		e := claims.Entry{Token: rev, Key: key, Session: leaseName(int64(l.id)), Contents: contents}
		rs := resp.Responses
		if opts.RequireFiles && len(rs[nfiles].GetResponseRange().Kvs) == 0 && len(rs[nfiles+1].GetResponseRange().Kvs) == 0 {
			d.remove(q, l, key, rev, false, with)
			// Which error: one read, on this error path only.
			_, _, gerr := c.Get(ctx, q.Path)
			return claims.Entry{}, backendkit.LockNeedsFiles(q.Path, q.Path != "" && gerr == nil)
		}
		if opts.Exclusive {
			if queue := entries(rs[nqueue].GetResponseRange().Kvs, prefix); len(queue) > 0 && string(queue[0].Key) != key {
				d.remove(q, l, key, rev, false, with)
				return claims.Entry{}, &claims.BusyError{Head: entryOf(queue[0])}
			}
		}
		c.followEntry(ctx, q, l, e)
		return e, nil
	}
}

// List implements claims.Driver: one read of the queue prefix.
func (d driver) List(ctx context.Context, q claims.Queue) ([]claims.Entry, error) {
	prefix := d.c.queuePrefix(q)
	if q.Native {
		resp, err := d.c.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		if err != nil {
			return nil, err
		}
		out := make([]claims.Entry, len(resp.Kvs))
		for i, kv := range resp.Kvs {
			out[i] = nativeEntry(q, kv)
		}
		return out, nil
	}
	// Values included: etcd 3.7 leaves the Lease out of keys-only ranges.
	resp, err := d.c.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	kvs := entries(resp.Kvs, prefix)
	out := make([]claims.Entry, len(kvs))
	for i, kv := range kvs {
		out[i] = entryOf(kv)
	}
	return out, nil
}

// Delete implements claims.Driver: the entry is deleted (with a
// candidate's value key) in one transaction comparing its ModRevision
// with its token, or, on a lease of its own, the lease is revoked.
func (d driver) Delete(ctx context.Context, q claims.Queue, s *claims.Session, e claims.Entry) error {
	l := s.Ref().(*lease)
	var with []string
	if q.Election && !q.Native {
		with = []string{d.c.valueKey(q, e.Key)}
	}
	lost := s.IsLost()
	ok, err := d.delete(ctx, q, l, e.Key, e.Token, with)
	if err != nil {
		return err
	}
	if !ok || lost {
		return claims.ErrNotHeld
	}
	return nil
}

// delete removes the entry key (of token rev; any entry of the name on l
// when rev is 0) and the keys with, or revokes l when it is the entry's
// own; ok is false when the entry was not there. The key's name is freed
// unless the outcome is unknown.
func (d driver) delete(ctx context.Context, q claims.Queue, l *lease, key string, rev int64, with []string) (ok bool, err error) {
	c := d.c
	if l.own {
		_, err := c.cli.Revoke(ctx, l.id)
		if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return false, err
		}
		c.forgetLease(l)
		c.freeKey(key)
		return err == nil, nil
	}
	cmp := clientv3.Compare(clientv3.ModRevision(key), "=", rev)
	switch {
	case rev == 0:
		cmp = clientv3.Compare(clientv3.LeaseValue(key), "=", l.id)
	case q.Native:
		cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", rev)
	}
	var others []clientv3.Op
	for _, k := range with {
		others = append(others, clientv3.OpDelete(k))
	}
	resp, err := c.cli.Txn(ctx).If(cmp).
		Then(append([]clientv3.Op{clientv3.OpDelete(key)}, others...)...).
		Else(others...).Commit()
	if err != nil {
		if isPermanent(err) {
			c.freeKey(key)
		}
		return false, err
	}
	c.freeKey(key)
	return resp.Succeeded, nil
}

// remove is delete for an entry Create gives up (a failed check, an
// unknown outcome), retried in the background until it is done (see
// untilDone); async runs it in the background from the start.
func (d driver) remove(q claims.Queue, l *lease, key string, rev int64, async bool, with []string) {
	d.c.untilDone("deleting "+key, async, func(ctx context.Context) error {
		_, err := d.delete(ctx, q, l, key, rev, with)
		return err
	}, nil)
}

// Held implements claims.Driver: the lease still proven alive (see
// SafetyMargin) before and after one linearizable read that shows the
// entry unchanged since it was put, on its lease.
func (d driver) Held(ctx context.Context, q claims.Queue, s *claims.Session, e claims.Entry) (bool, error) {
	l := s.Ref().(*lease)
	if l.lost() {
		return false, nil
	}
	// Values included: etcd 3.7 leaves the Lease out of keys-only reads.
	resp, err := d.c.cli.Get(ctx, e.Key)
	if err != nil {
		return false, err
	}
	return len(resp.Kvs) == 1 && stillOurs(q, resp.Kvs[0], e, l) && !l.lost(), nil
}

// followEntry watches e, an entry of q on l, until it is deleted or is no
// longer e on l (see stillOurs), and then ends the claim on it
// (Session.LoseEntry): an entry deleted behind its holder's back (or with
// its lease) ends the lock or the term at once. It returns once etcd
// confirmed the watch (or ctx ended first), so that no request of the
// watch is sent behind the caller's back later. The watch ends with the
// lease, the Conn, or the removal of the entry by its claim (freeKey).
func (c *Conn) followEntry(ctx context.Context, q claims.Queue, l *lease, e claims.Entry) {
	wctx, cancel := context.WithCancel(l.lostCtx)
	stop := context.AfterFunc(c.ctx, cancel)
	c.mu.Lock()
	if _, ok := c.keysInUse[e.Key]; !ok || c.isClosed() {
		c.mu.Unlock()
		stop()
		cancel()
		return
	}
	c.keysInUse[e.Key] = cancel
	c.mu.Unlock()
	from := e.Token + 1
	watch := func() clientv3.WatchChan {
		return c.cli.Watch(clientv3.WithRequireLeader(wctx), e.Key, clientv3.WithRev(from), clientv3.WithCreatedNotify())
	}
	wch := watch()
	first, ok := clientv3.WatchResponse{}, false
	select {
	case first, ok = <-wch:
	case <-ctx.Done():
	}
	go func() {
		defer stop()
		defer cancel()
		backoff := 20 * time.Millisecond
		for wctx.Err() == nil {
			for {
				wr := first
				if !ok {
					if wr, ok = <-wch; !ok {
						break
					}
				}
				ok = false
				if wr.CompactRevision != 0 {
					// Compacted past from: read the key instead.
					resp, err := c.cli.Get(wctx, e.Key)
					if err == nil && (len(resp.Kvs) != 1 || !stillOurs(q, resp.Kvs[0], e, l)) {
						l.sess.LoseEntry(e.Key, e.Token)
						return
					}
					if err == nil {
						from = resp.Header.Revision + 1
					}
					break
				}
				if isPermanent(wr.Err()) {
					return // etcd refuses the watch: Done closes on the other causes
				}
				for _, ev := range wr.Events {
					if ev.Type == mvccpb.DELETE || !stillOurs(q, ev.Kv, e, l) {
						l.sess.LoseEntry(e.Key, e.Token)
						return
					}
					from = ev.Kv.ModRevision + 1
				}
			}
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-wctx.Done():
				t.Stop()
			}
			backoff = min(2*backoff, time.Second)
			wch = watch()
		}
	}()
}

// takeKey reserves the entry name key for one entry of this Conn; ok is
// false if it is taken (two locks of one directory through one Conn at
// the same time: the second takes a lease of its own).
func (c *Conn) takeKey(key string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, used := c.keysInUse[key]; used {
		return "", false
	}
	c.keysInUse[key] = func() {}
	return key, true
}

// freeKey frees the entry name key, once its entry is gone, and stops the
// watch following it.
func (c *Conn) freeKey(key string) {
	c.mu.Lock()
	stop := c.keysInUse[key]
	delete(c.keysInUse, key)
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// MapError implements claims.Driver (convertError).
func (d driver) MapError(ctx context.Context, err error, path string) error {
	if err == nil {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return d.c.convertError(ctx, err, path)
}
