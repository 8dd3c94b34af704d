package etcd2topo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
)

// defaultCleanupTimeout bounds the removal of a key or lease that is no
// longer wanted (abandoned lock waits, Stop, Unlock of an own lease).
const defaultCleanupTimeout = 2 * time.Second

// lease is an etcd lease kept alive by the Conn until it is revoked, it
// expires, or the Conn closes.
type lease struct {
	id   clientv3.LeaseID
	ttl  int64 // seconds
	done chan struct{}
	once sync.Once
}

// lost reports whether the lease is known to be gone (revoked, expired, or
// its Conn closed).
func (l *lease) lost() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

func (l *lease) markLost() { l.once.Do(func() { close(l.done) }) }

// ttlSeconds rounds d up to whole seconds, the unit of etcd lease TTLs.
func ttlSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// grant creates a lease of ttl seconds and keeps it alive from a goroutine
// tied to the Conn's lifetime, not to ctx (which bounds only the grant).
func (c *Conn) grant(ctx context.Context, ttl int64, path string) (*lease, error) {
	resp, err := c.cli.Grant(ctx, ttl)
	if err != nil {
		return nil, c.convertError(ctx, err, path)
	}
	l := &lease{id: resp.ID, ttl: ttl, done: make(chan struct{})}
	c.mu.Lock()
	if c.isClosed() {
		c.mu.Unlock()
		c.revokeQuietly(l)
		return nil, topo.NewError(topo.Closed, path)
	}
	c.leases[l] = struct{}{}
	c.mu.Unlock()
	ka, err := c.cli.KeepAlive(c.ctx, l.id)
	if err != nil {
		c.dropLease(l)
		return nil, c.convertError(ctx, err, path)
	}
	go func() {
		// The client renews the lease every ttl/3 for as long as someone
		// reads this channel; it closes when the lease is gone (revoked,
		// expired, unrenewable for ttl) or the Conn closes.
		for range ka {
		}
		l.markLost()
		c.mu.Lock()
		delete(c.leases, l)
		c.mu.Unlock()
	}()
	return l, nil
}

// sharedLease returns the Conn's lease for Lock, TryLock and elections,
// granting a new one if there is none yet or the last one was lost.
func (c *Conn) sharedLease(ctx context.Context, path string) (*lease, error) {
	c.mu.Lock()
	l := c.shared
	c.mu.Unlock()
	if l != nil && !l.lost() {
		return l, nil
	}
	// Serialize grants so that concurrent first lockers share one lease.
	c.grantMu.Lock()
	defer c.grantMu.Unlock()
	c.mu.Lock()
	l = c.shared
	c.mu.Unlock()
	if l != nil && !l.lost() {
		return l, nil
	}
	l, err := c.grant(ctx, ttlSeconds(c.opts.LockTTL), path)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if !c.isClosed() {
		c.shared = l
	}
	c.mu.Unlock()
	return l, nil
}

// dropLease forgets l and revokes it.
func (c *Conn) dropLease(l *lease) { c.dropLeaseAsync(l, false) }

// dropLeaseAsync is dropLease that, with async, revokes in the background.
func (c *Conn) dropLeaseAsync(l *lease, async bool) {
	l.markLost()
	c.mu.Lock()
	delete(c.leases, l)
	if c.shared == l {
		c.shared = nil
	}
	c.mu.Unlock()
	c.revokeAsync(l, async)
}

func (c *Conn) revokeQuietly(l *lease) { c.revokeAsync(l, false) }

func (c *Conn) revokeAsync(l *lease, async bool) {
	c.untilDone("revoking lease", async, func(ctx context.Context) error {
		_, err := c.cli.Revoke(ctx, l.id)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return nil // gone already
		}
		return err
	}, nil)
}

// deleteKey deletes key if its CreateRevision is still rev (any key of
// that name when rev is 0: a key name is used by one lock or candidacy at
// a time, see takeKey), then calls done (if not nil).
func (c *Conn) deleteKey(key string, rev int64, done func()) { c.deleteKeyAsync(key, rev, false, done) }

// deleteKeyAsync is deleteKey that, with async, makes even the first
// attempt in the background.
func (c *Conn) deleteKeyAsync(key string, rev int64, async bool, done func()) {
	c.untilDone("deleting "+key, async, func(ctx context.Context) error {
		var cmps []clientv3.Cmp
		if rev != 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", rev))
		}
		_, err := c.cli.Txn(ctx).If(cmps...).Then(clientv3.OpDelete(key)).Commit()
		return err
	}, done)
}

// untilDone runs a cleanup op (a delete or a revoke) at once (or, with
// async, in the background) and, if it fails, again in the background,
// pausing 50 ms to 2 s between attempts, until it succeeds or the Conn
// closes (Close revokes every lease, which cleans up anyway); then it
// calls done (if not nil). Otherwise a transient failure could leave a
// stale key on the shared lease that blocks other lockers for the Conn's
// lifetime.
func (c *Conn) untilDone(what string, async bool, op func(ctx context.Context) error, done func()) {
	if done == nil {
		done = func() {}
	}
	attempt := func() error {
		ctx, cancel := context.WithTimeout(c.ctx, defaultCleanupTimeout)
		defer cancel()
		return op(ctx)
	}
	retry := func() {
		defer done()
		backoff := 50 * time.Millisecond
		for {
			select {
			case <-time.After(backoff):
			case <-c.ctx.Done():
				return
			}
			if err := attempt(); err == nil || c.isClosed() {
				return
			}
			backoff = min(2*backoff, 2*time.Second)
		}
	}
	if async {
		go func() {
			if err := attempt(); err != nil && !c.isClosed() {
				retry()
				return
			}
			done()
		}()
		return
	}
	err := attempt()
	if err == nil || c.isClosed() {
		done()
		return
	}
	c.log.Warn("cleanup failed; retrying in the background", "op", what, "err", err)
	go retry()
}

// takeKey returns a key under prefix for an entry (lock or candidacy)
// attached to l, and the function that frees the name once the key is
// deleted. Names are the lease id in hex, as Vitess names its lock keys,
// with a "-<n>" suffix for the n-th entry of the lease under the same
// prefix at the same time (two locks on one directory through one Conn).
// Reusing names matters: etcd's index keeps every key name ever written
// until compaction, and ranges over the prefix (the lock transaction, the
// waiters' reads) slow down with each distinct name.
func (c *Conn) takeKey(prefix string, l *lease) (key string, release func()) {
	base := fmt.Sprintf("%s%x", prefix, int64(l.id))
	c.mu.Lock()
	used := c.keySlots[base]
	if used == nil {
		used = map[int]struct{}{}
		c.keySlots[base] = used
	}
	n := 0
	for {
		if _, ok := used[n]; !ok {
			break
		}
		n++
	}
	used[n] = struct{}{}
	c.mu.Unlock()
	key = base
	if n > 0 {
		key = fmt.Sprintf("%s-%d", base, n)
	}
	var once sync.Once
	return key, func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if used := c.keySlots[base]; used != nil {
				delete(used, n)
				if len(used) == 0 {
					delete(c.keySlots, base)
				}
			}
		})
	}
}

type lockMode struct {
	requireDir bool          // NoNode unless the directory has a file
	try        bool          // NodeExists instead of waiting
	ttl        time.Duration // 0: the shared lease
}

// Lock takes the lock on dirPath with the Conn's shared lease (TTL
// Options.LockTTL, 30 s by default): it adds a key under
// <root>/<dirPath>/locks/ holding contents and, unless it is the oldest
// one, waits until every older key there is deleted. Adding the key,
// reading the oldest one and checking that dirPath holds a file are one
// transaction, and the wait watches the locks directory from the current
// revision, so that a waiter gets the lock as soon as the holder's key is
// deleted. It returns NoNode if dirPath holds no file (its key is removed
// at once), Timeout or Interrupted when
// ctx ends first (its key is then removed), LockLost if its own key
// vanished while waiting, Closed, Unavailable.
func (c *Conn) Lock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lock(ctx, dirPath, contents, lockMode{requireDir: true})
}

// LockWithTTL is Lock with a lease of ttl (rounded up to whole seconds,
// and to etcd's minimum lease TTL). A TTL other than Options.LockTTL gets a
// lease of its own, revoked by Unlock. It returns InvalidArgument for
// ttl <= 0.
func (c *Conn) LockWithTTL(ctx context.Context, dirPath, contents string, ttl time.Duration) (topo.LockDescriptor, error) {
	if ttl <= 0 {
		d, _ := topo.CleanDirPath(dirPath)
		return nil, topo.Wrap(topo.InvalidArgument, d, errors.New("lock TTL must be positive"))
	}
	if ttlSeconds(ttl) == ttlSeconds(c.opts.LockTTL) {
		ttl = 0
	}
	return c.lock(ctx, dirPath, contents, lockMode{requireDir: true, ttl: ttl})
}

// LockName takes the lock on dirPath with the same key layout as Lock,
// without requiring dirPath to hold files, on a lease of its own of
// Options.NamedLockTTL (24 h by default) that Unlock revokes.
func (c *Conn) LockName(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lock(ctx, dirPath, contents, lockMode{ttl: c.opts.NamedLockTTL})
}

// TryLock is Lock that returns NodeExists at once (removing its key)
// instead of waiting when an older key holds the lock.
func (c *Conn) TryLock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lock(ctx, dirPath, contents, lockMode{requireDir: true, try: true})
}

func (c *Conn) lock(ctx context.Context, dirPath, contents string, mode lockMode) (topo.LockDescriptor, error) {
	d, err := topo.CleanDirPath(dirPath)
	if err != nil {
		return nil, err
	}
	if err := topo.CheckValue(d, []byte(contents)); err != nil {
		return nil, err
	}
	if err := c.check(ctx, d); err != nil {
		return nil, err
	}
	dirPrefix := c.dirPrefix(d)
	locksPrefix := dirPrefix + locksDir + "/"

	for attempt := 0; ; attempt++ {
		var l *lease
		if mode.ttl == 0 {
			l, err = c.sharedLease(ctx, d)
		} else {
			l, err = c.grant(ctx, ttlSeconds(mode.ttl), d)
		}
		if err != nil {
			return nil, err
		}
		ld := &lockDescriptor{c: c, path: d, lease: l, own: mode.ttl != 0}
		ld.key, ld.release = c.takeKey(locksPrefix, l)

		ops := []clientv3.Op{
			clientv3.OpPut(ld.key, contents, clientv3.WithLease(l.id)),
			clientv3.OpGet(locksPrefix, clientv3.WithFirstCreate()...),
		}
		if mode.requireDir {
			// The directory holds a file when some key is under it outside
			// its locks/ directory: in [dir/, dir/locks/) or in
			// [dir/locks0, end of dir/) ('0' follows '/'). Keys-only reads
			// limited to one key are answered from etcd's index in constant
			// time. (A transaction compare over those ranges would say the
			// same without writing, but etcd evaluates it by reading every
			// key and value of the range: a cost that grows with the
			// directory.)
			start := dirPrefix
			if start == "" {
				start = "\x00" // the lowest key (an empty root): etcd rejects ""
			}
			ops = append(ops,
				clientv3.OpGet(start, clientv3.WithRange(locksPrefix), clientv3.WithKeysOnly(), clientv3.WithLimit(1)),
				clientv3.OpGet(dirPrefix+locksDir+"0", clientv3.WithRange(clientv3.GetPrefixRangeEnd(dirPrefix)),
					clientv3.WithKeysOnly(), clientv3.WithLimit(1)))
		}
		resp, err := c.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
				// The lease went away behind our back (revoked, expired)
				// before the keepalive noticed: get a new one, once.
				ld.release()
				c.dropLease(l)
				continue
			}
			// The transaction may have been applied (a timeout leaves that
			// unknown): remove the key, or a stale key on the shared lease
			// would block every later locker for as long as this Conn lives.
			ld.remove()
			return nil, c.convertError(ctx, err, d)
		}
		ld.rev = resp.Header.Revision
		rs := resp.Responses
		if mode.requireDir && len(rs[2].GetResponseRange().Kvs) == 0 && len(rs[3].GetResponseRange().Kvs) == 0 {
			ld.remove()
			return nil, topo.NewError(topo.NoNode, d)
		}
		if kvs := rs[1].GetResponseRange().Kvs; len(kvs) > 0 && string(kvs[0].Key) == ld.key {
			return ld, nil
		}
		if mode.try {
			ld.remove()
			return nil, topo.NewError(topo.NodeExists, d)
		}
		if err := c.waitOlderGone(ctx, locksPrefix, ld.key, ld.rev, d); err != nil {
			ld.remove()
			return nil, err
		}
		return ld, nil
	}
}

// waitOlderGone waits until no key under prefix has a CreateRevision below
// rev, the CreateRevision of our own key myKey. It first opens a watch on
// the prefix at the current revision (so that etcd serves it from its
// synced watcher group, which delivers events as they are applied; a watch
// at a past revision waits for a catch-up pass that runs every 100 ms), then
// reads the older keys, then crosses them off as their deletions arrive.
// Events between the watch's start and the read are harmless: crossing off
// a key the read no longer returned does nothing. It returns LockLost if
// myKey itself is deleted, and the context's error (Timeout, Interrupted)
// or Closed.
func (c *Conn) waitOlderGone(ctx context.Context, prefix, myKey string, rev int64, path string) error {
	backoff := 20 * time.Millisecond
	for {
		err := c.waitOlderGoneOnce(ctx, prefix, myKey, rev, path)
		if err == nil || !errors.Is(err, errRewatch) {
			return err
		}
		// The watch broke (no leader, member gone, ...): start over after a
		// pause, which keeps a persistent failure from becoming a busy loop.
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return topo.FromContext(ctx, path)
		case <-c.ctx.Done():
			return topo.NewError(topo.Closed, path)
		}
		backoff = min(2*backoff, time.Second)
	}
}

// errRewatch tells waitOlderGone that the watch ended for a reason that a
// new watch may fix.
var errRewatch = errors.New("etcd2topo: watch ended, watching again")

func (c *Conn) waitOlderGoneOnce(ctx context.Context, prefix, myKey string, rev int64, path string) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	wch := c.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	if err := c.watchCreated(ctx, wch, path); err != nil {
		return err
	}
	resp, err := c.cli.Txn(ctx).Then(
		clientv3.OpGet(prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(rev-1)),
		clientv3.OpGet(myKey, clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return c.convertError(ctx, err, path)
	}
	if resp.Responses[1].GetResponseRange().Count == 0 {
		return c.ownKeyGone(path)
	}
	older := map[string]struct{}{}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		older[string(kv.Key)] = struct{}{}
	}
	for len(older) > 0 {
		wr, ok := <-wch
		if !ok || wr.Canceled || wr.Err() != nil {
			return c.watchEnded(ctx, path)
		}
		for _, ev := range wr.Events {
			k := string(ev.Kv.Key)
			if k == myKey {
				return c.ownKeyGone(path)
			}
			delete(older, k)
		}
	}
	return nil
}

// ownKeyGone returns the error for a wait whose own key vanished: Closed
// when Close revoked its lease, LockLost otherwise.
func (c *Conn) ownKeyGone(path string) error {
	if c.isClosed() {
		return topo.NewError(topo.Closed, path)
	}
	return topo.NewError(topo.LockLost, path)
}

// watchCreated waits for the created notification of a watch opened with
// WithCreatedNotify.
func (c *Conn) watchCreated(ctx context.Context, wch clientv3.WatchChan, path string) error {
	wr, ok := <-wch
	if !ok || wr.Canceled || wr.Err() != nil || !wr.Created {
		return c.watchEnded(ctx, path)
	}
	return nil
}

// watchEnded returns the error for a watch channel that closed: the
// context's error, Closed, or errRewatch.
func (c *Conn) watchEnded(ctx context.Context, path string) error {
	if err := ctx.Err(); err != nil {
		return topo.FromContext(ctx, path)
	}
	if c.isClosed() {
		return topo.NewError(topo.Closed, path)
	}
	return errRewatch
}

// lockDescriptor is a held lock: the key, its CreateRevision and its lease.
type lockDescriptor struct {
	c     *Conn
	path  string
	key   string
	rev   int64
	lease *lease
	own   bool // the lease belongs to this lock alone and Unlock revokes it

	// release frees the key's name (see takeKey) once the key is gone.
	release func()

	mu       sync.Mutex
	released bool
}

// remove deletes the lock's key if it is still ours, and revokes the
// lease if it is the lock's own. Used when a lock attempt fails or a wait
// is given up.
func (ld *lockDescriptor) remove() {
	if ld.own {
		// Nobody else will ever use this lease's key names.
		ld.c.dropLease(ld.lease)
		ld.release()
		return
	}
	ld.c.deleteKey(ld.key, ld.rev, ld.release) // rev 0 (unknown) after a failed put
}

// Check returns nil while the lock's key exists with its original
// CreateRevision and its lease is alive (one linearizable read), LockLost
// once the lease was lost or the key deleted, Interrupted after Unlock and
// Closed after the Conn's Close.
func (ld *lockDescriptor) Check(ctx context.Context) error {
	ld.mu.Lock()
	released := ld.released
	ld.mu.Unlock()
	if released {
		return topo.NewError(topo.Interrupted, ld.path)
	}
	if err := ld.c.check(ctx, ld.path); err != nil {
		return err
	}
	if ld.lease.lost() {
		return topo.NewError(topo.LockLost, ld.path)
	}
	resp, err := ld.c.cli.Get(ctx, ld.key, clientv3.WithKeysOnly())
	if err != nil {
		return ld.c.convertError(ctx, err, ld.path)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != ld.rev {
		return topo.NewError(topo.LockLost, ld.path)
	}
	return nil
}

// Unlock deletes the lock's key (one delete, as cheap as a raw
// concurrency.Mutex's), handing the lock to the next waiter, and revokes the
// lease if it is the lock's own (LockWithTTL with a non-default TTL,
// LockName). It returns LockLost if the key was already gone, Interrupted
// on a second call, Closed after the Conn's Close. If etcd cannot be
// reached it returns that error (Unavailable, Timeout) and keeps trying to
// delete the key in the background for as long as the Conn is open.
func (ld *lockDescriptor) Unlock(ctx context.Context) error {
	ld.mu.Lock()
	if ld.released {
		ld.mu.Unlock()
		return topo.NewError(topo.Interrupted, ld.path)
	}
	ld.released = true
	ld.mu.Unlock()
	if err := ld.c.closedErr(ld.path); err != nil {
		return err
	}
	// A plain delete: the key's name is this lock's alone until the key
	// is gone (see takeKey), so if it exists it is ours.
	resp, err := ld.c.cli.Delete(ctx, ld.key)
	if err != nil {
		// Release in the background, without holding the caller beyond
		// its context.
		if ld.own {
			ld.c.dropLeaseAsync(ld.lease, true)
			ld.release()
		} else {
			ld.c.deleteKeyAsync(ld.key, ld.rev, true, ld.release)
		}
		return ld.c.convertError(ctx, err, ld.path)
	}
	if ld.own {
		ld.c.dropLease(ld.lease)
	}
	ld.release()
	if resp.Deleted == 0 {
		return topo.NewError(topo.LockLost, ld.path)
	}
	return nil
}
