// Package middleware builds topo.Middleware decorators from a few hooks and
// ships the ones operators expect: Prometheus metrics (Metrics), OpenTelemetry
// tracing (Tracing), debug logging through log/slog (Logging), a runtime
// read-only switch (ReadOnly) and a per-cell read concurrency limit
// (ReadLimit).
//
// Apply them to one Conn with topo.Decorate, or to every connection a
// topo.Server opens (the global cell and every cell opened later) with the
// Server's middleware option. With no middleware nothing is wrapped, so an
// undecorated Conn costs what it always did.
//
// A decorator built here forwards every call unchanged: it may refuse a call
// before forwarding it (ReadOnly, ReadLimit on a finished context), but it
// never alters what a forwarded call returns. Watch channels are passed
// through untouched unless a hook needs to see them end (OnWatchEnd), in
// which case events are forwarded by one goroutine per watch, in order.
// The optional interfaces of the wrapped Conn that change what a caller
// gets are kept: backendkit.GuardedUpdater (topo.GuardedUpdate's fast
// path) and cache.SyncWatcher and cache.RevisionSyncWatcher (a read
// cache's revision barrier); the others are found behind the decorator
// through its Unwrap method (topo.ConnAs).
package middleware

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/cache"
)

// Op names a Conn operation, as decorators see it.
type Op string

// The operations. Unlock and Check are calls on a LockDescriptor;
// WaitForLeadership, Stop, GetCurrentLeaderID and WaitForNewLeader on a
// LeaderParticipation.
const (
	OpListDir                   Op = "ListDir"
	OpCreate                    Op = "Create"
	OpUpdate                    Op = "Update"
	OpGet                       Op = "Get"
	OpGetVersion                Op = "GetVersion"
	OpList                      Op = "List"
	OpDelete                    Op = "Delete"
	OpLock                      Op = "Lock"
	OpLockWithTTL               Op = "LockWithTTL"
	OpLockName                  Op = "LockName"
	OpTryLock                   Op = "TryLock"
	OpUnlock                    Op = "Unlock"
	OpCheck                     Op = "Check"
	OpWatch                     Op = "Watch"
	OpWatchRecursive            Op = "WatchRecursive"
	OpNewLeaderParticipation    Op = "NewLeaderParticipation"
	OpWaitForLeadership         Op = "WaitForLeadership"
	OpStop                      Op = "Stop"
	OpGetCurrentLeaderID        Op = "GetCurrentLeaderID"
	OpWaitForNewLeader          Op = "WaitForNewLeader"
	OpTxn                       Op = "Txn"
	OpCampaign                  Op = "Campaign"
	OpProclaim                  Op = "Proclaim"
	OpResign                    Op = "Resign"
	OpLeader                    Op = "Leader"
	OpObserve                   Op = "Observe"
	OpResumeLeaderParticipation Op = "ResumeLeaderParticipation"
)

// IsRead reports whether op only reads files: ListDir, Get, GetVersion and
// List (the operations a read concurrency limit applies to).
func (op Op) IsRead() bool {
	switch op {
	case OpListDir, OpGet, OpGetVersion, OpList:
		return true
	}
	return false
}

// Mutates reports whether op changes the store or claims something in it:
// Create, Update, Delete, Txn (even one of conditions only; a guarded
// update is its Txn), every lock acquisition, joining an election
// (ResumeLeaderParticipation, WaitForLeadership, Campaign) and publishing
// a leader value (Proclaim). NewLeaderParticipation does not count: it
// writes nothing on any backend, and the participation it returns is how
// a process reads an election (GetCurrentLeaderID, Leader, Observe,
// WaitForNewLeader; election.NewElection makes one), so a read-only
// switch lets it through and refuses the participation's joining calls.
// Releasing (Unlock, Stop, Resign) does not count either: a read-only
// switch must never keep a lock or a leadership from being given up.
func (op Op) Mutates() bool {
	switch op {
	case OpCreate, OpUpdate, OpDelete, OpTxn, OpLock, OpLockWithTTL, OpLockName, OpTryLock,
		OpWaitForLeadership, OpCampaign, OpProclaim, OpResumeLeaderParticipation:
		return true
	}
	return false
}

// Call describes one call passing through a decorator.
type Call struct {
	// Info describes the decorated connection.
	Info topo.ConnInfo
	// Op is the operation.
	Op Op
	// Path is the call's path argument as given (a file, directory or
	// prefix; the election name for election calls).
	Path string
}

// Hooks are what a decorator built by New does. Every field is optional.
// Hooks are called concurrently from every goroutine using the Conn, so
// they must be safe for concurrent use.
type Hooks struct {
	// Around runs around every call. It must call next at most once, with
	// ctx or a context derived from it, and return what next returned, or
	// refuse the call by returning an error without calling next (the call
	// then returns that error and zero values). Calls that take no context
	// (NewLeaderParticipation, WaitForLeadership, Stop) get
	// context.Background().
	Around func(ctx context.Context, c Call, next func(context.Context) error) error

	// OnLockAcquired is called when a lock call returns a held lock, with
	// the time the call took (the wait).
	OnLockAcquired func(c Call, wait time.Duration)
	// OnLockReleased is called once per acquired lock, with how long it
	// was held and the error that ended it (nil for a clean Unlock): when
	// Unlock returns having released it (nil) or found it gone (LockLost,
	// Closed), when Check first reports LockLost, or when the lock's Done
	// closes while no Unlock is under way (a LockLost *topo.Error: the
	// store dropped it; Closed: the Conn was closed). An Unlock that fails
	// otherwise (Interrupted or Timeout for its ctx, Unavailable, ...) did
	// not end the lock for this hook: the lock's later end is reported
	// instead. Setting it makes the decorator watch each held lock's Done
	// from a goroutine of its own.
	OnLockReleased func(c Call, held time.Duration, err error)

	// OnWatchStart is called when Watch or WatchRecursive returns a channel.
	OnWatchStart func(c Call)
	// OnWatchEnd is called when that channel closes, with the error of its
	// last event (nil if it had none). Setting it makes the decorator
	// forward the watch's events through a goroutine of its own.
	OnWatchEnd func(c Call, err error)

	// OnLeadership is called with true when WaitForLeadership or
	// Campaign returns leadership, and with false once the leadership
	// context ends. The calls for one participation are made one at a
	// time and in order (a term's end before the next term's start), so
	// the hook must not call that participation's WaitForLeadership or
	// Campaign.
	OnLeadership func(c Call, leading bool)
}

// New returns a Conn that runs h around every call and forwards it to
// next. Closing it closes next. It is safe for concurrent use as next is.
func New(info topo.ConnInfo, next topo.Conn, h Hooks) topo.Conn {
	return &conn{info: info, next: next, h: h}
}

// Middleware returns a topo.Middleware that decorates a connection with the
// hooks that makeHooks returns for it (called once per connection, so
// hooks may hold per-connection state).
func Middleware(makeHooks func(info topo.ConnInfo) Hooks) topo.Middleware {
	return func(info topo.ConnInfo, next topo.Conn) topo.Conn {
		return New(info, next, makeHooks(info))
	}
}

type conn struct {
	info    topo.ConnInfo
	next    topo.Conn
	h       Hooks
	closing atomic.Bool // Close was called
}

// Unwrap returns the Conn c decorates, so that a test can find the
// backend's own Conn behind decorators (memorytopo.ConnOf, topo.Middleware).
func (c *conn) Unwrap() topo.Conn { return c.next }

func (c *conn) call(op Op, path string) Call { return Call{Info: c.info, Op: op, Path: path} }

// around runs fn through the Around hook.
func (c *conn) around(ctx context.Context, op Op, path string, fn func(context.Context) error) error {
	if c.h.Around == nil {
		return fn(ctx)
	}
	return c.h.Around(ctx, c.call(op, path), fn)
}

func (c *conn) ListDir(ctx context.Context, dirPath string, full bool) (entries []topo.DirEntry, err error) {
	err = c.around(ctx, OpListDir, dirPath, func(ctx context.Context) error {
		var ierr error
		entries, ierr = c.next.ListDir(ctx, dirPath, full)
		return ierr
	})
	return entries, err
}

func (c *conn) Create(ctx context.Context, filePath string, contents []byte) (v topo.Version, err error) {
	err = c.around(ctx, OpCreate, filePath, func(ctx context.Context) error {
		var ierr error
		v, ierr = c.next.Create(ctx, filePath, contents)
		return ierr
	})
	return v, err
}

func (c *conn) Update(ctx context.Context, filePath string, contents []byte, version topo.Version) (v topo.Version, err error) {
	err = c.around(ctx, OpUpdate, filePath, func(ctx context.Context) error {
		var ierr error
		v, ierr = c.next.Update(ctx, filePath, contents, version)
		return ierr
	})
	return v, err
}

func (c *conn) Get(ctx context.Context, filePath string) (b []byte, v topo.Version, err error) {
	err = c.around(ctx, OpGet, filePath, func(ctx context.Context) error {
		var ierr error
		b, v, ierr = c.next.Get(ctx, filePath)
		return ierr
	})
	return b, v, err
}

func (c *conn) GetVersion(ctx context.Context, filePath string, version int64) (b []byte, err error) {
	err = c.around(ctx, OpGetVersion, filePath, func(ctx context.Context) error {
		var ierr error
		b, ierr = c.next.GetVersion(ctx, filePath, version)
		return ierr
	})
	return b, err
}

func (c *conn) List(ctx context.Context, prefix string) (kvs []topo.KVInfo, err error) {
	err = c.around(ctx, OpList, prefix, func(ctx context.Context) error {
		var ierr error
		kvs, ierr = c.next.List(ctx, prefix)
		return ierr
	})
	return kvs, err
}

func (c *conn) Delete(ctx context.Context, filePath string, version topo.Version) error {
	return c.around(ctx, OpDelete, filePath, func(ctx context.Context) error {
		return c.next.Delete(ctx, filePath, version)
	})
}

func (c *conn) Txn(ctx context.Context, ops ...topo.TxnOp) (vs []topo.Version, err error) {
	// The call's path is the first op's (an IfHeld op has none).
	var p string
	for _, op := range ops {
		if op.Path != "" {
			p = op.Path
			break
		}
	}
	err = c.around(ctx, OpTxn, p, func(ctx context.Context) error {
		var ierr error
		vs, ierr = c.next.Txn(ctx, ops...)
		return ierr
	})
	return vs, err
}

// GuardedUpdate implements backendkit.GuardedUpdater, so that
// topo.GuardedUpdate through a decorated Conn keeps the wrapped backend's
// fast path (memorytopo's) instead of building a Txn. It is exactly the
// call topo.GuardedUpdate would otherwise make, c.Txn(ctx,
// topo.IfHeld(f), topo.UpdateOp(filePath, contents, version)), as the
// hooks see it: one OpTxn call on filePath, so a read-only switch refuses
// it, metrics count it and tracing spans it as that Txn. It forwards
// through topo.GuardedUpdate, which calls the wrapped Conn's own
// GuardedUpdate when it has one and its Txn otherwise.
func (c *conn) GuardedUpdate(ctx context.Context, f topo.Fence, filePath string, contents []byte, version topo.Version) (v topo.Version, err error) {
	err = c.around(ctx, OpTxn, filePath, func(ctx context.Context) error {
		var ierr error
		v, ierr = topo.GuardedUpdate(ctx, c.next, f, filePath, contents, version)
		return ierr
	})
	return v, err
}

var _ backendkit.GuardedUpdater = (*conn)(nil)

func (c *conn) Lock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lock(ctx, OpLock, dirPath, func(ctx context.Context) (topo.LockDescriptor, error) {
		return c.next.Lock(ctx, dirPath, contents)
	})
}

func (c *conn) LockWithTTL(ctx context.Context, dirPath, contents string, ttl time.Duration) (topo.LockDescriptor, error) {
	return c.lock(ctx, OpLockWithTTL, dirPath, func(ctx context.Context) (topo.LockDescriptor, error) {
		return c.next.LockWithTTL(ctx, dirPath, contents, ttl)
	})
}

func (c *conn) LockName(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lock(ctx, OpLockName, dirPath, func(ctx context.Context) (topo.LockDescriptor, error) {
		return c.next.LockName(ctx, dirPath, contents)
	})
}

func (c *conn) TryLock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lock(ctx, OpTryLock, dirPath, func(ctx context.Context) (topo.LockDescriptor, error) {
		return c.next.TryLock(ctx, dirPath, contents)
	})
}

func (c *conn) lock(ctx context.Context, op Op, dirPath string, fn func(context.Context) (topo.LockDescriptor, error)) (topo.LockDescriptor, error) {
	var ld topo.LockDescriptor
	start := time.Now()
	err := c.around(ctx, op, dirPath, func(ctx context.Context) error {
		var ierr error
		ld, ierr = fn(ctx)
		return ierr
	})
	if err != nil {
		return nil, err
	}
	call := c.call(op, dirPath)
	now := time.Now()
	if c.h.OnLockAcquired != nil {
		c.h.OnLockAcquired(call, now.Sub(start))
	}
	d := &lockDescriptor{c: c, call: call, next: ld, acquired: now}
	if c.h.OnLockReleased != nil {
		go d.watchEnd()
	}
	return d, nil
}

func (c *conn) Watch(ctx context.Context, filePath string) (cur *topo.WatchData, changes <-chan *topo.WatchData, err error) {
	err = c.around(ctx, OpWatch, filePath, func(ctx context.Context) error {
		var ierr error
		cur, changes, ierr = c.next.Watch(ctx, filePath)
		return ierr
	})
	if err != nil {
		return nil, nil, err
	}
	return cur, forward(c, c.call(OpWatch, filePath), changes, func(d *topo.WatchData) error { return d.Err }), nil
}

func (c *conn) WatchRecursive(ctx context.Context, prefix string) (cur []*topo.WatchDataRecursive, changes <-chan *topo.WatchDataRecursive, err error) {
	err = c.around(ctx, OpWatchRecursive, prefix, func(ctx context.Context) error {
		var ierr error
		cur, changes, ierr = c.next.WatchRecursive(ctx, prefix)
		return ierr
	})
	if err != nil {
		return nil, nil, err
	}
	return cur, forward(c, c.call(OpWatchRecursive, prefix), changes, recursiveEnd), nil
}

// WatchRecursiveSyncRevision implements cache.RevisionSyncWatcher, so that
// a topo/cache Cache over a decorated Conn keeps the wrapped backend's
// revision barrier (etcd2topo's, memorytopo's): without it, its Consistent
// Gets would all read through the store and its Deletes would lose their
// barrier. The watch is exactly WatchRecursive's as the hooks see it (one
// OpWatchRecursive call on prefix, then its start and end). It forwards
// to the wrapped Conn's WatchRecursiveSyncRevision, or WatchRecursiveSync
// (the sync then returns revision 0), when it has one; otherwise the sync
// is nil, as a Cache takes it for a Conn with neither. The sync's own
// store reads go to the wrapped Conn without passing through the hooks.
func (c *conn) WatchRecursiveSyncRevision(ctx context.Context, prefix string) (cur []*topo.WatchDataRecursive, changes <-chan *topo.WatchDataRecursive, sync func(context.Context) (uint64, int64, error), err error) {
	err = c.around(ctx, OpWatchRecursive, prefix, func(ctx context.Context) error {
		var ierr error
		switch n := c.next.(type) {
		case cache.RevisionSyncWatcher:
			cur, changes, sync, ierr = n.WatchRecursiveSyncRevision(ctx, prefix)
		case cache.SyncWatcher:
			var s func(context.Context) (uint64, error)
			cur, changes, s, ierr = n.WatchRecursiveSync(ctx, prefix)
			if s != nil {
				sync = func(ctx context.Context) (uint64, int64, error) {
					k, err := s(ctx)
					return k, 0, err
				}
			}
		default:
			cur, changes, ierr = c.next.WatchRecursive(ctx, prefix)
		}
		return ierr
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return cur, forward(c, c.call(OpWatchRecursive, prefix), changes, recursiveEnd), sync, nil
}

// WatchRecursiveSync implements cache.SyncWatcher: it is
// WatchRecursiveSyncRevision without the revision.
func (c *conn) WatchRecursiveSync(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, func(context.Context) (uint64, error), error) {
	cur, changes, sync, err := c.WatchRecursiveSyncRevision(ctx, prefix)
	if sync == nil {
		return cur, changes, nil, err
	}
	return cur, changes, backendkit.SyncCount(sync), err
}

var _ cache.RevisionSyncWatcher = (*conn)(nil)

// recursiveEnd is the error a recursive watch ends with, as OnWatchEnd
// reports it: its NoNode events report deletions, not its end.
func recursiveEnd(d *topo.WatchDataRecursive) error {
	if topo.IsErrType(d.Err, topo.NoNode) {
		return nil
	}
	return d.Err
}

// forward reports a watch's start and end to the hooks. Without an
// OnWatchEnd hook the channel is returned as it is.
func forward[T any](c *conn, call Call, in <-chan T, errOf func(T) error) <-chan T {
	if c.h.OnWatchStart != nil {
		c.h.OnWatchStart(call)
	}
	if c.h.OnWatchEnd == nil {
		return in
	}
	out := make(chan T)
	go func() {
		defer close(out)
		var last error
		for ev := range in {
			last = errOf(ev)
			out <- ev
		}
		c.h.OnWatchEnd(call, last)
	}()
	return out
}

func (c *conn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	var p topo.LeaderParticipation
	err := c.around(context.Background(), OpNewLeaderParticipation, name, func(context.Context) error {
		var ierr error
		p, ierr = c.next.NewLeaderParticipation(name, id)
		return ierr
	})
	if err != nil {
		return nil, err
	}
	return &participation{c: c, name: name, next: p}, nil
}

func (c *conn) ResumeLeaderParticipation(ctx context.Context, name, id string, info []byte) (topo.LeaderParticipation, error) {
	var p topo.LeaderParticipation
	err := c.around(ctx, OpResumeLeaderParticipation, name, func(ctx context.Context) error {
		var ierr error
		p, ierr = c.next.ResumeLeaderParticipation(ctx, name, id, info)
		return ierr
	})
	if err != nil {
		return nil, err
	}
	return &participation{c: c, name: name, next: p}, nil
}

func (c *conn) Close() {
	c.closing.Store(true)
	c.next.Close()
}
