package memorytopo_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/middleware"
)

func TestSetError(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	_, err := c.Create(ctx, "a", []byte("x"))
	require.NoError(t, err)

	boom := errors.New("boom")
	f.SetError(boom)
	_, _, err = c.Get(ctx, "a")
	require.ErrorIs(t, err, boom)
	requireCode(t, err, topo.Unavailable)
	var te *topo.Error
	require.ErrorAs(t, err, &te)
	require.Equal(t, "a", te.Path)
	_, err = c.Update(ctx, "a", []byte("y"), nil)
	require.ErrorIs(t, err, boom)
	_, err = c.ListDir(ctx, "", false)
	require.ErrorIs(t, err, boom)
	_, _, err = c.Watch(ctx, "a")
	require.ErrorIs(t, err, boom)

	// Input validation and Closed come first.
	_, _, err = c.Get(ctx, "a//b")
	requireCode(t, err, topo.InvalidPath)

	f.SetError(topo.ResourceExhausted)
	_, _, err = c.Get(ctx, "a")
	requireCode(t, err, topo.ResourceExhausted)
	require.ErrorAs(t, err, &te)
	require.Equal(t, "a", te.Path)

	f.SetError(nil)
	got, _, err := c.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "x", string(got))

	c.Close()
	f.SetError(boom)
	_, _, err = c.Get(ctx, "a")
	requireCode(t, err, topo.Closed)
}

func TestAddFault(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	for _, p := range []string{"ks/a/x", "ks/b/x", "other/y"} {
		_, err := c.Create(ctx, p, nil)
		require.NoError(t, err)
	}

	remove := f.AddFault(memorytopo.Fault{Op: memorytopo.OpGet, Path: "ks/*/x", Err: topo.Timeout})
	_, _, err := c.Get(ctx, "ks/a/x")
	requireCode(t, err, topo.Timeout)
	_, _, err = c.Get(ctx, "/ks/b/x")
	requireCode(t, err, topo.Timeout)
	_, _, err = c.Get(ctx, "other/y")
	require.NoError(t, err)
	_, err = c.Update(ctx, "ks/a/x", nil, nil) // other operation
	require.NoError(t, err)
	remove()
	remove() // harmless
	_, _, err = c.Get(ctx, "ks/a/x")
	require.NoError(t, err)

	// A prefix, for every operation, for two calls only.
	f.AddFault(memorytopo.Fault{Op: memorytopo.OpAny, Prefix: "ks/", Times: 2})
	_, err = c.Update(ctx, "ks/a/x", nil, nil)
	requireCode(t, err, topo.Unavailable)
	_, err = c.List(ctx, "ks/")
	requireCode(t, err, topo.Unavailable)
	_, err = c.List(ctx, "ks/")
	require.NoError(t, err)

	// Lock calls match the locked directory.
	f.AddFault(memorytopo.Fault{Op: memorytopo.OpLock, Path: "ks/a", Err: topo.NodeExists})
	_, err = c.Lock(ctx, "ks/a", "me")
	requireCode(t, err, topo.NodeExists)
	ld, err := c.Lock(ctx, "ks/b", "me")
	require.NoError(t, err)
	f.AddFault(memorytopo.Fault{Op: memorytopo.OpUnlock, Err: topo.Unavailable, Times: 1})
	requireCode(t, ld.Unlock(ctx), topo.Unavailable)
	require.NoError(t, ld.Check(ctx), "a failed Unlock keeps the lock")
	require.NoError(t, ld.Unlock(ctx))

	f.ClearFaults()
	_, err = c.Lock(ctx, "ks/a", "me")
	require.NoError(t, err)
}

func TestLatencyHonoursContext(t *testing.T) {
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	f.SetLatency(time.Hour)

	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, err := c.Create(ctx, "a", nil)
	requireCode(t, err, topo.Timeout)

	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := c.Get(ctx, "a")
		done <- err
	}()
	cancel()
	requireCode(t, <-done, topo.Interrupted)

	f.SetLatency(0)
	_, _, err = c.Get(testCtx(t), "a")
	requireCode(t, err, topo.NoNode) // the timed-out Create wrote nothing
}

func TestHang(t *testing.T) {
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	f.Hang()
	f.Hang() // idempotent

	// Ends with the context.
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, err := c.Create(ctx, "a", nil)
	requireCode(t, err, topo.Timeout)

	// Proceeds on Unhang.
	before := f.CallCount(memorytopo.OpCreate)
	done := make(chan error, 1)
	go func() {
		_, err := c.Create(testCtx(t), "a", []byte("x"))
		done <- err
	}()
	require.Eventually(t, func() bool { return f.CallCount(memorytopo.OpCreate) > before }, waitLimit, time.Millisecond)
	f.Unhang()
	require.NoError(t, <-done)

	// Ends with Close.
	f.Hang()
	go func() {
		_, _, err := c.Get(context.Background(), "a")
		done <- err
	}()
	c.Close()
	requireCode(t, <-done, topo.Closed)
	f.ClearFaults()
}

func TestCallCounters(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	_, err := c.Create(ctx, "a", nil)
	require.NoError(t, err)

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _, _ = c.Get(ctx, "a")
			}
		})
	}
	wg.Wait()
	_, _, _ = c.Get(ctx, "bad//path") // failed calls count too
	require.EqualValues(t, 801, f.CallCount(memorytopo.OpGet))
	require.EqualValues(t, 1, f.CallCount(memorytopo.OpCreate))
	require.EqualValues(t, 802, f.CallCount(memorytopo.OpAny))
	require.EqualValues(t, 0, f.CallCount(memorytopo.OpKeepAlive))
	require.Equal(t, "Get", memorytopo.OpGet.String())

	f.ResetCallCounts()
	require.EqualValues(t, 0, f.CallCount(memorytopo.OpAny))
}

// TestKeepAliveFaultLapsesLease checks that blocking lease renewal makes a
// TTL lock lapse and lets another holder in.
func TestKeepAliveFaultLapsesLease(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c1, c2 := newConn(t, f), newConn(t, f)
	_, err := c1.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	ld, err := c1.LockWithTTL(ctx, "d", "c1", 20*time.Millisecond)
	require.NoError(t, err)

	remove := f.AddFault(memorytopo.Fault{Op: memorytopo.OpKeepAlive})
	ld2, err := c2.Lock(ctx, "d", "c2") // waits until the lease lapses
	require.NoError(t, err)
	requireCode(t, ld.Check(ctx), topo.LockLost)
	requireCode(t, ld.Unlock(ctx), topo.LockLost)
	remove()
	require.NoError(t, ld2.Check(ctx))
	require.NoError(t, ld2.Unlock(ctx))
}

// TestHangLapsesSession checks that a hung server lets sessions lapse:
// leadership is lost SessionTTL after the hang.
func TestHangLapsesSession(t *testing.T) {
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: 20 * time.Millisecond})
	c := newConn(t, f)
	p, err := c.NewLeaderParticipation("e", "one")
	require.NoError(t, err)
	lctx, err := p.WaitForLeadership()
	require.NoError(t, err)
	f.Hang()
	select {
	case <-lctx.Done():
	case <-time.After(waitLimit):
		t.Fatal("leadership not lost while the server hung")
	}
	f.Unhang()
	id, err := p.GetCurrentLeaderID(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, "", id)
	// The participant can run again under a new session.
	lctx, err = p.WaitForLeadership()
	require.NoError(t, err)
	require.NoError(t, lctx.Err())
	p.Stop()
}

// TestHangEndsWithStop checks that a WaitForLeadership blocked by a hung
// server returns Interrupted when its participation is stopped.
func TestHangEndsWithStop(t *testing.T) {
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	p, err := c.NewLeaderParticipation("e", "one")
	require.NoError(t, err)
	f.Hang()
	defer f.Unhang()
	done := make(chan error, 1)
	go func() {
		_, err := p.WaitForLeadership()
		done <- err
	}()
	require.Eventually(t, func() bool { return f.CallCount(memorytopo.OpWaitForLeadership) == 1 }, waitLimit, poll)
	p.Stop()
	requireCode(t, <-done, topo.Interrupted)
}

// TestPartition: a partitioned Conn's calls block until Heal (or their
// context ends), its session lapses SessionTTL later so another Conn takes
// its lock, and at that moment its own lock already reports LockLost; other
// Conns are unaffected.
func TestPartition(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: 200 * time.Millisecond})
	c1, c2 := newConn(t, f), newConn(t, f)
	_, err := c2.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l1, err := c1.Lock(ctx, "d", "c1")
	require.NoError(t, err)

	c1.Partition()
	c1.Partition() // idempotent
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, _, err = c1.Get(short, "d/f")
	requireCode(t, err, topo.Timeout)
	_, _, err = c2.Get(ctx, "d/f")
	require.NoError(t, err, "another Conn is not partitioned")

	l2, err := c2.Lock(ctx, "d", "c2")
	require.NoError(t, err, "the lock of a partitioned Conn passes on once its session lapses")
	short2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	requireCode(t, l1.Check(short2), topo.Timeout) // still cut off: the call blocks
	got := make(chan error, 1)
	go func() { _, _, err := c1.Get(ctx, "d/f"); got <- err }()
	c1.Heal()
	require.NoError(t, <-got, "a call blocked by the partition proceeds after Heal")
	requireCode(t, l1.Check(ctx), topo.LockLost)
	requireCode(t, l1.Unlock(ctx), topo.LockLost)
	require.NoError(t, l2.Check(ctx))
	require.NoError(t, l2.Unlock(ctx))
}

// TestWriteFaultsFailTransactions: a Fault on Create, Update or Delete of
// a path fails every call that writes that path that way -- the plain
// call, topo.GuardedUpdate or topo.GuardedDelete (also through a
// middleware, which keeps memorytopo's GuardedUpdate fast path) and any
// Txn with such a write -- and nothing else: not a write of another kind
// or path, not a transaction that only checks the path.
func TestWriteFaultsFailTransactions(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	wrapped := topo.Decorate(topo.ConnInfo{Implementation: memorytopo.Name}, c, middleware.Middleware(func(topo.ConnInfo) middleware.Hooks { return middleware.Hooks{} }))
	for _, p := range []string{"d/f", "d/g"} {
		_, err := c.Create(ctx, p, []byte("0"))
		require.NoError(t, err)
	}
	lock, err := c.Lock(ctx, "d", "test")
	require.NoError(t, err)
	t.Cleanup(func() { _ = lock.Unlock(context.Background()) })
	boom := errors.New("boom")
	requireFault := func(t *testing.T, err error) {
		t.Helper()
		require.ErrorIs(t, err, boom)
		var te *topo.Error
		require.ErrorAs(t, err, &te)
		require.Equal(t, "d/f", te.Path)
	}
	unchanged := func(t *testing.T) {
		t.Helper()
		data, _, err := c.Get(ctx, "d/f")
		require.NoError(t, err)
		require.Equal(t, "0", string(data))
	}

	t.Run("update", func(t *testing.T) {
		remove := f.AddFault(memorytopo.Fault{Op: memorytopo.OpUpdate, Path: "d/f", Err: boom})
		defer remove()
		_, err := c.Update(ctx, "d/f", []byte("1"), nil)
		requireFault(t, err)
		for _, conn := range []topo.Conn{c, wrapped} {
			_, err = topo.GuardedUpdate(ctx, conn, lock, "d/f", []byte("1"), nil)
			requireFault(t, err)
			_, err = conn.Txn(ctx, topo.IfHeld(lock), topo.UpdateOp("d/f", []byte("1"), nil))
			requireFault(t, err)
			_, err = conn.Txn(ctx, topo.UpdateOp("d/g", []byte("1"), nil), topo.UpdateOp("d/f", []byte("1"), nil))
			requireFault(t, err)
		}
		unchanged(t)
		// Other paths, other kinds and mere conditions are not matched.
		_, err = topo.GuardedUpdate(ctx, c, lock, "d/g", []byte("1"), nil)
		require.NoError(t, err)
		_, v, err := c.Get(ctx, "d/f")
		require.NoError(t, err)
		_, err = c.Txn(ctx, topo.IfVersion("d/f", v), topo.IfPresent("d/f"), topo.UpdateOp("d/g", []byte("2"), nil))
		require.NoError(t, err)
		_, err = c.Txn(ctx, topo.CreateOp("d/f2", nil))
		require.NoError(t, err)
	})

	t.Run("update once", func(t *testing.T) {
		remove := f.AddFault(memorytopo.Fault{Op: memorytopo.OpUpdate, Prefix: "d/", Err: boom, Times: 1})
		defer remove()
		// One transaction consumes the fault once, whatever it matches.
		_, err := c.Txn(ctx, topo.UpdateOp("d/f", []byte("1"), nil), topo.UpdateOp("d/g", []byte("1"), nil))
		requireFault(t, err)
		_, err = topo.GuardedUpdate(ctx, c, lock, "d/g", []byte("3"), nil)
		require.NoError(t, err)
	})

	t.Run("create", func(t *testing.T) {
		remove := f.AddFault(memorytopo.Fault{Op: memorytopo.OpCreate, Path: "d/new", Err: boom})
		defer remove()
		_, err := c.Txn(ctx, topo.IfHeld(lock), topo.CreateOp("d/new", nil))
		require.ErrorIs(t, err, boom)
		_, _, err = c.Get(ctx, "d/new")
		requireCode(t, err, topo.NoNode)
		_, err = c.Txn(ctx, topo.IfAbsent("d/new"), topo.UpdateOp("d/g", nil, nil))
		require.NoError(t, err)
	})

	t.Run("delete", func(t *testing.T) {
		remove := f.AddFault(memorytopo.Fault{Op: memorytopo.OpDelete, Path: "d/f", Err: boom})
		defer remove()
		for _, conn := range []topo.Conn{c, wrapped} {
			requireFault(t, topo.GuardedDelete(ctx, conn, lock, "d/f", nil))
			_, err := conn.Txn(ctx, topo.DeleteOp("d/f", nil))
			requireFault(t, err)
		}
		unchanged(t)
		_, err := topo.GuardedUpdate(ctx, c, lock, "d/f", []byte("0"), nil)
		require.NoError(t, err)
	})

	// Transactions count as OpTxn only.
	require.Zero(t, f.CallCount(memorytopo.OpDelete))
}

// TestFaultTimesConcurrent checks that a Fault with Times fails exactly
// that many of the matching calls when they race, and no more.
func TestFaultTimesConcurrent(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	_, err := c.Create(ctx, "a", []byte("x"))
	require.NoError(t, err)
	f.AddFault(memorytopo.Fault{Op: memorytopo.OpGet, Path: "a", Times: 5})
	errs := make([]error, 40)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = c.Get(ctx, "a")
		}()
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			requireCode(t, err, topo.Unavailable)
			failed++
		}
	}
	require.Equal(t, 5, failed)
	_, _, err = c.Get(ctx, "a")
	require.NoError(t, err, "the fault is used up")
}

// TestWritesCountAsTheirOwnOperation checks that Create, Update (in place
// and not) and Delete each count once as the Operation of their name,
// refused and failed calls included, that a transaction (GuardedUpdate
// too) counts once as OpTxn whatever its writes, and a WatchRecursive as
// OpWatchRecursive only.
func TestWritesCountAsTheirOwnOperation(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	_, err := c.Create(ctx, "a", nil)
	require.NoError(t, err)
	_, err = c.Create(ctx, "a", nil)
	requireCode(t, err, topo.NodeExists)
	_, err = c.Create(ctx, "..", nil)
	requireCode(t, err, topo.InvalidPath)
	_, err = c.Update(ctx, "a", []byte("in place"), nil)
	require.NoError(t, err)
	_, err = c.Update(ctx, "b", []byte("new"), nil)
	require.NoError(t, err)
	_, err = c.Update(ctx, "a", nil, topo.NumericVersion(1000))
	requireCode(t, err, topo.BadVersion)
	require.NoError(t, c.Delete(ctx, "b", nil))
	requireCode(t, c.Delete(ctx, "b", nil), topo.NoNode)
	requireCode(t, c.Delete(ctx, "locks/x", nil), topo.InvalidPath)
	_, err = c.Txn(ctx, topo.CreateOp("c", nil), topo.UpdateOp("a", nil, nil), topo.DeleteOp("c/d", nil))
	requireTxnErr(t, err, 2, topo.TxnDelete, topo.NoNode)
	_, err = c.Txn(ctx, topo.CreateOp("c", nil), topo.UpdateOp("a", nil, nil))
	require.NoError(t, err)
	_, err = c.Create(ctx, "q/f", nil)
	require.NoError(t, err)
	lock, err := c.Lock(ctx, "q", "holder")
	require.NoError(t, err)
	_, err = topo.GuardedUpdate(ctx, c, lock, "a", nil, nil)
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	_, _, err = c.WatchRecursive(wctx, "")
	cancel()
	require.NoError(t, err)

	for op, want := range map[memorytopo.Operation]int64{
		memorytopo.OpCreate:         4,
		memorytopo.OpUpdate:         3,
		memorytopo.OpDelete:         3,
		memorytopo.OpTxn:            3,
		memorytopo.OpWatchRecursive: 1,
		memorytopo.OpGet:            0,
		memorytopo.OpLock:           1,
	} {
		require.Equal(t, want, f.CallCount(op), op.String())
	}
	require.Equal(t, int64(15), f.CallCount(memorytopo.OpAny))
}
