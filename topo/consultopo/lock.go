package consultopo

import (
	"context"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Lock implements topo.Conn.Lock: it acquires the key <dir>/Lock with the
// Conn's long-lived session (TTL Options.SessionTTL), storing contents with
// the api package's lock flags. While the lock is held or others wait, it
// queues (an entry <dir>/locks/queue/<session id>-<random> on its session,
// see queue.go) and acquires in queue order: waiters of every topokit Conn
// acquire in the order they queued (Vitess's contenders, which do not
// queue, may come first), each waiting only for the entry before its own,
// the head with blocking queries on the key. It returns NoNode if dirPath has no entries
// (InvalidArgument if it is a file with nothing below it; see
// backendkit.LockNeedsFiles, decided with one more read on that path),
// NodeExists with a *ForeignKeyError when <dir>/Lock holds a value another
// tool wrote (it is never overwritten), LockLost when the Conn's session
// ends while it waits, PermissionDenied when the ACL token may not create
// sessions or write the key, Timeout/Interrupted when ctx ends first
// (nothing stays held), Closed after Close, InvalidPath for a malformed or
// reserved path (backendkit.CheckLockPath) and Unavailable when the agent cannot
// be reached. Locks taken through one Conn exclude each other like locks of
// different Conns.
func (c *Conn) Lock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lockDir(ctx, dirPath, contents, c.opts.SessionTTL, false, true)
}

// LockWithTTL implements topo.Conn.LockWithTTL: Lock with a session TTL of
// ttl, rounded up to whole seconds and to Options.MinSessionTTL (by
// default 10 s), at most
// MaxSessionTTL. When that equals the Conn's SessionTTL the long-lived
// session is used; otherwise the lock gets a session of its own, destroyed
// by Unlock. ttl <= 0 gives InvalidArgument; other errors as for Lock.
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
	return c.lockDir(ctx, dirPath, contents, c.opts.clampTTL(ttl), false, true)
}

// LockName implements topo.Conn.LockName: a lock on the key <dirPath>/Lock
// that does not require dirPath to exist, on a session of its own with
// Consul's longest TTL (MaxSessionTTL, 24 h). Errors as for Lock, except
// NoNode and the InvalidArgument of a file.
func (c *Conn) LockName(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lockDir(ctx, dirPath, contents, MaxSessionTTL, false, false)
}

// TryLock implements topo.Conn.TryLock: Lock, but it returns NodeExists at
// once while another holder (of this or another Conn) has the lock or
// other contenders queue for it (it never queues). When
// the lock is free but a lock-delay left by an invalidated session is in
// effect, it retries for up to the Conn's own lock-delay before giving up
// with NodeExists. Other errors as for Lock.
func (c *Conn) TryLock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lockDir(ctx, dirPath, contents, c.opts.SessionTTL, true, true)
}

func (c *Conn) lockDir(ctx context.Context, dirPath, contents string, ttl time.Duration, try, needDir bool) (topo.LockDescriptor, error) {
	if err := backendkit.CheckContext(ctx, dirPath); err != nil {
		return nil, err
	}
	dir, err := backendkit.CheckLock(dirPath, contents)
	if err != nil {
		return nil, err
	}
	if err := c.begin(ctx, dir); err != nil {
		return nil, err
	}
	if needDir {
		ok, err := c.dirHasEntries(ctx, dir)
		if err != nil {
			return nil, err
		}
		if !ok {
			// Which error: one read, on this error path only.
			isFile := false
			if dir != "" {
				_, _, gerr := c.Get(ctx, dir)
				isFile = gerr == nil
			}
			return nil, backendkit.LockNeedsFiles(dir, isFile)
		}
	}
	key := c.dirPrefix(dir) + lockName
	spec := lockSpec{path: dir, key: key, value: []byte(contents), ttl: ttl, try: try, detach: true, queue: queuePrefixFor(key, false)}
	h, err := c.lock(ctx, spec)
	if err != nil {
		return nil, err
	}
	return newLockDescriptor(c, dir, spec.key, h), nil
}
