package zk2topo

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// TestEnsembleLeaderLoss kills the ZooKeeper leader while a client keeps
// updating a file, another holds a lock and a third watches the file:
// once the two remaining nodes form a quorum, updates succeed again, the
// lock is still held (sessions survive a leader change) and the watch
// delivers the latest value.
func TestEnsembleLeaderLoss(t *testing.T) {
	e := zktest.StartEnsemble(t, 3)
	leader := e.WaitLeader(time.Minute)
	root := freshRoot(t)
	open := func() *Conn {
		c, err := NewConn(Options{Servers: e.Addrs(), SessionTimeout: 20 * time.Second}, root)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	writer, holder, watcher := open(), open(), open()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	_, err := writer.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	lock, err := holder.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	// ZooKeeper guarantees read-your-writes per session only: the
	// watcher's server may apply the create a moment later.
	var changes <-chan *topo.WatchData
	require.Eventually(t, func() bool {
		_, changes, err = watcher.Watch(ctx, "d/f")
		return err == nil
	}, time.Minute, 10*time.Millisecond)
	var lastSeen atomic.Value
	watchDone := make(chan error, 1)
	go func() {
		for wd := range changes {
			if wd.Err != nil {
				watchDone <- wd.Err
				for range changes {
				}
				return
			}
			lastSeen.Store(string(wd.Contents))
		}
		watchDone <- nil
	}()

	// The writer updates in a loop, retrying failures, until stopped.
	var ok, failed atomic.Int64
	var lastWritten atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprint(i)
			uctx, ucancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := writer.Update(uctx, "d/f", []byte(v), nil)
			ucancel()
			if err != nil {
				failed.Add(1)
				assert.Truef(t, topo.IsErrType(err, topo.Unavailable) || topo.IsErrType(err, topo.Timeout),
					"an update during the failover failed with %v", err)
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				continue
			}
			ok.Add(1)
			lastWritten.Store(v)
		}
	})
	require.Eventually(t, func() bool { return ok.Load() >= 5 }, time.Minute, 10*time.Millisecond)

	e.Kill(leader)
	newLeader := e.WaitLeader(2 * time.Minute)
	require.NotEqual(t, leader, newLeader)
	before := ok.Load()
	require.Eventually(t, func() bool { return ok.Load() >= before+20 }, 2*time.Minute, 10*time.Millisecond,
		"updates did not resume after the new quorum formed")
	close(stop)
	wg.Wait()
	t.Logf("updates: %d succeeded, %d failed during the failover", ok.Load(), failed.Load())

	// The lock survived the leader change: still held, still exclusive.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, lock.Check(ctx), "the holder's Check after the failover")
	}, time.Minute, 10*time.Millisecond)
	_, err = open().TryLock(ctx, "d", "other")
	require.ErrorIs(t, err, topo.NodeExists)

	// The watch is still open and converges on the last value written.
	want := lastWritten.Load().(string)
	require.Eventually(t, func() bool { v, _ := lastSeen.Load().(string); return v == want }, time.Minute, 10*time.Millisecond)
	select {
	case err := <-watchDone:
		t.Fatalf("the watch ended during the failover: %v", err)
	default:
	}
	require.NoError(t, lock.Unlock(ctx))
	cancel()
	require.ErrorIs(t, <-watchDone, topo.Interrupted)
}
