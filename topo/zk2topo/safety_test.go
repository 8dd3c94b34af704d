package zk2topo

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// proxies is a set of faultproxies in front of the shared test server,
// one per server address of a Conn, partitioned and healed together.
type proxies []*faultproxy.Proxy

func (ps proxies) Blackhole() {
	for _, p := range ps {
		p.Blackhole()
	}
}

// Reset closes every connection through the proxies.
func (ps proxies) Reset() {
	for _, p := range ps {
		p.Reset()
	}
}

func (ps proxies) Heal() {
	for _, p := range ps {
		p.Heal()
	}
}

// proxiedConn opens a Conn to the shared test server through three
// faultproxies (three server addresses, as for an ensemble: the client
// library then moves to the next address after a failure without
// flushing its queued requests), all closed when t ends.
func proxiedConn(t *testing.T, root string) (*Conn, proxies) {
	t.Helper()
	return proxiedConnOpts(t, root, Options{SessionTimeout: testSessionTimeout})
}

// proxiedConnOpts is proxiedConn with opts (Servers is replaced).
func proxiedConnOpts(t *testing.T, root string, opts Options) (*Conn, proxies) {
	t.Helper()
	var ps proxies
	var addrs []string
	for range 3 {
		p, err := faultproxy.New(testServer)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		ps = append(ps, p)
		addrs = append(addrs, p.Addr())
	}
	opts.Servers = addrs
	c, err := NewConn(opts, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, ps
}

// rawConn opens a plain client on the shared test server.
func rawConn(t *testing.T) *zk.Conn {
	t.Helper()
	raw, _, err := zk.Connect([]string{testServer}, testSessionTimeout, zk.WithLogInfo(false))
	require.NoError(t, err)
	t.Cleanup(raw.Close)
	return raw
}

// waitNoChildren polls until the znode zp is absent or has no children (a
// session that held an entry there expired on the server).
func waitNoChildren(t *testing.T, raw *zk.Conn, zp string) {
	t.Helper()
	require.Eventually(t, func() bool {
		ch, _, err := raw.Children(zp)
		return err == zk.ErrNoNode || (err == nil && len(ch) == 0)
	}, 2*time.Minute, 20*time.Millisecond, "the partitioned session did not expire on the server")
}

// queuedRequests returns how many requests wait in the client library's
// send queue (unexported: read by reflection).
func queuedRequests(zc *zk.Conn) int {
	return reflect.ValueOf(zc).Elem().FieldByName("sendChan").Len()
}

// waitQueuedOr waits until zc has a queued request or done is closed.
func waitQueuedOr(t *testing.T, zc *zk.Conn, done <-chan struct{}) {
	t.Helper()
	require.Eventually(t, func() bool {
		select {
		case <-done:
			return true
		default:
		}
		return queuedRequests(zc) > 0
	}, time.Minute, time.Millisecond)
}

// TestStaleUnlockAfterExpiry: A holds d, is cut off
// until its session expires, d is emptied and re-created, C locks d (same
// entry name, as the sequence restarts with the new locks znode). A's
// Unlock, issued before A noticed the expiry, must return LockLost and
// leave C's lock alone; D's TryLock must fail.
func TestStaleUnlockAfterExpiry(t *testing.T) {
	root := freshRoot(t)
	a, proxy := proxiedConn(t, root)
	staleUnlock(t, root, a, proxy, func(raw *zk.Conn) {
		proxy.Blackhole()
		waitNoChildren(t, raw, root+"/d/locks")
	})
}

// TestStaleUnlockAfterForcedExpiry is TestStaleUnlockAfterExpiry with the
// session expired by the server long before the Conn's safety deadline
// (taken over and closed while the Conn is cut off), so that A's Unlock
// waits in the client library's queue when A learns of the expiry: it
// must never be sent on the session that replaces it.
func TestStaleUnlockAfterForcedExpiry(t *testing.T) {
	root := freshRoot(t)
	a, proxy := proxiedConnOpts(t, root, Options{SessionTimeout: testSessionTimeout, SafetyMargin: time.Nanosecond})
	staleUnlock(t, root, a, proxy, func(raw *zk.Conn) {
		s := a.cur
		id, pw := sessionPassword(t, s.zk)
		proxy.Blackhole()
		taken, err := zktest.TakeOverSession(testServer, id, pw)
		require.NoError(t, err)
		require.NoError(t, taken.Close())
		waitNoChildren(t, raw, root+"/d/locks")
		// A notices the silence and waits to reconnect: requests issued now
		// stay in the library's queue.
		require.Eventually(t, func() bool { return !s.connected.Load() }, time.Minute, time.Millisecond)
	})
}

// staleUnlock runs TestStaleUnlockAfterExpiry's sequence; expire cuts A off and
// returns once the server deleted A's entry.
func staleUnlock(t *testing.T, root string, a *Conn, proxy proxies, expire func(raw *zk.Conn)) {
	cConn := openConn(t, []string{testServer}, root)
	dConn := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	_, err := a.Create(ctx, "d/f", []byte("1"))
	require.NoError(t, err)
	la, err := a.Lock(ctx, "d", "A")
	require.NoError(t, err)
	entryA := entryNode(la)

	expire(raw)

	require.NoError(t, cConn.Delete(ctx, "d/f", nil))
	_, err = cConn.Create(ctx, "d/f", []byte("2"))
	require.NoError(t, err)
	lc, err := cConn.Lock(ctx, "d", "C")
	require.NoError(t, err)
	require.Equal(t, entryA, entryNode(lc), "the test needs C's entry to have A's old name")

	unlocked := make(chan error, 1)
	done := make(chan struct{})
	zc := a.zkConn()
	go func() {
		unlocked <- la.Unlock(ctx)
		close(done)
	}()
	waitQueuedOr(t, zc, done)
	proxy.Heal()
	require.ErrorIs(t, <-unlocked, topo.LockLost)

	// A's Conn works again, on a new session: a read through it proves its
	// old requests are settled.
	_, _, err = a.Get(ctx, "d/f")
	require.NoError(t, err)
	require.NoError(t, lc.Check(ctx), "C must still hold the lock")
	_, err = dConn.TryLock(ctx, "d", "D")
	require.ErrorIs(t, err, topo.NodeExists, "C holds the lock")
	require.NoError(t, lc.Unlock(ctx))
}

// TestLockDuringUnnoticedExpiry: a Lock started while
// the Conn's session has expired unnoticed must not leave an entry that
// blocks d once it returns an error.
func TestLockDuringUnnoticedExpiry(t *testing.T) {
	root := freshRoot(t)
	a, proxy := proxiedConn(t, root)
	lockDuringExpiry(t, root, a, func(raw *zk.Conn) {
		proxy.Blackhole()
		waitNoChildren(t, raw, root+"/x/locks")
	}, proxy.Heal)
}

// TestLockDuringForcedExpiry is TestLockDuringUnnoticedExpiry with the
// session expired by the server long before the Conn's safety deadline, so
// that A's create waits in the client library's queue when A learns of the
// expiry: it must never be sent on the session that replaces it.
func TestLockDuringForcedExpiry(t *testing.T) {
	root := freshRoot(t)
	a, proxy := proxiedConnOpts(t, root, Options{SessionTimeout: testSessionTimeout, SafetyMargin: time.Nanosecond})
	lockDuringExpiry(t, root, a, func(raw *zk.Conn) {
		s := a.cur
		id, pw := sessionPassword(t, s.zk)
		proxy.Blackhole()
		taken, err := zktest.TakeOverSession(testServer, id, pw)
		require.NoError(t, err)
		require.NoError(t, taken.Close())
		waitNoChildren(t, raw, root+"/x/locks")
		require.Eventually(t, func() bool { return !s.connected.Load() }, time.Minute, time.Millisecond)
	}, proxy.Heal)
}

// lockDuringExpiry runs TestLockDuringUnnoticedExpiry's sequence; expire cuts A off
// and returns once the server deleted A's entries, heal reconnects it.
func lockDuringExpiry(t *testing.T, root string, a *Conn, expire func(raw *zk.Conn), heal func()) {
	b := openConn(t, []string{testServer}, root)
	dConn := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	_, err := a.Create(ctx, "d/f", []byte("1"))
	require.NoError(t, err)
	_, err = a.Create(ctx, "x/f", []byte("1"))
	require.NoError(t, err)
	_, err = a.Lock(ctx, "x", "A marker") // shows when A's session expired
	require.NoError(t, err)
	lb, err := b.Lock(ctx, "d", "B")
	require.NoError(t, err)

	expire(raw)

	type res struct {
		l   topo.LockDescriptor
		err error
	}
	locked := make(chan res, 1)
	done := make(chan struct{})
	zc := a.zkConn()
	lctx, lcancel := context.WithTimeout(ctx, time.Minute)
	defer lcancel()
	go func() {
		l, err := a.Lock(lctx, "d", "A")
		locked <- res{l, err}
		close(done)
	}()
	waitQueuedOr(t, zc, done)
	heal()

	// Whatever A's Lock does, once B lets go either A holds d for real
	// (its Check passes) or d is free.
	require.NoError(t, lb.Unlock(ctx))
	r := <-locked
	if r.err == nil {
		require.NoError(t, r.l.Check(ctx), "A's Lock returned a lock it does not hold")
		require.NoError(t, r.l.Unlock(ctx))
	}
	l, err := dConn.TryLock(ctx, "d", "D")
	require.NoError(t, err, "an orphaned entry blocks d (A's Lock returned %v)", r.err)
	require.NoError(t, l.Unlock(ctx))
}

// TestDeleteKeepsParentFileData: deleting a file below a path that is
// also a file keeps that file's data.
func TestDeleteKeepsParentFileData(t *testing.T) {
	root := freshRoot(t)
	a := openConn(t, []string{testServer}, root)
	b := openConn(t, []string{testServer}, root)
	ctx := t.Context()
	_, err := a.Create(ctx, "p/f1", []byte("1"))
	require.NoError(t, err)
	_, err = a.Create(ctx, "p/f2", []byte("2"))
	require.NoError(t, err)
	require.NoError(t, a.Delete(ctx, "p/f1", nil))
	require.NoError(t, b.Delete(ctx, "p/f2", nil))
	_, err = b.Create(ctx, "p", []byte("file p"))
	require.NoError(t, err)
	_, err = b.Update(ctx, "p", []byte("file p, updated"), nil)
	require.NoError(t, err)
	_, err = b.Create(ctx, "p/g1", []byte("g"))
	require.NoError(t, err)
	require.NoError(t, a.Delete(ctx, "p/g1", nil))
	got, _, err := b.Get(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, "file p, updated", string(got))
}

// TestCASUpdateOnDirectory: a compare-and-set Update of
// a path that is only a directory returns NoNode and changes nothing.
func TestCASUpdateOnDirectory(t *testing.T) {
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	ctx := t.Context()
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	_, before, err := raw.Get(root + "/d")
	require.NoError(t, err)
	for _, v := range []int64{0, 1, 7} {
		_, err = c.Update(ctx, "d", []byte("now a file"), topo.NumericVersion(v))
		require.ErrorIs(t, err, topo.NoNode, "version %d", v)
	}
	data, after, err := raw.Get(root + "/d")
	require.NoError(t, err)
	require.Empty(t, data)
	require.Equal(t, before.Version, after.Version, "the directory znode was written")
	_, _, err = c.Get(ctx, "d")
	require.ErrorIs(t, err, topo.NoNode)
}

// TestDeleteOfFileWithChildrenKeepsConcurrentUpdate: a versioned Delete of
// a file with files below it (which ZooKeeper refuses for the children,
// so the file is emptied instead) whose file another client updates
// between the refused delete and the emptying fails with BadVersion and
// leaves the update: the emptying is checked against the caller's
// version, not the one read after the update.
func TestDeleteOfFileWithChildrenKeepsConcurrentUpdate(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	var oc opCounter
	c := openCounted(t, &oc, root)
	raw := rawConn(t)
	v0, err := c.Create(ctx, "f", []byte("v0"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "f/c", []byte("child"))
	require.NoError(t, err)
	const opcodeDelete = 2
	var deleted, updated atomic.Bool // set on the client's send goroutine
	oc.setBefore(func(op int32) {
		switch {
		case op == opcodeDelete:
			deleted.Store(true)
		case (op == opcodeExists || op == opcodeGetChildren2) && deleted.Load() && updated.CompareAndSwap(false, true):
			_, err := raw.Set(root+"/f", []byte("meanwhile"), -1)
			assert.NoError(t, err) // on the client's send goroutine
		}
	})
	err = c.Delete(ctx, "f", v0)
	oc.setBefore(nil)
	require.True(t, updated.Load(), "the file was updated between the delete and the emptying")
	require.ErrorIs(t, err, topo.BadVersion)
	data, v, err := c.Get(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "meanwhile", string(data))
	require.Equal(t, topo.NumericVersion(1).String(), v.String())
	data, _, err = c.Get(ctx, "f/c")
	require.NoError(t, err)
	require.Equal(t, "child", string(data))
}
