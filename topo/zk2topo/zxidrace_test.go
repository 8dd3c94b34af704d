package zk2topo

import (
	"context"
	"encoding/binary"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/stacks"
)

// TestSessionGivenUpWhileReconnecting gives a session up (as its
// watchdog does) while it reconnects with watches to re-set and requests
// queued during the disconnection: the close request the client library
// then sends goes out behind the queued requests, and no set-watches
// request. Their answers must not race (under the race detector, as make
// test runs this package) with the library's read of its last zxid for
// that set-watches request, which nothing orders before them: the race
// detector reported it under load in TestConformance/Partition/Waiter
// (see hideZxid). Here the reconnection's connect request waits until the
// close request is queued, behind a full send queue, and the library's
// send goroutine waits at the first queued request until the library's
// set-watches goroutine has given up (seeing the Conn closed, with no
// room in the queue): waiting on it any other way would order its read
// before the answers.
func TestSessionGivenUpWhileReconnecting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := freshRoot(t)
	c, ps := proxiedConn(t, root)
	_, err := c.Create(ctx, "f", []byte("v0"))
	require.NoError(t, err)
	s, _ := watchSet(ctx, t, c, "f")
	// The connection is cut and the client's redial held until the
	// requests are queued: its connect request is then the only one.

	connecting, sending := make(chan struct{}), make(chan struct{})
	resumeConnect, resumeSend := make(chan struct{}), make(chan struct{})
	var connectOnce, sendOnce sync.Once
	var reconnected atomic.Bool
	hook := func(b []byte) {
		if len(b) >= connectReqLen && binary.BigEndian.Uint32(b[4:8]) == 0 { // a connect request
			connectOnce.Do(func() {
				close(connecting)
				<-resumeConnect
				reconnected.Store(true)
			})
		} else if xid, op := reqHeader(b); xid > 0 && op == opExists && reconnected.Load() {
			sendOnce.Do(func() {
				close(sending)
				<-resumeSend
			})
		}
	}
	s.obs.writeHook.Store(&hook)
	dials := make(chan struct{})
	s.dialHold.Store(&dials)
	ps.Reset()
	require.Eventually(t, func() bool { return !s.connected.Load() }, 30*time.Second, 5*time.Millisecond, "the session never saw the connection drop")
	// Requests made now wait in the client library for a connection, as
	// many as its send queue holds.
	var wg sync.WaitGroup
	for range 24 {
		wg.Go(func() { _, _, _ = s.zk.Exists(c.zkPath("f")) })
	}
	queue := libraryField(s.zk, "sendChan")
	require.Eventually(t, func() bool { return queue.Len() == queue.Cap() }, 30*time.Second, time.Millisecond)
	xid := (*uint32)(libraryField(s.zk, "xid").Addr().UnsafePointer())
	queued := atomic.LoadUint32(xid)
	s.dialHold.Store(nil)
	close(dials)
	waitClosed(t, connecting, "the client never reconnected")
	s.lose() // closes the client library in the background
	require.Eventually(t, func() bool { return atomic.LoadUint32(xid) > queued }, 30*time.Second, time.Millisecond, "the client library never queued its close request")
	close(resumeConnect)
	waitClosed(t, sending, "the client library never sent the queued requests")
	require.Eventually(t, func() bool {
		st := strings.Join(stacks.All(), "\n\n")
		return strings.Contains(st, "(*Conn).loop(") && strings.Contains(st, "sync.(*WaitGroup).Wait") &&
			!strings.Contains(st, "(*Conn).sendSetWatches.func1")
	}, 30*time.Second, time.Millisecond, "the client library's set-watches goroutine never ended")
	close(resumeSend)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitClosed(t, done, "requests queued before the close never returned")
}

// waitClosed waits until ch is closed, failing after hangGuard.
func waitClosed(t *testing.T, ch <-chan struct{}, msg string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(hangGuard):
		t.Fatal(msg)
	}
}

// TestReconnectionZxids: the connect request of a reconnection carries
// the last zxid the session saw (so that the server refuses it when it is
// behind), and the set-watches request the zxid the session saw before
// the disconnection: a change of a watched file made while disconnected
// is still reported, and no older one.
func TestReconnectionZxids(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := freshRoot(t)
	c, ps := proxiedConn(t, root)
	raw := rawConn(t)
	_, err := c.Create(ctx, "f", []byte("v0"))
	require.NoError(t, err)
	s, changes := watchSet(ctx, t, c, "f")
	_, st, err := raw.Get(c.zkPath("f"))
	require.NoError(t, err)
	m0 := st.Mzxid

	var mu sync.Mutex
	var connectZxids, watchZxids []int64
	hook := func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		if xid, op := reqHeader(b); xid > 0 && op == opSetWatches && len(b) >= 20 {
			watchZxids = append(watchZxids, int64(binary.BigEndian.Uint64(b[12:20])))
		} else if len(b) >= connectReqLen && binary.BigEndian.Uint32(b[4:8]) == 0 {
			connectZxids = append(connectZxids, int64(binary.BigEndian.Uint64(b[8:16])))
		}
	}
	s.obs.writeHook.Store(&hook)
	ps.Blackhole()
	ps.Reset()
	require.Eventually(t, func() bool { return !s.connected.Load() }, 30*time.Second, 5*time.Millisecond, "the session never saw the connection drop")
	st, err = raw.Set(c.zkPath("f"), []byte("v1"), -1)
	require.NoError(t, err)
	m1 := st.Mzxid
	ps.Heal()
	waitWatched(t, changes, "v1")
	s.obs.writeHook.Store(nil)

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, connectZxids)
	for _, z := range connectZxids {
		require.GreaterOrEqual(t, z, m0, "a connect request's last zxid seen")
	}
	require.NotEmpty(t, watchZxids)
	for _, z := range watchZxids {
		require.GreaterOrEqual(t, z, m0, "a set-watches request's relative zxid")
		require.Less(t, z, m1, "a set-watches request's relative zxid")
	}
}

// TestChangeReportedAfterQueuedAnswers: a change of a watched file made
// while the session was disconnected is reported even when requests
// queued meanwhile are answered before the client library writes its
// set-watches request (nothing orders it before them): the request
// carries the zxid the session had when the connection was made, not a
// later one of those answers (which is past the change). Here the
// library's send goroutine waits, before the second queued request, until
// the first (a Watch's read of the file, whose answer's zxid is past the
// change) was answered.
func TestChangeReportedAfterQueuedAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := freshRoot(t)
	c, ps := proxiedConn(t, root)
	other := openConn(t, []string{testServer}, root)
	_, err := c.Create(ctx, "f", []byte("v0"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "g", []byte("g"))
	require.NoError(t, err)
	s, before := watchSet(ctx, t, c, "f")

	watched := make(chan struct{})
	hook := func(b []byte) {
		if path, _, ok := jString(b, 12); ok && string(path) == c.zkPath("g") {
			select {
			case <-watched:
			case <-ctx.Done():
			}
		}
	}
	s.obs.writeHook.Store(&hook)
	ps.Blackhole()
	ps.Reset()
	require.Eventually(t, func() bool { return !s.connected.Load() }, 30*time.Second, 5*time.Millisecond, "the session never saw the connection drop")
	_, err = other.Update(ctx, "f", []byte("v1"), nil)
	require.NoError(t, err)
	queue := libraryField(s.zk, "sendChan")
	watchErr := make(chan error, 1)
	go func() {
		_, _, err := c.Watch(ctx, "f")
		close(watched)
		watchErr <- err
	}()
	require.Eventually(t, func() bool { return queue.Len() == 1 }, 30*time.Second, time.Millisecond, "the Watch's read never waited for the connection")
	getErr := make(chan error, 1)
	go func() {
		_, _, err := c.Get(ctx, "g")
		getErr <- err
	}()
	require.Eventually(t, func() bool { return queue.Len() == 2 }, 30*time.Second, time.Millisecond, "the Get never waited for the connection")
	ps.Heal()
	require.NoError(t, <-watchErr)
	require.NoError(t, <-getErr)
	s.obs.writeHook.Store(nil)
	requireNextValue(t, before, "v1")
}

// libraryField returns the client library's unexported field name of zc.
func libraryField(zc *zk.Conn, name string) reflect.Value {
	v := reflect.ValueOf(zc).Elem().FieldByName(name)
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}
