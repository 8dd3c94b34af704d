package cache_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/memorytopo"
)

var (
	_ cache.SyncWatcher = (*memorytopo.Conn)(nil)
	_ cache.SyncWatcher = (*lazyConn)(nil)
)

// lazyConn passes its SyncWatcher's events on only as far as a sync has
// asked for (errors that end the watch at once): a Cache over it holds
// nothing newer than its last barrier needed, so a Consistent read that
// skips its barrier, or does not wait for it, reads an old value.
type lazyConn struct {
	topo.Conn
	sw cache.SyncWatcher
}

func newLazy(t testing.TB, c topo.Conn) *lazyConn {
	sw, ok := c.(cache.SyncWatcher)
	require.True(t, ok, "%T is no cache.SyncWatcher", c)
	return &lazyConn{Conn: c, sw: sw}
}

func (l *lazyConn) WatchRecursiveSync(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, func(context.Context) (uint64, error), error) {
	init, in, sync0, err := l.sw.WatchRecursiveSync(ctx, prefix)
	if err != nil {
		return nil, nil, nil, err
	}
	// The store watch is drained at once (its sync waits for it to have
	// sent), into queue; events leave queue as far as allowed.
	var mu sync.Mutex
	var queue []*topo.WatchDataRecursive
	allowed, ended := uint64(0), false
	more := make(chan struct{}, 1)
	wake := func() {
		select {
		case more <- struct{}{}:
		default:
		}
	}
	go func() {
		for ev := range in {
			mu.Lock()
			queue = append(queue, ev)
			mu.Unlock()
			wake()
		}
		mu.Lock()
		ended = true
		mu.Unlock()
		wake()
	}()
	out := make(chan *topo.WatchDataRecursive)
	go func() {
		defer close(out)
		for sent := uint64(0); ; {
			mu.Lock()
			var ev *topo.WatchDataRecursive
			if len(queue) > 0 && (sent < allowed || ctx.Err() != nil || (queue[0].Err != nil && !topo.IsErrType(queue[0].Err, topo.NoNode))) {
				ev, queue = queue[0], queue[1:]
			}
			done := ended && len(queue) == 0 && ev == nil
			mu.Unlock()
			switch {
			case done:
				return
			case ev != nil:
				out <- ev
				sent++
				continue
			}
			select {
			case <-more:
			case <-ctx.Done():
			}
		}
	}()
	sync := func(ctx context.Context) (uint64, error) {
		n, err := sync0(ctx)
		if err == nil {
			mu.Lock()
			allowed = max(allowed, n)
			mu.Unlock()
			wake()
		}
		return n, err
	}
	return init, out, sync, nil
}

// TestConsistentBarrierLinearizable: Consistent reads answered from memory
// after the revision barrier (memorytopo, etcd) are linearizable with
// concurrent writers, with the Caches' watches delivering no further than
// the barriers asked (lazyConn).
func TestConsistentBarrierLinearizable(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		_, open := memoryStore(t)
		requireConsistentLinearizable(t, open, lazyWatch, nil)
	})
	t.Run("etcd", func(t *testing.T) {
		requireConsistentLinearizable(t, etcdOpen(t, etcdtest.Start(t), newRoot()), lazyWatch, nil)
	})
}

// TestConsistentBarrierLinearizableAcrossRestartEtcd: the same while the
// etcd member stops (barriers fail, reads go to the store and fail) and
// restarts with its data (the watch resumes and barriers pass again).
func TestConsistentBarrierLinearizableAcrossRestartEtcd(t *testing.T) {
	s := restartableEtcd(t)
	requireConsistentLinearizable(t, s.open, lazyWatch, restartFault(t, s))
}

// TestBarrierPassesWritesElsewhereEtcd: writes outside the cached prefix
// move etcd's revision past everything the Cache's watch reports; its
// barrier is then passed by an etcd progress notification, and the
// Consistent Get is answered from memory.
func TestBarrierPassesWritesElsewhereEtcd(t *testing.T) {
	ctx := testCtx(t)
	open := etcdOpen(t, etcdtest.Start(t), newRoot())
	other := open()
	defer other.Close()
	_, err := other.Create(ctx, "in/f", []byte("one"))
	require.NoError(t, err)
	c, err := cache.New(open(), "in/", cache.Options{Mode: cache.Consistent})
	require.NoError(t, err)
	defer c.Close()
	for i := range 5 {
		_, err := other.Update(ctx, "out/g", []byte{byte(i)}, nil)
		require.NoError(t, err)
		// Without a progress notification the barrier would give way
		// after a second, and the store would answer.
		requireGet(t, ctx, c, "in/f", "one", true)
	}
	_, err = other.Update(ctx, "in/f", []byte("two"), nil)
	require.NoError(t, err)
	requireGet(t, ctx, c, "in/f", "two", true)
}
