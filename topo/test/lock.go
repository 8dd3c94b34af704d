package test

import (
	"context"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// testLockNoNode: Lock, TryLock and LockWithTTL need files under the
// directory; nothing is left behind by the refusal.
func testLockNoNode(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	_, err := c.Lock(ctx, "nodir", "x")
	requireCode(t, err, topo.NoNode, "Lock of a directory without files")
	_, err = c.TryLock(ctx, "nodir", "x")
	requireCode(t, err, topo.NoNode, "TryLock of a directory without files")
	_, err = c.LockWithTTL(ctx, "nodir", "x", time.Minute)
	requireCode(t, err, topo.NoNode, "LockWithTTL of a directory without files")

	mustCreate(t, ctx, c, "other/f", "x")
	_, err = c.Lock(ctx, "other/f/sub", "x")
	requireCode(t, err, topo.NoNode, "Lock of a directory without files")
	_, err = c.Lock(ctx, "othe", "x")
	requireCode(t, err, topo.NoNode, "Lock of a directory whose name is a prefix of another's")

	kvs, err := c.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"other/f"}, kvPaths(kvs))
	entries, err := c.ListDir(ctx, "", false)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"other"}, "ListDir of the root after refused locks")
}

// testLockBlocks: a second Lock waits for the first to be released; Check
// and a double Unlock behave.
func testLockBlocks(s *store) {
	t, ctx, c1, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()
	mustCreate(t, ctx, c1, "d/f", "x")

	l1 := mustLock(t, ctx, c1, "d", "first")
	require.NoError(t, l1.Check(ctx))

	got := lockAsync(t, func() (topo.LockDescriptor, error) { return c2.Lock(ctx, "/d/", "second") })
	requireNothing(t, got, "a second Lock while the first is held")
	require.NoError(t, l1.Check(ctx))

	require.NoError(t, l1.Unlock(ctx))
	r, _ := recv(t, got, "the second Lock after Unlock")
	require.NoError(t, r.err, "the second Lock after Unlock")
	require.NoError(t, r.l.Check(ctx))

	requireCode(t, l1.Check(ctx), topo.Interrupted, "Check after Unlock")
	requireCode(t, l1.Unlock(ctx), topo.Interrupted, "second Unlock")

	require.NoError(t, r.l.Unlock(ctx))
	requireCode(t, r.l.Unlock(ctx), topo.Interrupted, "second Unlock")
	requireCode(t, r.l.Check(ctx), topo.Interrupted, "Check after Unlock")

	// The lock is free again.
	l3, err := c1.TryLock(ctx, "d", "third")
	require.NoError(t, err)
	require.NoError(t, l3.Unlock(ctx))
}

// testLockTimeout: a waiter whose deadline passes gets Timeout and leaves
// nothing behind: the next locker gets the lock immediately after Unlock.
func testLockTimeout(s *store) {
	t, ctx, c1, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()
	mustCreate(t, ctx, c1, "d/f", "x")

	l1 := mustLock(t, ctx, c1, "d", "holder")

	_, err := c2.Lock(shortCtx(t, shortWait), "d", "waiter")
	requireCode(t, err, topo.Timeout, "Lock whose deadline passes while waiting")
	_, err = c1.Lock(shortCtx(t, shortWait), "d", "waiter on the holder's conn")
	requireCode(t, err, topo.Timeout, "Lock whose deadline passes while waiting")
	_, err = c2.LockWithTTL(shortCtx(t, shortWait), "d", "waiter", time.Minute)
	requireCode(t, err, topo.Timeout, "LockWithTTL whose deadline passes while waiting")
	_, err = c2.LockName(shortCtx(t, shortWait), "d", "waiter")
	requireCode(t, err, topo.Timeout, "LockName whose deadline passes while waiting")
	requireNothingLeftBehind(s, ctx, l1, "a timed-out waiter")
}

// requireNothingLeftBehind is the end of a test whose waiter gave up on the
// lock on "d" held as l: the holder still holds it, and once it is released
// a TryLock on a new connection gets it at once.
func requireNothingLeftBehind(s *store, ctx context.Context, l topo.LockDescriptor, waiter string) {
	t := s.t
	t.Helper()
	require.NoError(t, l.Check(ctx), "the holder keeps the lock")

	require.NoError(t, l.Unlock(ctx))
	// TryLock fails fast if anything (such as a timed-out waiter's
	// leftover entry) is queued ahead of it.
	next, err := s.conn().TryLock(ctx, "d", "next")
	require.NoError(t, err, "TryLock right after Unlock: "+waiter+" left something behind")
	require.NoError(t, next.Unlock(ctx))
}

// testLockInterrupted: cancelling a waiter's context gives Interrupted and
// leaves nothing behind.
func testLockInterrupted(s *store) {
	t, ctx, c1, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()
	mustCreate(t, ctx, c1, "d/f", "x")

	l1 := mustLock(t, ctx, c1, "d", "holder")

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := lockAsync(t, func() (topo.LockDescriptor, error) { return c2.Lock(wctx, "d", "waiter") })
	requireNothing(t, got, "a second Lock while the first is held")
	cancel()
	r, _ := recv(t, got, "a waiting Lock after its context was cancelled")
	requireCode(t, r.err, topo.Interrupted, "a waiting Lock after its context was cancelled")
	requireNothingLeftBehind(s, ctx, l1, "a cancelled waiter")
}

// testLockWaiterLeavesMidQueue: with the lock held and three waiters
// queued behind it, the middle one gives up (its context cancelled): that
// grants nobody (the one behind it must not take its place as holder
// while the head still holds), and the others then acquire in queue
// order, each only once the one before released.
func testLockWaiterLeavesMidQueue(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	cs := s.conns(4)
	mustCreate(t, ctx, cs[0], "d/f", "x")

	l0 := mustLock(t, ctx, cs[0], "d", "holder")
	a := lockAsync(t, func() (topo.LockDescriptor, error) { return cs[1].Lock(ctx, "d", "a") })
	requireNothing(t, a, "the first waiter while the lock is held")
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := lockAsync(t, func() (topo.LockDescriptor, error) { return cs[2].Lock(bctx, "d", "b") })
	requireNothing(t, b, "the second waiter while the lock is held")
	c := lockAsync(t, func() (topo.LockDescriptor, error) { return cs[3].Lock(ctx, "d", "c") })
	requireNothing(t, c, "the third waiter while the lock is held")

	cancel()
	rb, _ := recv(t, b, "the second waiter after its context was cancelled")
	requireCode(t, rb.err, topo.Interrupted, "the second waiter after its context was cancelled")
	requireNothing(t, c, "the third waiter once the second left, the lock still held")
	requireNothing(t, a, "the first waiter once the second left, the lock still held")
	require.NoError(t, l0.Check(ctx), "the holder keeps the lock when a waiter leaves")

	require.NoError(t, l0.Unlock(ctx))
	ra, _ := recv(t, a, "the first waiter after Unlock")
	require.NoError(t, ra.err, "the first waiter after Unlock")
	require.NoError(t, ra.l.Check(ctx))
	requireNothing(t, c, "the third waiter while the first holds")
	require.NoError(t, ra.l.Unlock(ctx))
	rc, _ := recv(t, c, "the third waiter after the first's Unlock")
	require.NoError(t, rc.err, "the third waiter after the first's Unlock")
	require.NoError(t, rc.l.Check(ctx))
	require.NoError(t, rc.l.Unlock(ctx))
}

// testLockOutlivesContext: the lock stays held after the context passed to
// Lock ends.
func testLockOutlivesContext(s *store) {
	t, ctx, c1, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()
	mustCreate(t, ctx, c1, "d/f", "x")
	mustCreate(t, ctx, c1, "e/f", "x")

	lctx, cancel := context.WithCancel(ctx)
	l1 := mustLock(t, lctx, c1, "d", "holder")
	cancel()

	dctx, dcancel := context.WithTimeout(ctx, longWait)
	l2, err := c1.LockWithTTL(dctx, "e", "holder", time.Minute)
	require.NoError(t, err)
	unlockOnCleanup(t, l2)
	dcancel()

	for _, dir := range []string{"d", "e"} {
		_, err = c2.TryLock(ctx, dir, "other")
		requireCode(t, err, topo.NodeExists, "TryLock after the holder's Lock context ended")
		_, err = c2.Lock(shortCtx(t, shortWait), dir, "other")
		requireCode(t, err, topo.Timeout, "Lock after the holder's Lock context ended")
	}
	require.NoError(t, l1.Check(ctx))
	require.NoError(t, l2.Check(ctx))
	require.NoError(t, l1.Unlock(ctx))
	require.NoError(t, l2.Unlock(ctx))
}

// testLockEphemeral: while held, a full ListDir of the directory shows the
// lock entry as Ephemeral next to the (non-ephemeral) files, and List shows
// only the files.
func testLockEphemeral(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()
	mustCreate(t, ctx, c, "d/f", "x")

	l := mustLock(t, ctx, c, "d", "holder")

	entries, err := c.ListDir(ctx, "d", true)
	require.NoError(t, err)
	f := entry(t, entries, "f")
	require.False(t, f.Ephemeral, "a file is not ephemeral")
	require.Equal(t, topo.TypeFile, f.Type)
	ephemeral := 0
	for _, e := range entries {
		if e.Name != "f" {
			require.Truef(t, e.Ephemeral, "lock entry %q under a locked directory must be Ephemeral", e.Name)
			ephemeral++
		}
	}
	require.Positive(t, ephemeral, "a full ListDir of a locked directory shows its lock entry: %+v", entries)

	kvs, err := c.List(ctx, "d")
	require.NoError(t, err)
	require.Equal(t, []string{"d/f"}, kvPaths(kvs))
	require.NoError(t, l.Unlock(ctx))
}

// testTryLock: TryLock takes a free lock, and returns NodeExists without
// waiting while the lock is held, from any connection (the holder keeps the
// lock until TryLock has returned, so a TryLock that waits fails the test).
func testTryLock(s *store) {
	t, ctx, c1, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()
	mustCreate(t, ctx, c1, "d/f", "x")

	l1, err := c1.TryLock(ctx, "d", "first")
	require.NoError(t, err)
	unlockOnCleanup(t, l1)
	require.NoError(t, l1.Check(ctx))

	for _, c := range []topo.Conn{c2, c1} {
		tctx, cancel := context.WithTimeout(ctx, promptWait)
		_, err = c.TryLock(tctx, "d", "second")
		cancel()
		requireCode(t, err, topo.NodeExists, "TryLock while the lock is held")
	}
	// Also while a blocked Lock waits in the queue.
	waiter := lockAsync(t, func() (topo.LockDescriptor, error) { return c2.Lock(ctx, "d", "waiter") })
	requireNothing(t, waiter, "Lock while held")
	_, err = s.conn().TryLock(shortCtx(t, promptWait), "d", "third")
	requireCode(t, err, topo.NodeExists, "TryLock while the lock is held and a waiter is queued")

	require.NoError(t, l1.Check(ctx))
	require.NoError(t, l1.Unlock(ctx))
	r, _ := recv(t, waiter, "the waiting Lock after Unlock")
	require.NoError(t, r.err)
	require.NoError(t, r.l.Unlock(ctx))

	l2, err := c2.TryLock(ctx, "d", "second")
	require.NoError(t, err, "TryLock of a free lock")
	require.NoError(t, l2.Check(ctx))
	require.NoError(t, l2.Unlock(ctx))
	requireCode(t, l2.Unlock(ctx), topo.Interrupted, "second Unlock of a TryLock lock")
}

// testLockWithTTL: a non-positive ttl is InvalidArgument; a positive one
// gives an exclusive lock.
func testLockWithTTL(s *store) {
	t, ctx, c1, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()
	mustCreate(t, ctx, c1, "d/f", "x")

	for _, ttl := range []time.Duration{0, -time.Second} {
		_, err := c1.LockWithTTL(ctx, "d", "x", ttl)
		requireCode(t, err, topo.InvalidArgument, "LockWithTTL with ttl "+ttl.String())
	}
	// The refused calls took nothing.
	l0, err := c2.TryLock(ctx, "d", "probe")
	require.NoError(t, err, "a refused LockWithTTL left the lock held")
	require.NoError(t, l0.Unlock(ctx))

	l1, err := c1.LockWithTTL(ctx, "d", "holder", 30*time.Second)
	require.NoError(t, err)
	unlockOnCleanup(t, l1)
	require.NoError(t, l1.Check(ctx))
	_, err = c2.TryLock(ctx, "d", "other")
	requireCode(t, err, topo.NodeExists, "TryLock while a LockWithTTL lock is held")
	_, err = c2.Lock(shortCtx(t, shortWait), "d", "other")
	requireCode(t, err, topo.Timeout, "Lock while a LockWithTTL lock is held")

	require.NoError(t, l1.Unlock(ctx))
	requireCode(t, l1.Unlock(ctx), topo.Interrupted, "second Unlock")
	l2, err := c2.TryLock(ctx, "d", "other")
	require.NoError(t, err)
	require.NoError(t, l2.Unlock(ctx))
}

// testLockName: a named lock needs no files, is exclusive, and writes no
// file.
func testLockName(s *store) {
	t, ctx, c1, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()

	l1, err := c1.LockName(ctx, "named/x", "holder")
	require.NoError(t, err, "LockName of a directory that does not exist")
	unlockOnCleanup(t, l1)
	require.NoError(t, l1.Check(ctx))

	_, err = c2.LockName(shortCtx(t, shortWait), "named/x", "other")
	requireCode(t, err, topo.Timeout, "LockName while held")
	_, err = c1.LockName(shortCtx(t, shortWait), "named/x", "other")
	requireCode(t, err, topo.Timeout, "LockName while held by the same connection")

	// A different name is a different lock.
	l3, err := c2.LockName(ctx, "named/y", "other")
	require.NoError(t, err)
	require.NoError(t, l3.Unlock(ctx))

	_, err = c1.List(ctx, "")
	requireCode(t, err, topo.NoNode, "List while only a named lock is held (a lock is not a file)")

	got := lockAsync(t, func() (topo.LockDescriptor, error) { return c2.LockName(ctx, "named/x", "other") })
	requireNothing(t, got, "LockName while held")
	require.NoError(t, l1.Unlock(ctx))
	r, _ := recv(t, got, "LockName after Unlock")
	require.NoError(t, r.err)
	require.NoError(t, r.l.Check(ctx))
	require.NoError(t, r.l.Unlock(ctx))
	requireCode(t, r.l.Unlock(ctx), topo.Interrupted, "second Unlock")
	requireCode(t, r.l.Check(ctx), topo.Interrupted, "Check after Unlock")
}

// testLockSameConn: locks are exclusive between goroutines sharing one
// connection too.
func testLockSameConn(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()
	mustCreate(t, ctx, c, "d/f", "x")

	l1 := mustLock(t, ctx, c, "d", "first")
	_, err := c.TryLock(ctx, "d", "second")
	requireCode(t, err, topo.NodeExists, "TryLock on the holder's own connection")
	got := lockAsync(t, func() (topo.LockDescriptor, error) { return c.Lock(ctx, "d", "second") })
	requireNothing(t, got, "Lock on the holder's own connection")
	require.NoError(t, l1.Unlock(ctx))
	r, _ := recv(t, got, "Lock after Unlock")
	require.NoError(t, r.err)
	require.NoError(t, r.l.Unlock(ctx))
}

// testLocksIndependent: locks on different directories are independent,
// even when one name is a string prefix of another or a parent of it.
func testLocksIndependent(s *store) {
	t, ctx, c1, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()
	for _, p := range []string{"d/f", "d2/f", "d/sub/f", "e/f"} {
		mustCreate(t, ctx, c1, p, "x")
	}

	l := mustLock(t, ctx, c1, "d", "holder")
	for _, dir := range []string{"d2", "d/sub", "e"} {
		o, err := c2.TryLock(shortCtx(t, promptWait), dir, "other")
		require.NoErrorf(t, err, "TryLock(%q) while only d is locked", dir)
		require.NoError(t, o.Unlock(ctx))
		o, err = c2.Lock(shortCtx(t, longWait), dir, "other")
		require.NoErrorf(t, err, "Lock(%q) while only d is locked", dir)
		require.NoError(t, o.Unlock(ctx))
	}
	n, err := c2.LockName(shortCtx(t, longWait), "d2", "named")
	require.NoError(t, err, "LockName(d2) while only d is locked")
	require.NoError(t, n.Unlock(ctx))

	// And the other way round: a held child lock does not block the parent.
	require.NoError(t, l.Unlock(ctx))
	sub := mustLock(t, ctx, c2, "d/sub", "child")
	p, err := c1.TryLock(shortCtx(t, promptWait), "d", "parent")
	require.NoError(t, err, "TryLock(d) while only d/sub is locked")
	require.NoError(t, p.Unlock(ctx))
	require.NoError(t, sub.Unlock(ctx))
}

// testLockOnFileOrEmpty: Lock, TryLock and LockWithTTL on a path that is a
// file with nothing below it return InvalidArgument, on a directory that
// holds no file NoNode, both with the one wording of
// backendkit.LockNeedsFiles (it points to LockName); nothing is written.
// LockName takes both.
func testLockOnFileOrEmpty(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	mustCreate(t, ctx, c, "jobs/j1", "x")
	locks := []struct {
		name string
		lock func(dir string) (topo.LockDescriptor, error)
	}{
		{"Lock", func(dir string) (topo.LockDescriptor, error) { return c.Lock(ctx, dir, "x") }},
		{"TryLock", func(dir string) (topo.LockDescriptor, error) { return c.TryLock(ctx, dir, "x") }},
		{"LockWithTTL", func(dir string) (topo.LockDescriptor, error) { return c.LockWithTTL(ctx, dir, "x", time.Minute) }},
	}
	for _, l := range locks {
		_, err := l.lock("jobs/j1")
		requireCode(t, err, topo.InvalidArgument, l.name+" of a file")
		require.EqualError(t, err, backendkit.LockNeedsFiles("jobs/j1", true).Error(), l.name+" of a file")
		_, err = l.lock("/jobs/j1/")
		requireCode(t, err, topo.InvalidArgument, l.name+" of a file, path not canonical")
		_, err = l.lock("empty")
		requireCode(t, err, topo.NoNode, l.name+" of a directory without files")
		require.EqualError(t, err, backendkit.LockNeedsFiles("empty", false).Error(), l.name+" of a directory without files")
		require.Contains(t, err.Error(), "LockName", l.name+" of a directory without files")
		_, err = l.lock("jobs/j1/sub")
		requireCode(t, err, topo.NoNode, l.name+" of a directory below a file")
	}
	kvs, err := c.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"jobs/j1"}, kvPaths(kvs))

	// The directory of the file takes the lock.
	l := mustLock(t, ctx, c, "jobs", "x")
	require.NoError(t, l.Unlock(ctx))
}
