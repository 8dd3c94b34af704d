package memorytopo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

func TestLockLayout(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	_, err := c.Create(ctx, "ks/shard", []byte("x"))
	require.NoError(t, err)
	ld, err := c.Lock(ctx, "ks", "holder description")
	require.NoError(t, err)

	entries, err := c.ListDir(ctx, "ks", true)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{
		{Name: "locks", Type: topo.TypeDirectory, Ephemeral: true},
		{Name: "shard", Type: topo.TypeFile},
	}, entries)
	locks, err := c.ListDir(ctx, "ks/locks", true)
	require.NoError(t, err)
	require.Len(t, locks, 1)
	require.True(t, locks[0].Ephemeral)
	got, _, err := c.Get(ctx, "ks/locks/"+locks[0].Name)
	require.NoError(t, err)
	require.Equal(t, "holder description", string(got))

	kvs, err := c.List(ctx, "ks")
	require.NoError(t, err)
	require.Len(t, kvs, 1, "List leaves lock entries out")

	// The entry is at a reserved path: Delete refuses it and the lock
	// holds. The store dropping the session breaks it.
	requireCode(t, c.Delete(ctx, "ks/locks/"+locks[0].Name, nil), topo.InvalidPath)
	require.NoError(t, ld.Check(ctx))
	c.ExpireSession()
	requireCode(t, ld.Check(ctx), topo.LockLost)
	requireCode(t, ld.Unlock(ctx), topo.LockLost)
	requireCode(t, ld.Unlock(ctx), topo.Interrupted)
	_, err = c.ListDir(ctx, "ks/locks", false)
	requireCode(t, err, topo.NoNode)
}

func TestTryLockFailsFast(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c1, c2 := newConn(t, f), newConn(t, f)
	_, err := c1.Create(ctx, "d/f", nil)
	require.NoError(t, err)

	ld, err := c1.Lock(ctx, "d", "c1")
	require.NoError(t, err)
	// A waiter queues behind the holder.
	waitCtx, cancelWait := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() {
		_, err := c2.Lock(waitCtx, "d", "waiter")
		waited <- err
	}()
	_, err = c2.TryLock(ctx, "d", "c2")
	requireCode(t, err, topo.NodeExists)
	cancelWait()
	requireCode(t, <-waited, topo.Interrupted)

	require.NoError(t, ld.Unlock(ctx))
	ld2, err := c2.TryLock(ctx, "d", "c2")
	require.NoError(t, err)
	require.NoError(t, ld2.Unlock(ctx))

	_, err = c2.TryLock(ctx, "nofiles", "c2")
	requireCode(t, err, topo.NoNode)
}

// TestPauseKeepAliveLapsesTTLLock checks LockWithTTL's lapse: once its
// holder stops renewing, another holder gets the lock ttl later.
func TestPauseKeepAliveLapsesTTLLock(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c1, c2 := newConn(t, f), newConn(t, f)
	_, err := c1.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	ld1, err := c1.LockWithTTL(ctx, "d", "c1", 20*time.Millisecond)
	require.NoError(t, err)

	c1.PauseKeepAlive()
	ld2, err := c2.LockWithTTL(ctx, "d", "c2", time.Hour) // waits for the lapse
	require.NoError(t, err)
	requireCode(t, ld1.Check(ctx), topo.LockLost)
	require.NoError(t, ld2.Check(ctx))

	// c1 keeps working, and locks again once renewal resumes.
	_, err = c1.Create(ctx, "e/f", nil)
	require.NoError(t, err)
	c1.ResumeKeepAlive()
	ld3, err := c1.LockWithTTL(ctx, "e", "c1", 20*time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, ld3.Check(ctx))
	require.NoError(t, ld3.Unlock(ctx))
	require.NoError(t, ld2.Unlock(ctx))
}

func TestLockWithTTLInvalid(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	_, err := c.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	_, err = c.LockWithTTL(ctx, "d", "x", 0)
	requireCode(t, err, topo.InvalidArgument)
	_, err = c.LockWithTTL(ctx, "d", "x", -time.Second)
	requireCode(t, err, topo.InvalidArgument)
}

func TestExpireSessionLock(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c1, c2 := newConn(t, f), newConn(t, f)
	_, err := c1.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	held, err := c1.Lock(ctx, "d", "c1")
	require.NoError(t, err)
	named, err := c1.LockName(ctx, "name/less", "c1")
	require.NoError(t, err)
	_, err = c1.Create(ctx, "t/f", nil)
	require.NoError(t, err)
	ttl, err := c1.LockWithTTL(ctx, "t", "c1", time.Hour)
	require.NoError(t, err)

	got := make(chan topo.LockDescriptor, 1)
	go func() {
		ld, err := c2.Lock(ctx, "d", "c2")
		if err != nil {
			got <- nil
			return
		}
		got <- ld
	}()

	c1.ExpireSession()
	ld2 := <-got
	require.NotNil(t, ld2, "c2 gets the lock after c1's session is lost")
	for _, ld := range []topo.LockDescriptor{held, named, ttl} {
		requireCode(t, ld.Check(ctx), topo.LockLost)
	}

	// c1 keeps working, with a new session.
	_, err = c1.Create(ctx, "d/g", nil)
	require.NoError(t, err)
	_, err = c1.TryLock(ctx, "d", "c1 again")
	requireCode(t, err, topo.NodeExists)
	require.NoError(t, ld2.Unlock(ctx))
	again, err := c1.TryLock(ctx, "d", "c1 again")
	require.NoError(t, err)
	require.NoError(t, again.Check(ctx))
	require.NoError(t, again.Unlock(ctx))
	requireCode(t, held.Unlock(ctx), topo.LockLost)
}

func TestCloseReleasesLocks(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c1, c2 := newConn(t, f), newConn(t, f)
	_, err := c1.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	ld, err := c1.Lock(ctx, "d", "c1")
	require.NoError(t, err)
	c1.Close()
	requireCode(t, ld.Check(ctx), topo.Closed)
	requireCode(t, ld.Unlock(ctx), topo.Closed)
	ld2, err := c2.TryLock(ctx, "d", "c2")
	require.NoError(t, err)
	require.NoError(t, ld2.Unlock(ctx))
}

// TestLockFollowsDirectory locks a directory again after its files went
// and came back: each Lock sees the files below the directory as they
// are, not as an earlier Lock found them (the queue remembers the
// directory's node only while it is in the tree).
func TestLockFollowsDirectory(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	lockUnlock := func() error {
		ld, err := c.Lock(ctx, "d", "holder")
		if err != nil {
			return err
		}
		return ld.Unlock(ctx)
	}
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	require.NoError(t, lockUnlock())
	require.NoError(t, c.Delete(ctx, "d/f", nil))
	requireCode(t, lockUnlock(), topo.NoNode)
	_, err = c.Create(ctx, "d/g", []byte("x"))
	require.NoError(t, err)
	require.NoError(t, lockUnlock())
	require.NoError(t, c.Delete(ctx, "d/g", nil))
	_, err = c.Create(ctx, "d", []byte("a file now"))
	require.NoError(t, err)
	requireCode(t, lockUnlock(), topo.InvalidArgument)
	_, err = c.Create(ctx, "d/h", []byte("x"))
	require.NoError(t, err)
	require.NoError(t, lockUnlock())
}
