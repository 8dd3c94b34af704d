package zk2topo

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/semaphore"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// TestPartitionedHolderDoneBeforeServerExpiry: a holder of a 3-slot
// semaphore on a Conn with a 2 s session timeout is cut off (its
// connection blackholed). A fourth contender on another Conn waits for a
// slot, which it can only get once the server expired the cut-off
// holder's session. When it gets it, the cut-off holder's Done must
// already be closed: the semaphore never has 4 holders by the Done view.
// The test also measures, and logs, when Done closed against when the
// server expired the session (a third Conn sees the holder's ephemeral
// lock entry vanish), and asserts that Done closed no later than the
// server's expiry plus the documented margin (SafetyMargin: Done closes
// before the server may expire the session, so in fact before it).
func TestPartitionedHolderDoneBeforeServerExpiry(t *testing.T) {
	const timeout = 2 * time.Second
	root := freshRoot(t)
	px, err := faultproxy.New(testServer)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	cut, err := NewConn(Options{Servers: []string{px.Addr()}, SessionTimeout: timeout}, root)
	require.NoError(t, err)
	t.Cleanup(cut.Close)
	others := make([]*Conn, 3)
	for i := range others {
		others[i] = openConn(t, []string{testServer}, root)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	sem := func(c topo.Conn) *semaphore.Semaphore {
		s, err := semaphore.New(c, "sem", 3, semaphore.Options{ProbeInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		return s
	}
	old, err := sem(cut).Acquire(ctx)
	require.NoError(t, err)
	for _, c := range others[:2] {
		_, err := sem(c).Acquire(ctx)
		require.NoError(t, err)
	}

	// The cut-off holder's session's ephemeral znodes: the server deletes
	// them when it expires the session.
	s, err := cut.session("")
	require.NoError(t, err)
	sid := s.zk.SessionID()
	watcher, _, err := zk.Connect([]string{testServer}, testSessionTimeout, zk.WithLogInfo(false))
	require.NoError(t, err)
	t.Cleanup(watcher.Close)
	ephemerals := func() []string {
		var out []string
		var walk func(p string)
		walk = func(p string) {
			kids, _, err := watcher.Children(p)
			if err != nil {
				return
			}
			for _, k := range kids {
				q := p + "/" + k
				if _, st, err := watcher.Get(q); err == nil && st.EphemeralOwner == sid {
					out = append(out, q)
				}
				walk(q)
			}
		}
		walk(root)
		return out
	}
	owned := ephemerals()
	require.NotEmpty(t, owned, "the cut-off holder owns no ephemeral znode")

	// The fourth contender waits for a slot.
	acquired := make(chan bool, 1)
	go func() {
		_, err := sem(others[2]).Acquire(ctx)
		if err != nil {
			t.Errorf("the fourth contender's Acquire: %v", err)
			acquired <- false
			return
		}
		select {
		case <-old.Done():
			acquired <- false
		default:
			acquired <- true // a 4th holder while the old one's Done is open
		}
	}()

	px.Blackhole()
	cutAt := time.Now()
	doneAt := make(chan time.Time, 1)
	go func() {
		<-old.Done()
		doneAt <- time.Now()
	}()
	// The server's expiry: the first of the holder's ephemeral znodes is
	// gone (the server deletes them all with the session).
	var expiredAt time.Time
	require.Eventually(t, func() bool {
		for _, p := range owned {
			if ok, _, err := watcher.Exists(p); err == nil && !ok {
				expiredAt = time.Now()
				return true
			}
		}
		return false
	}, time.Minute, time.Millisecond, "the server never expired the cut-off session")

	overlap := <-acquired
	require.False(t, overlap, "a 4th semaphore holder while the cut-off holder's Done was still open")
	var done time.Time
	select {
	case done = <-doneAt:
	case <-time.After(hangGuard):
		t.Fatal("the cut-off holder's Done never closed")
	}
	t.Logf("after the cut: Done closed at %v, the server expired the session at %v (Done %v before the expiry)",
		done.Sub(cutAt).Round(time.Millisecond), expiredAt.Sub(cutAt).Round(time.Millisecond), expiredAt.Sub(done).Round(time.Millisecond))
	require.False(t, done.After(expiredAt.Add(cut.margin(timeout))),
		"Done closed %v after the server expired the session, later than the documented margin %v", done.Sub(expiredAt), cut.margin(timeout))
}

// TestServerClosedSessionReportedWithinMargin: the server ends a lock
// holder's session on its own (another connection takes the session over
// and closes it: zktest.TakeOverSession), with a 2 s session timeout. The
// Conn cannot know before the server says so, which it does when the
// client reconnects; the lock's Done and the session's loss (every other
// loss signal) must come no later than the documented margin
// (SafetyMargin, 400 ms here) after the server ended the session. The
// client library used to wait a second before redialling its only server,
// so it took about 1 s whatever the session timeout. The Conn's dials are
// held while the session is taken over and closed, so that the Conn
// cannot take it back in between (the harness's race, not the server's).
func TestServerClosedSessionReportedWithinMargin(t *testing.T) {
	const timeout = 2 * time.Second
	root := freshRoot(t)
	var gateMu sync.Mutex
	gate := make(chan struct{})
	close(gate) // open
	dial := func(network, addr string, to time.Duration) (net.Conn, error) {
		gateMu.Lock()
		g := gate
		gateMu.Unlock()
		<-g
		return net.DialTimeout(network, addr, to)
	}
	c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: timeout, Dialer: dial}, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = c.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	s, err := c.session("")
	require.NoError(t, err)
	id, pw := sessionPassword(t, s.zk)

	gateMu.Lock()
	gate = make(chan struct{}) // held
	held := gate
	gateMu.Unlock()
	taken, err := zktest.TakeOverSession(testServer, id, pw)
	require.NoError(t, err)
	// The server ends the session no earlier than this (just before the
	// close request is sent).
	closing := time.Now()
	require.NoError(t, taken.Close())
	close(held)

	var done, lost time.Time
	select {
	case <-l.Done():
		done = time.Now()
	case <-time.After(hangGuard):
		t.Fatal("the lock's Done never closed")
	}
	select {
	case <-s.lost:
		lost = time.Now()
	case <-time.After(hangGuard):
		t.Fatal("the Conn never declared the session lost")
	}
	t.Logf("after the close request was sent: Done closed after %v, the session was declared lost after %v",
		done.Sub(closing).Round(time.Millisecond), lost.Sub(closing).Round(time.Millisecond))
	for what, at := range map[string]time.Time{"Done closed": done, "the session was declared lost": lost} {
		require.LessOrEqual(t, at.Sub(closing), c.margin(timeout),
			"%s %v after the server ended the session, later than the documented margin %v", what, at.Sub(closing), c.margin(timeout))
	}
	require.ErrorIs(t, l.Check(ctx), topo.LockLost)
}

// TestHolderCutEarlyInItsSessionGivesUpFirst: a Conn asks for a session
// timeout longer than the server grants (the server's maximum is 4 s,
// ZooKeeper's default of 20 ticks), takes a lock on its first session and
// is cut off at once. The server expires the session one granted timeout after it last
// heard from it and hands the lock to a waiter; when the waiter gets it,
// the cut-off holder's Done must already be closed, however young its
// session was and whatever timeout it asked for.
func TestHolderCutEarlyInItsSessionGivesUpFirst(t *testing.T) {
	server := zktest.StartWithMaxSessionTimeout(t, 20*zktest.TickTime)
	root := freshRoot(t)
	px, err := faultproxy.New(server)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	holder, err := NewConn(Options{Servers: []string{px.Addr()}, SessionTimeout: 30 * time.Second}, root)
	require.NoError(t, err)
	t.Cleanup(holder.Close)
	t.Cleanup(px.Heal) // runs before holder.Close
	waiter := openConn(t, []string{server}, root)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = waiter.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)

	ld, err := holder.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	done := ld.Done()
	got := make(chan error, 1)
	go func() {
		l, err := waiter.Lock(ctx, "d", "waiter")
		if err == nil {
			defer func() { _ = l.Unlock(ctx) }()
		}
		got <- err
	}()
	px.Blackhole()
	select {
	case err = <-got:
	case <-ctx.Done():
		t.Fatal("the waiter never got the lock of the cut-off holder")
	}
	open := !isClosed(done)
	require.NoError(t, err)
	require.False(t, open, "the waiter got the lock while the cut-off holder's Done was still open")
}
