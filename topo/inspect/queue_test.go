package inspect_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/inspect"
	"github.com/topokit/topokit/topo/memorytopo"
)

// queueStore says what a backend shows of its queues.
type queueStore struct {
	// sessions: entries carry the store's session name.
	sessions bool
	// waiterContents: a waiting entry carries its description or id
	// (Consul's fair-queue entries carry none).
	waiterContents bool
	// since: entries carry their creation time (ZooKeeper's ctime).
	since bool
	// ttl: the holder's remaining session TTL is shown (etcd's lease).
	ttl bool
	// nested: Elections finds nested election names (zk2topo's ListDir
	// shows nothing below elections/<name>, so they are not found there).
	nested bool
}

// checkQueues holds a lock on ks with two clients queued behind it, and
// runs an election with three candidates, each on a client of its own
// (open), and checks that another client sees the holder, its token and
// the waiters in order, and the candidates in order with the leader first.
// ks must hold a file.
func checkQueues(t *testing.T, open func() topo.Conn, qs queueStore) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	other := open()
	holder := open()
	ld, err := holder.Lock(ctx, "ks", "holder")
	require.NoError(t, err)
	for i, name := range []string{"waiter 1", "waiter 2"} {
		w := open()
		go func() {
			if ld, err := w.Lock(ctx, "ks", name); err == nil {
				_ = ld.Unlock(context.WithoutCancel(ctx))
			}
		}()
		require.Eventually(t, func() bool {
			l, err := inspect.LockOf(ctx, other, "ks")
			return err == nil && len(l.Waiters) == i+1
		}, time.Minute, 5*time.Millisecond, "%s queues", name)
	}
	l, err := inspect.LockOf(ctx, other, "/ks/")
	require.NoError(t, err)
	assert.Equal(t, "ks", l.Dir)
	assert.Equal(t, "holder", l.Holder)
	assert.Equal(t, ld.Token(), l.Token, "the holder's fencing token")
	require.Len(t, l.Waiters, 2)
	assert.Less(t, l.Waiters[0].Token, l.Waiters[1].Token, "waiters in queue order")
	if qs.waiterContents {
		assert.Equal(t, "waiter 1", l.Waiters[0].Contents)
		assert.Equal(t, "waiter 2", l.Waiters[1].Contents)
	}
	if qs.sessions {
		assert.NotEmpty(t, l.Session)
		assert.NotEmpty(t, l.Waiters[0].Session)
	}
	assert.Equal(t, qs.since, !l.Since.IsZero(), "the holder's creation time: %v", l.Since)
	assert.Equal(t, qs.ttl, l.TTL > 0, "the holder's remaining TTL: %v", l.TTL)
	if qs.since {
		assert.False(t, l.Waiters[1].Since.Before(l.Since), "a waiter came after the holder")
	}
	locks, err := inspect.Locks(ctx, other, "")
	require.NoError(t, err)
	require.Len(t, locks, 1)
	assert.Equal(t, qs.ttl, locks[0].TTL > 0)
	locks[0].TTL = l.TTL // a lease's TTL moves between two reads
	assert.Equal(t, []inspect.Lock{l}, locks)
	require.NoError(t, ld.Unlock(ctx))

	ids := []string{"candidate-1", "candidate-2", "candidate-3"}
	for i, id := range ids {
		lp, err := open().NewLeaderParticipation("queued", id)
		require.NoError(t, err)
		t.Cleanup(lp.Stop)
		if i == 0 {
			_, err := lp.WaitForLeadership()
			require.NoError(t, err)
			continue
		}
		go func() { _, _ = lp.WaitForLeadership() }()
		require.Eventually(t, func() bool {
			e, err := election(ctx, other, "queued")
			return err == nil && len(e.Candidates) == i+1
		}, time.Minute, 5*time.Millisecond, "%s joins", id)
	}
	e, err := election(ctx, other, "queued")
	require.NoError(t, err)
	assert.Equal(t, "candidate-1", e.Leader.ID)
	require.Len(t, e.Candidates, 3)
	assert.Equal(t, "candidate-1", e.Candidates[0].Contents, "the leader first")
	assert.Equal(t, e.Leader.Token, e.Candidates[0].Token)
	assert.Less(t, e.Candidates[1].Token, e.Candidates[2].Token, "candidates in queue order")
	if qs.waiterContents {
		assert.Equal(t, ids[1:], []string{e.Candidates[1].Contents, e.Candidates[2].Contents})
	}
}

// election returns the election name as Elections lists it (zero when it
// does not).
func election(ctx context.Context, conn topo.Conn, name string) (inspect.Election, error) {
	es, err := inspect.Elections(ctx, conn)
	for _, e := range es {
		if e.Name == name {
			return e, nil
		}
	}
	return inspect.Election{}, err
}

// On memorytopo, a held lock shows its token and two waiters in order,
// and an election its three candidates with the leader first.
func TestQueuesMemory(t *testing.T) {
	f := memorytopo.NewFactory()
	open := func() topo.Conn {
		c, err := f.NewConn("", "/r")
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	_, err := open().Create(t.Context(), "ks/f", []byte("x"))
	require.NoError(t, err)
	checkQueues(t, open, queueStore{waiterContents: true})
}
