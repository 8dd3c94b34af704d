package etcd2topo

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// The claim: the key a lock or a candidacy puts in its queue, and the
// transaction that puts it.
//
// A queue is a key prefix, <root>/<dir>/locks/ for a lock on dir and
// <root>/elections/<name>/locks/ for an election, as Vitess lays them out.
// An entry of a queue is a key directly under the prefix (no further
// "/") attached to a lease; it is named after its lease, the lease id in
// decimal, as Vitess names its entries. A lease has at most one entry per
// queue at a time (see takeKey), so the name is the entry's alone while
// it exists, and the name is reused by the lease's next entry in that
// queue once the key is deleted: etcd's index keeps every key name ever
// written until the next compaction and every range over the queue walks
// them, so fresh names per lock would slow every lock down.

// queueEntry reports whether kv is an entry of the queue prefix: a key
// directly under it, attached to a lease. Keys without a lease (files other
// tools wrote there) and deeper keys never hold or block a lock or an
// election.
func queueEntry(kv *mvccpb.KeyValue, prefix string) bool {
	return kv.Lease != 0 && len(kv.Key) > len(prefix) && !strings.Contains(string(kv.Key[len(prefix):]), "/")
}

// olderEntries returns the keys of the entries of queue prefix in kvs
// that are older than our entry myKey created at rev: a lower ModRevision.
// Like Vitess, the queue is ordered by ModRevision: an entry rewritten by
// someone moves to the back (and its holder, which checks its entry's
// ModRevision, knows it lost).
func olderEntries(kvs []*mvccpb.KeyValue, prefix, myKey string, rev int64) map[string]struct{} {
	older := map[string]struct{}{}
	for _, kv := range kvs {
		if queueEntry(kv, prefix) && kv.ModRevision < rev && string(kv.Key) != myKey {
			older[string(kv.Key)] = struct{}{}
		}
	}
	return older
}

// takeKey returns the name of l's entry in the queue prefix, and the
// function that frees the name once the key is deleted; ok is false if l
// has an entry there already (two locks of one directory through one Conn
// at the same time): the caller then uses a lease of its own.
func (c *Conn) takeKey(prefix string, l *lease) (key string, release func(), ok bool) {
	key = prefix + strconv.FormatInt(int64(l.id), 10)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, used := c.keysInUse[key]; used {
		return "", nil, false
	}
	c.keysInUse[key] = struct{}{}
	freed := false
	return key, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !freed {
			freed = true
			delete(c.keysInUse, key)
		}
	}, true
}

// claim is one entry put in a queue.
type claim struct {
	c      *Conn
	path   string // for errors
	prefix string // the queue
	key    string
	rev    int64 // the entry's CreateRevision = ModRevision
	// clusterID is the id of the etcd cluster the entry was put on.
	clusterID uint64
	lease     *lease
	own       bool   // the lease is this entry's alone: removing revokes it
	release   func() // frees the key's name

	// older are the entries ahead of ours when the claim was put: all of
	// them when the claim read the whole queue (TryLock's, and an adopted
	// entry's), else the newest few (see predPage).
	older map[string]struct{}
	// pred is the newest of them (nil when none), where wait starts.
	pred *mvccpb.KeyValue
	// unsure is set when the claim's read of the newest few entries found
	// no older entry among keys that are no entries: wait must read on.
	unsure bool
	// resp is the claim transaction's response, for the extra reads the
	// caller asked for (responses 2 on).
	resp *clientv3.TxnResponse
	// with are keys deleted with the entry (a candidate's published
	// value, see values.go).
	with []string
}

// errLeaseGone tells putClaim's caller that the lease vanished before its
// keepalive noticed: a new lease may succeed.
var errLeaseGone = errors.New("etcd2topo: lease gone")

// putClaim puts our entry, valued value, in queue prefix on lease l
// (own: l belongs to this entry alone) and, in the same transaction, reads
// the queue (all of it with full, else only the newest few entries, which
// answer whether ours has to wait and for which entry, whatever the
// queue's length) and runs the extra reads; the entry is put only if its key
// does not exist (a name is ours alone, but a put of an earlier attempt
// whose outcome was unknown may have landed late: such a key, on our own
// lease, is deleted and the claim retried once). It returns errLeaseGone if
// etcd no longer knows l. Ready-made errors are converted with the
// caller's ctx; on an error whose outcome is unknown the key is removed.
func (c *Conn) putClaim(ctx context.Context, path, prefix, value string, l *lease, own, full bool, more claimMore, extra ...clientv3.Op) (*claim, error) {
	key, release, ok := c.takeKey(prefix, l)
	if !ok {
		return nil, errKeyBusy
	}
	cl := &claim{c: c, path: path, prefix: prefix, key: key, lease: l, own: own, release: release}
	callerCtx := ctx
	ctx, cancel := l.bind(ctx)
	defer cancel()
	// Values included: etcd 3.7 leaves the Lease out of keys-only ranges
	// (etcd-io/etcd#22209), and an entry is known by it.
	readOpts := []clientv3.OpOption{clientv3.WithPrefix()}
	if !full {
		// Newest first: ours (put in this transaction, at its revision),
		// then the entries ahead of it.
		readOpts = append(readOpts, clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend),
			clientv3.WithLimit(predPage+1))
	}
	for attempt := 0; ; attempt++ {
		ops := append([]clientv3.Op{
			clientv3.OpPut(key, value, clientv3.WithLease(l.id)),
			clientv3.OpGet(prefix, readOpts...),
		}, extra...)
		if more != nil {
			mops, with := more(key, l)
			ops, cl.with = append(ops, mops...), with
		}
		resp, err := c.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(ops...).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				release()
				return nil, errLeaseGone
			}
			// The put may have been applied (a timeout leaves that
			// unknown): remove the key, or a stale key on the shared lease
			// would block every later locker for as long as the Conn lives.
			// A refusal (PermissionDenied) applied nothing.
			if isPermanent(err) {
				release()
			} else {
				cl.remove()
			}
			if l.lost() && callerCtx.Err() == nil {
				return nil, c.ownEntryGone(path)
			}
			return nil, c.convertError(callerCtx, err, path)
		}
		if !resp.Succeeded {
			kvs := resp.Responses[0].GetResponseRange().Kvs
			if attempt == 0 && len(kvs) == 1 && kvs[0].Lease == int64(l.id) {
				// A late put of one of our own earlier attempts: delete it.
				if _, err := c.cli.Txn(ctx).
					If(clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision)).
					Then(clientv3.OpDelete(key)).Commit(); err != nil {
					release()
					if l.lost() && callerCtx.Err() == nil {
						return nil, c.ownEntryGone(path)
					}
					return nil, c.convertError(callerCtx, err, path)
				}
				continue
			}
			release()
			return nil, errKeyBusy
		}
		cl.rev = resp.Header.Revision
		cl.clusterID = resp.Header.ClusterId
		c.clusterID.CompareAndSwap(0, cl.clusterID)
		cl.resp = resp
		rr := resp.Responses[1].GetResponseRange()
		cl.older = olderEntries(rr.Kvs, prefix, key, cl.rev)
		cl.pred = newestOlder(rr.Kvs, prefix, key, cl.rev)
		cl.unsure = cl.pred == nil && rr.More
		return cl, nil
	}
}

// errKeyBusy tells putClaim's caller that the lease's name in the queue is
// taken: it uses a lease of its own instead.
var errKeyBusy = errors.New("etcd2topo: entry name in use")

// remove deletes the entry if it is still ours (its ModRevision is the one
// we put, or any key of its name when that is unknown), or revokes the
// lease if it is the entry's own, then frees the name. It is used when a
// lock attempt fails, a wait is given up, or a candidacy ends.
func (cl *claim) remove() { cl.removeAsync(false) }

// mustWait reports whether an entry may be ahead of ours (see wait).
func (cl *claim) mustWait() bool { return len(cl.older) > 0 || cl.unsure }

func (cl *claim) removeAsync(async bool) {
	if cl.own {
		// Nobody else will ever use this lease's key names.
		cl.c.dropLeaseAsync(cl.lease, async)
		cl.release()
		return
	}
	cl.c.deleteKeyAsync(cl.key, cl.rev, async, cl.release, cl.with...)
}

// deleteKeyAsync deletes key if its ModRevision is still rev (any key of
// that name when rev is 0: a name is used by one entry at a time, see
// takeKey), and the keys with in any case, in one transaction, at once
// or, with async, in the background, retrying until it succeeds (see
// untilDone); then it calls done (if not nil).
func (c *Conn) deleteKeyAsync(key string, rev int64, async bool, done func(), with ...string) {
	c.untilDone("deleting "+key, async, func(ctx context.Context) error {
		var cmps []clientv3.Cmp
		if rev != 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", rev))
		}
		var others []clientv3.Op
		for _, k := range with {
			others = append(others, clientv3.OpDelete(k))
		}
		_, err := c.cli.Txn(ctx).If(cmps...).
			Then(append([]clientv3.Op{clientv3.OpDelete(key)}, others...)...).
			Else(others...).Commit()
		return err
	}, done)
}

// claimOn puts an entry in queue prefix on the Conn's shared lease, or
// (when ttl is not 0, or the shared lease has an entry there already) on
// a lease of its own of ttl (the shared TTL when ttl is 0); with full, the
// claim reads the whole queue (see putClaim).
func (c *Conn) claimOn(ctx context.Context, path, prefix, value string, ttl int64, full bool, extra ...clientv3.Op) (*claim, error) {
	return c.claimOnWith(ctx, path, prefix, value, ttl, full, nil, extra...)
}

// claimMore returns, for an entry's key and lease, ops added to its
// claim transaction and keys deleted with the entry (claim.with).
type claimMore func(key string, l *lease) (ops []clientv3.Op, with []string)

// claimOnWith is claimOn with more (when not nil): its ops are added to
// the claim's transaction after the extra ones, and its keys deleted with
// the entry, also when a claim whose outcome was unknown is removed (a
// candidate's published value, see values.go).
func (c *Conn) claimOnWith(ctx context.Context, path, prefix, value string, ttl int64, full bool, more claimMore, extra ...clientv3.Op) (*claim, error) {
	for attempt := 0; ; attempt++ {
		var (
			l   *lease
			own = ttl != 0
			err error
		)
		if own {
			l, err = c.grant(ctx, ttl, path)
		} else {
			l, err = c.sharedLease(ctx, path)
		}
		if err != nil {
			return nil, err
		}
		cl, err := c.putClaim(ctx, path, prefix, value, l, own, full, more, extra...)
		switch {
		case err == nil:
			return cl, nil
		case errors.Is(err, errKeyBusy) && !own:
			ttl = ttlSeconds(c.opts.LockTTL)
			continue
		case errors.Is(err, errLeaseGone) && attempt == 0:
			// The lease went away behind our back (revoked, expired)
			// before the keepalive noticed: get a new one, once.
			c.dropLease(l)
			continue
		}
		if own {
			c.dropLeaseAsync(l, true) // idempotent: putClaim may have revoked it
		}
		if errors.Is(err, errLeaseGone) {
			return nil, backendkit.Wrap(topo.LockLost, path, rpctypes.ErrLeaseNotFound)
		}
		if errors.Is(err, errKeyBusy) {
			return nil, backendkit.Wrap(topo.Unavailable, path, err)
		}
		return nil, err
	}
}

// follow watches the entry from now on and returns nil once it is deleted
// or rewritten (or found so when the watch starts), the PermissionDenied
// error once etcd refuses the watch or the read for good, and an
// Interrupted or Closed error once ctx ends or the Conn closes. A watch
// etcd ends (no leader, member gone) is opened again, 20 ms to 1 s apart.
// Lock descriptors (Done) and leadership terms use it.
func (cl *claim) follow(ctx context.Context) error {
	backoff := 20 * time.Millisecond
	for {
		s, err := cl.c.newStream(ctx, cl.key, false, cl.path)
		if err == nil {
			return cl.followStream(s)
		}
		if errors.Is(err, topo.PermissionDenied) || ctx.Err() != nil || cl.c.isClosed() {
			return err
		}
		// etcd refused the watch (no leader?): try again after a pause.
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		backoff = min(2*backoff, time.Second)
	}
}

// followStream follows the entry through s (see follow).
func (cl *claim) followStream(s *stream) error {
	defer s.close()
	get := func() (*clientv3.GetResponse, error) { return cl.c.cli.Get(s.ctx, cl.key) }
	resp, err := s.read(get)
	if err != nil {
		return err
	}
	if !cl.ours(resp.Kvs) {
		return nil
	}
	s.rev = resp.Header.Revision
	for {
		evs, err := s.next()
		if errors.Is(err, errCompacted) {
			resp, err := s.read(get)
			if err != nil {
				return err
			}
			if !cl.ours(resp.Kvs) {
				return nil
			}
			s.reopen(resp.Header.Revision)
			continue
		}
		if err != nil {
			return err
		}
		if len(evs) > 0 {
			return nil // any change to the entry (delete, rewrite) ends it
		}
	}
}
