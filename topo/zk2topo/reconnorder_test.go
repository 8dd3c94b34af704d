package zk2topo

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestQueuedRequestsAfterCredentials queues requests on znodes only the
// session's credentials may read and write (Options.Auth, ACL
// zk.AuthACL) while its connection is cut: a read, an update and an update
// guarded by a lock the session holds. Nothing orders them after the
// request re-setting the watches any more; the client library re-sends
// the credentials, and awaits their answer, before it writes anything
// queued (its send goroutine runs resendZkAuth first), so none is
// answered NoAuth, the guarded update is applied (the lock survived), and
// the watch reports both updates' outcome.
func TestQueuedRequestsAfterCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := freshRoot(t)
	c, ps := proxiedConnOpts(t, root, Options{SessionTimeout: testSessionTimeout, Auth: "digest:alice:secret", ACL: zk.AuthACL(zk.PermAll)})
	_, err := c.Create(ctx, "f", []byte("v0"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "d/g", []byte("g0"))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "held across the reconnection")
	require.NoError(t, err)
	// Without the credentials the file cannot be read: a request sent
	// before them would be answered NoAuth.
	anon := rawConn(t)
	_, _, err = anon.Get(c.zkPath("f"))
	require.ErrorIs(t, err, zk.ErrNoAuth)
	s, changes := watchSet(ctx, t, c, "f")

	ps.Blackhole()
	ps.Reset()
	require.Eventually(t, func() bool { return !s.connected.Load() }, 30*time.Second, 5*time.Millisecond, "the session never saw the connection drop")
	// The opcodes of the requests written from now on.
	var mu sync.Mutex
	var ops []int32
	hook := func(b []byte) {
		if xid, op := reqHeader(b); xid > 0 {
			mu.Lock()
			ops = append(ops, op)
			mu.Unlock()
		}
	}
	s.obs.writeHook.Store(&hook)
	defer s.obs.writeHook.Store(nil)
	queue := libraryField(s.zk, "sendChan")
	errs := make(chan error, 3)
	go func() {
		_, _, err := c.Get(ctx, "f")
		errs <- err
	}()
	go func() {
		_, err := c.Update(ctx, "f", []byte("v1"), nil)
		errs <- err
	}()
	require.Eventually(t, func() bool { return queue.Len() >= 2 }, 30*time.Second, time.Millisecond, "the requests never waited for the connection")
	go func() {
		_, err := topo.GuardedUpdate(ctx, c, l, "d/g", []byte("g1"), nil)
		errs <- err
	}()
	require.Eventually(t, func() bool { return queue.Len() >= 3 }, 30*time.Second, time.Millisecond, "the guarded update never waited for the connection")
	ps.Heal()
	for range cap(errs) {
		require.NoError(t, <-errs)
	}
	mu.Lock()
	require.NotEmpty(t, ops)
	require.Equal(t, int32(opSetAuthTest), ops[0], "the first request on the new connection (opcodes %v)", ops)
	mu.Unlock()
	waitWatched(t, changes, "v1")
	got, _, err := c.Get(ctx, "d/g")
	require.NoError(t, err)
	require.Equal(t, "g1", string(got))
	require.NoError(t, l.Check(ctx), "the session was lost")
	require.NoError(t, l.Unlock(ctx))
}

// opSetAuthTest is ZooKeeper's opcode of the request sending
// credentials.
const opSetAuthTest = 100

// opGetDataTest is ZooKeeper's opcode of a data read.
const opGetDataTest = 4

// TestSetWatchesInSeveralFrames cuts the connection of a session watching
// more files than one set-watches request holds (the client library
// splits them at 128 KiB of paths and sends the parts one after the
// other, each once the one before is answered), while files change and
// requests wait: the requests waiting are answered between the parts,
// and every part still carries the zxid the session had when the
// connection was made, so every change made while disconnected is
// reported, once, and every watch is re-set (a later change of each file
// is reported too).
func TestSetWatchesInSeveralFrames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := freshRoot(t)
	c, ps := proxiedConn(t, root)
	other := openConn(t, []string{testServer}, root)
	const files = 60
	long := strings.Repeat("x", 3000) // 60 paths of 3 KB: two parts or more
	name := func(i int) string { return fmt.Sprintf("%s%02d", long, i) }
	watches := make([]<-chan *topo.WatchData, files)
	for i := range files {
		_, err := c.Create(ctx, name(i), []byte("v0"))
		require.NoError(t, err)
		_, watches[i], err = c.Watch(ctx, name(i))
		require.NoError(t, err)
	}
	s, err := c.session("")
	require.NoError(t, err)
	var parts atomic.Int32
	hook := func(b []byte) {
		if _, op := reqHeader(b); op == opSetWatches {
			parts.Add(1)
		}
	}
	s.obs.writeHook.Store(&hook)
	defer s.obs.writeHook.Store(nil)

	ps.Blackhole()
	ps.Reset()
	require.Eventually(t, func() bool { return !s.connected.Load() }, 30*time.Second, 5*time.Millisecond, "the session never saw the connection drop")
	for i := 0; i < files; i += 2 {
		_, err := other.Update(ctx, name(i), []byte("v1"), nil)
		require.NoError(t, err)
	}
	errc := make(chan error, 100)
	for i := range cap(errc) {
		go func() {
			_, _, err := c.Get(ctx, name(i%files))
			errc <- err
		}()
	}
	ps.Heal()
	for range cap(errc) {
		require.NoError(t, <-errc)
	}
	for i := 0; i < files; i += 2 {
		requireNextValue(t, watches[i], "v1")
	}
	require.Eventually(t, func() bool { return s.connected.Load() }, 30*time.Second, 5*time.Millisecond)
	require.Greater(t, parts.Load(), int32(1), "the watches were re-set in one request")
	for i := range files {
		_, err := other.Update(ctx, name(i), []byte("v2"), nil)
		require.NoError(t, err)
	}
	for i := range files {
		requireNextValue(t, watches[i], "v2")
	}
}

// TestAnswerToRequestZeroHidden: the client library numbers requests
// modulo 2^31, so every 2^31st request has xid 0; the zxid of its answer
// is hidden from the library too (see hideZxid), else the library records
// it while reading its last zxid for a reconnection's set-watches request
// (the data race the race detector reports), and the session records it
// as its last. Here the xid 0 request is a read queued while the session,
// which watches a file, is disconnected.
func TestAnswerToRequestZeroHidden(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := freshRoot(t)
	c, ps := proxiedConn(t, root)
	other := openConn(t, []string{testServer}, root)
	_, err := c.Create(ctx, "f", []byte("v0"))
	require.NoError(t, err)
	s, changes := watchSet(ctx, t, c, "f")

	ps.Blackhole()
	ps.Reset()
	require.Eventually(t, func() bool { return !s.connected.Load() }, 30*time.Second, 5*time.Millisecond, "the session never saw the connection drop")
	// The next request gets xid (0x7fffffff+1) & 0x7fffffff = 0.
	atomic.StoreUint32(libraryField(s.zk, "xid").Addr().Interface().(*uint32), 0x7fffffff)
	var xids []int32
	var mu sync.Mutex
	hook := func(b []byte) {
		if xid, op := reqHeader(b); op == opGetDataTest {
			mu.Lock()
			xids = append(xids, xid)
			mu.Unlock()
		}
	}
	s.obs.writeHook.Store(&hook)
	defer s.obs.writeHook.Store(nil)
	_, err = other.Update(ctx, "f", []byte("v1"), nil)
	require.NoError(t, err)
	before := s.obs.lastZxid.Load()
	errc := make(chan error, 1)
	go func() {
		_, _, err := c.Get(ctx, "f")
		errc <- err
	}()
	queue := libraryField(s.zk, "sendChan")
	require.Eventually(t, func() bool { return queue.Len() > 0 }, 30*time.Second, time.Millisecond, "the read never waited for the connection")
	ps.Heal()
	require.NoError(t, <-errc)
	mu.Lock()
	// (The watch's own read of the change may follow.)
	require.NotEmpty(t, xids)
	require.Zero(t, xids[0], "the read's xid")
	mu.Unlock()
	require.Zero(t, libraryField(s.zk, "lastZxid").Int(), "the client library recorded a zxid")
	require.Greater(t, s.obs.lastZxid.Load(), before, "the session did not record the answer's zxid")
	waitWatched(t, changes, "v1")
}

// TestWatchOfFileRecreatedWhileDisconnected deletes a watched file and
// creates it again (at version 0, as the watch last saw it) while the
// watching session is disconnected: the request re-setting the watches
// then reports a change (the file exists, changed since), not the
// deletion. A Version equal to the last one sent is no proof that nothing
// changed (the Mzxid is), and the file is another one (its Czxid): the
// Watch ends with NoNode, as etcd's, Consul's and memorytopo's do (it
// used to send the new file's contents as a change of the old). A
// recursive watch sends the deletion, then the new contents (the Czxid
// tells there too).
func TestWatchOfFileRecreatedWhileDisconnected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := freshRoot(t)
	c, ps := proxiedConn(t, root)
	other := openConn(t, []string{testServer}, root)
	_, err := c.Create(ctx, "d/f", []byte("v0"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "d/keep", []byte("k"))
	require.NoError(t, err)
	s, changes := watchSet(ctx, t, c, "d/f")
	_, tree, err := c.WatchRecursive(ctx, "d")
	require.NoError(t, err)

	ps.Blackhole()
	ps.Reset()
	require.Eventually(t, func() bool { return !s.connected.Load() }, 30*time.Second, 5*time.Millisecond, "the session never saw the connection drop")
	require.NoError(t, other.Delete(ctx, "d/f", nil))
	_, err = other.Create(ctx, "d/f", []byte("v1"))
	require.NoError(t, err)
	ps.Heal()
	select {
	case wd := <-changes:
		require.NotNil(t, wd, "the watch ended without an event")
		require.Truef(t, topo.IsErrType(wd.Err, topo.NoNode), "the Watch of a file deleted and created again: got %q (err %v), want NoNode", wd.Contents, wd.Err)
	case <-time.After(hangGuard):
		t.Fatal("the Watch sent nothing after the file was deleted and created again")
	}
	deleted := false
	for {
		select {
		case wd := <-tree:
			require.NotNil(t, wd, "the recursive watch ended")
			if wd.Path == "d/f" && topo.IsErrType(wd.Err, topo.NoNode) {
				deleted = true
				continue
			}
			require.NoError(t, wd.Err)
			if wd.Path == "d/f" && string(wd.Contents) == "v1" {
				require.True(t, deleted, "the recursive watch sent d/f's new contents without its deletion")
				return
			}
		case <-time.After(hangGuard):
			t.Fatal("the recursive watch never sent d/f's new contents")
		}
	}
}

// TestLockWaiterAcrossReconnection cuts the connection of a session whose
// Lock waits behind another holder's: the waiter's entry stays (its
// session survives), the reconnection (watches re-set, with requests
// queued meanwhile) gives it the lock neither while the holder still
// holds it nor never: once the holder unlocks, while the waiter is
// disconnected again, the waiter holds it through its one entry, its
// guarded writes are applied and the former holder's refused.
func TestLockWaiterAcrossReconnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := freshRoot(t)
	c, ps := proxiedConn(t, root)
	holder := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	_, err := holder.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	lh, err := holder.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	type locked struct {
		l   topo.LockDescriptor
		err error
	}
	got := make(chan locked, 1)
	go func() {
		l, err := c.Lock(ctx, "d", "waiter")
		got <- locked{l, err}
	}()
	entries := func() []string {
		names, _, err := raw.Children(root + "/d/locks")
		require.NoError(t, err)
		return entryNames(names)
	}
	s, err := c.session("")
	require.NoError(t, err)
	// The waiter has queued once its entry is on the server AND its
	// create's answer has arrived (the session knows the entry): the
	// connection cut below would otherwise lose that answer, and the Lock
	// fail with it, as a create of unknown outcome does (see queue.go).
	// Later reads of the wait are retried across the reconnection.
	require.Eventually(t, func() bool {
		names := entries()
		return len(names) == 2 && s.entry(root+"/d/locks/"+names[1]) != nil
	}, 30*time.Second, 5*time.Millisecond, "the waiter never queued")

	cut := func() {
		ps.Blackhole()
		ps.Reset()
		require.Eventually(t, func() bool { return !s.connected.Load() }, 30*time.Second, 5*time.Millisecond, "the session never saw the connection drop")
	}
	// A reconnection with requests queued: the waiter still waits.
	cut()
	errc := make(chan error, 20)
	for range cap(errc) {
		go func() {
			_, _, err := c.Get(ctx, "d/f")
			errc <- err
		}()
	}
	ps.Heal()
	for range cap(errc) {
		require.NoError(t, <-errc)
	}
	_, err = topo.GuardedUpdate(ctx, holder, lh, "d/f", []byte("1"), nil)
	require.NoError(t, err)
	select {
	case r := <-got:
		t.Fatalf("the waiter locked while the holder held (err %v)", r.err)
	default:
	}

	// The holder unlocks while the waiter is disconnected.
	cut()
	require.NoError(t, lh.Unlock(ctx))
	ps.Heal()
	r := <-got
	require.NoError(t, r.err)
	require.Len(t, entries(), 1, "the waiter's entry")
	_, err = topo.GuardedUpdate(ctx, c, r.l, "d/f", []byte("2"), nil)
	require.NoError(t, err)
	_, err = topo.GuardedUpdate(ctx, holder, lh, "d/f", []byte("3"), nil)
	require.Error(t, err)
	data, _, err := holder.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "2", string(data))
	require.NoError(t, r.l.Unlock(ctx))
}
