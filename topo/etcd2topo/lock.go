package etcd2topo

import (
	"context"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Locks on directories: Lock, TryLock, LockWithTTL, LockName. A lock is an
// entry (see claim.go) in the queue <root>/<dir>/locks/, waiting (see
// queue.go) for the older entries to go; lockDescriptor (descriptor.go)
// checks and releases it; the lease it rests on is in lease.go.

type lockMode struct {
	requireDir bool          // NoNode unless the directory has a file
	try        bool          // NodeExists instead of waiting
	ttl        time.Duration // 0: the shared lease
}

// Lock takes the lock on dirPath with the Conn's shared lease (TTL
// Options.LockTTL, 30 s by default): it adds an entry under
// <root>/<dirPath>/locks/ holding contents and, unless no entry there is
// older, waits until every older one is gone. Adding the entry, reading the
// newest entries of the queue and checking that dirPath holds a file are
// one transaction, and the wait watches the entry just ahead of ours (and
// the next one after it goes) from the current revision, so that a
// waiter gets the lock as soon as the holder's entry is deleted and a
// release wakes only the next waiter. It returns InvalidPath
// for a malformed or reserved dirPath (see backendkit.CheckLockPath), NoNode if
// dirPath holds no file (its entry is removed at once), InvalidArgument
// if dirPath is a file with no file below it (see
// backendkit.LockNeedsFiles), Timeout or
// Interrupted when ctx ends first (its entry is then removed), LockLost if
// its own entry vanished or its lease was lost while waiting,
// PermissionDenied when etcd refuses the write, Closed, Unavailable.
func (c *Conn) Lock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lock(ctx, dirPath, contents, lockMode{requireDir: true})
}

// LockWithTTL is Lock with a lease of ttl (rounded up to whole seconds,
// and to etcd's minimum lease TTL). A TTL other than Options.LockTTL gets a
// lease of its own, revoked by Unlock. It returns InvalidArgument for
// ttl <= 0.
func (c *Conn) LockWithTTL(ctx context.Context, dirPath, contents string, ttl time.Duration) (topo.LockDescriptor, error) {
	if err := backendkit.CheckContext(ctx, dirPath); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		// backendkit's order: the directory, the value, then the ttl,
		// all before Closed.
		_, err := backendkit.CheckLockWithTTL(dirPath, contents, ttl)
		return nil, err
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

// TryLock is Lock that returns NodeExists at once (removing its entry)
// instead of waiting when an older entry holds the lock.
func (c *Conn) TryLock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lock(ctx, dirPath, contents, lockMode{requireDir: true, try: true})
}

func (c *Conn) lock(ctx context.Context, dirPath, contents string, mode lockMode) (topo.LockDescriptor, error) {
	if err := backendkit.CheckContext(ctx, dirPath); err != nil {
		return nil, err
	}
	d, err := backendkit.CheckLockPath(dirPath)
	if err != nil {
		return nil, err
	}
	if err := backendkit.CheckValue(d, []byte(contents)); err != nil {
		return nil, err
	}
	if err := c.closedErr(d); err != nil {
		return nil, err
	}
	dirPrefix := c.dirPrefix(d)
	locksPrefix := dirPrefix + locksDir + "/"

	var extra []clientv3.Op
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
		extra = []clientv3.Op{
			clientv3.OpGet(start, clientv3.WithRange(locksPrefix), clientv3.WithKeysOnly(), clientv3.WithLimit(1)),
			clientv3.OpGet(dirPrefix+locksDir+"0", clientv3.WithRange(clientv3.GetPrefixRangeEnd(dirPrefix)),
				clientv3.WithKeysOnly(), clientv3.WithLimit(1)),
		}
	}
	var ttl int64
	if mode.ttl != 0 {
		ttl = ttlSeconds(mode.ttl)
	}
	cl, err := c.claimOn(ctx, d, locksPrefix, contents, ttl, mode.try, extra...)
	if err != nil {
		return nil, err
	}
	rs := cl.resp.Responses
	if mode.requireDir && len(rs[2].GetResponseRange().Kvs) == 0 && len(rs[3].GetResponseRange().Kvs) == 0 {
		cl.remove()
		// Which error: one read, on this error path only.
		_, _, gerr := c.Get(ctx, d)
		return nil, backendkit.LockNeedsFiles(d, d != "" && gerr == nil)
	}
	queue := rs[1].GetResponseRange().Kvs
	cl.resp = nil
	if cl.mustWait() {
		if mode.try {
			cl.remove()
			return nil, holderError(d, queue, locksPrefix, cl.older)
		}
		if err := cl.wait(ctx); err != nil {
			cl.remove()
			return nil, err
		}
	}
	return newLockDescriptor(cl), nil
}

// holderError is TryLock's NodeExists for d, naming the holder: the oldest
// of the older entries in the queue range read with the claim (its value
// is the holder's contents, its key's last segment its lease id).
func holderError(d string, queue []*mvccpb.KeyValue, prefix string, older map[string]struct{}) error {
	var oldest *mvccpb.KeyValue
	for _, kv := range queue {
		if _, ok := older[string(kv.Key)]; ok && (oldest == nil || kv.ModRevision < oldest.ModRevision) {
			oldest = kv
		}
	}
	if oldest == nil {
		return topo.NewError(topo.NodeExists, d)
	}
	return backendkit.LockHeld(d, oldest.Value, "lease "+strings.TrimPrefix(string(oldest.Key), prefix))
}
