package etcd2topo

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/internal/stacks"
	"github.com/topokit/topokit/topo/claims"
)

// lateWatches counts the goroutines removeUnknown started (the retried
// removal of a put of unknown outcome, and its late-put watch) running in
// the process, and of those, the ones waiting on their watch's channel
// (past the first removal, which found nothing).
func lateWatches() (running, watching int) {
	for _, g := range stacks.All() {
		if !strings.Contains(g, "created by github.com/topokit/topokit/topo/etcd2topo.driver.removeUnknown in") {
			continue
		}
		running++
		if header, _, _ := strings.Cut(g, "\n"); strings.Contains(header, "[chan receive") {
			watching++
		}
	}
	return running, watching
}

// startLateWatch has w treat the entry name of lock directory dir on its
// first shared lease as the key of a put of unknown outcome (as put does
// when a Lock is cancelled during its request): the name is taken and
// removeUnknown removes the key and watches it for a late put. It returns
// the key and the lease.
func startLateWatch(t *testing.T, ctx context.Context, w *Conn, dir string) (string, *lease) {
	t.Helper()
	q := claims.Queue{Path: dir}
	l, err := w.sharedLease(ctx, dir, 0)
	require.NoError(t, err)
	key := w.queuePrefix(q) + strconv.FormatInt(int64(l.id), 10)
	require.True(t, w.takeKey(key))
	driver{w}.removeUnknown(q, l, key)
	return key, l
}

// TestLateWatchRemovesOnlyItsEntry: the watch of a put of unknown outcome
// deletes the late put of its key on its lease, and nothing else: not a
// put of the same key on another lease, and not a Lock the same Conn
// takes of the same directory meanwhile (which the taken name sends to
// another shared lease, and which stays held, its key intact, and is
// released by Unlock).
func TestLateWatchRemovesOnlyItsEntry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := newRoot()
	w := openConn(t, serverAddr, root)
	cli := rawClient(t, serverAddr)
	_, err := w.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	key, l := startLateWatch(t, ctx, w, "d")
	require.Eventually(t, func() bool { _, watching := lateWatches(); return watching == 1 },
		10*time.Second, time.Millisecond, "the removal found nothing: the key is watched")

	// A Lock of the same directory by the same Conn meanwhile: granted,
	// on another lease.
	lk, err := w.Lock(ctx, "d", "during the watch")
	require.NoError(t, err)
	held := entryBehind(t, lk)
	require.NotEqual(t, l.id, held.lease.id, "the Lock reused the watched entry name's lease")
	require.NotEqual(t, key, held.key)

	// A put of the key on another lease is not the late put.
	other, err := cli.Grant(ctx, 60)
	require.NoError(t, err)
	defer cli.Revoke(context.Background(), other.ID)
	_, err = cli.Put(ctx, key, "foreign", clientv3.WithLease(other.ID))
	require.NoError(t, err)
	// The late put, on the watched lease: removed.
	_, err = cli.Put(ctx, key, "late", clientv3.WithLease(l.id))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		resp, err := cli.Get(ctx, key)
		return err == nil && len(resp.Kvs) == 0
	}, 20*time.Second, 10*time.Millisecond, "the late put was not removed")

	// The Lock taken meanwhile is untouched.
	require.NoError(t, lk.Check(ctx))
	resp, err := cli.Get(ctx, held.key)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "the Lock's entry was deleted")
	require.EqualValues(t, held.lease.id, resp.Kvs[0].Lease)
	require.NoError(t, lk.Unlock(ctx))
	resp, err = cli.Get(ctx, root+"/d/locks/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Zero(t, resp.Count, "entries left after Unlock")
	// Once the watch is over, the name is free again.
	require.Eventually(t, func() bool {
		if !w.takeKey(key) {
			return false
		}
		w.freeKey(key)
		return true
	}, 20*time.Second, 10*time.Millisecond, "the name stays taken after the watch")
}

// TestLateWatchEndsOnClose: Close ends the removal and late-put watch of
// a put of unknown outcome at once (no goroutine outlives the Conn), and a
// late put that comes after goes with the lease Close revokes.
func TestLateWatchEndsOnClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := newRoot()
	w, err := NewConn(testOptions(serverAddr), root)
	require.NoError(t, err)
	defer w.Close()
	cli := rawClient(t, serverAddr)
	_, err = w.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	before, _ := lateWatches()
	key, l := startLateWatch(t, ctx, w, "d")
	require.Eventually(t, func() bool { _, watching := lateWatches(); return watching == 1 },
		10*time.Second, time.Millisecond, "the removal found nothing: the key is watched")
	w.Close()
	require.Eventually(t, func() bool { running, _ := lateWatches(); return running == before }, 10*time.Second, 10*time.Millisecond,
		"the late-put watch outlived Close")
	_, err = cli.Put(ctx, key, "late", clientv3.WithLease(l.id))
	require.Error(t, err, "a put on the lease after Close: Close revokes it")
}

// TestLatePutFoundByLock: a Lock whose put finds its entry name already
// put on its own lease (a late put of an earlier attempt of this Conn,
// applied after every removal) deletes that entry and puts its own: it is
// granted, and its entry is the only one in the queue. The transaction's
// failure read of the name includes the value because the entry is known
// by its lease, which etcd 3.7 leaves out of keys-only reads: read
// keys-only there, the stale entry would head the queue and the Lock
// would wait on it for as long as the Conn lives. Run against etcd 3.7
// (TOPOKIT_ETCDTEST_SERVER=v3.7.3) to see the difference.
func TestLatePutFoundByLock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := newRoot()
	c := openConn(t, serverAddr, root)
	cli := rawClient(t, serverAddr)
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	first, err := c.Lock(ctx, "d", "first")
	require.NoError(t, err)
	was := entryBehind(t, first)
	require.False(t, was.own, "the Lock is on a shared lease")
	require.NoError(t, first.Unlock(ctx))

	// The late put: the entry name again, on the same shared lease.
	_, err = cli.Put(ctx, was.key, "late", clientv3.WithLease(was.lease.id))
	require.NoError(t, err)

	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	defer lcancel()
	ld, err := c.Lock(lctx, "d", "second")
	require.NoError(t, err, "the Lock waited on its own late put")
	now := entryBehind(t, ld)
	require.Equal(t, was.key, now.key, "the Lock took its entry name back")
	resp, err := cli.Get(ctx, root+"/d/locks/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "entries in the queue")
	require.Equal(t, "second", string(resp.Kvs[0].Value))
	require.EqualValues(t, was.lease.id, resp.Kvs[0].Lease)
	require.NoError(t, ld.Unlock(ctx))
}
