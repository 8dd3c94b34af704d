package zk2topo

import (
	"context"
	"encoding/binary"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/semaphore"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// TestGuardedWriteEveryClaimKind: IfHeld's read of the claim's entry
// (verify) passes for every kind of claim a Conn issues (Lock, TryLock,
// LockName, LockWithTTL, an election term, a semaphore permit), alone and
// all together in one Txn, and names the right op when mixed with other
// conditions: a failing IfVersion before the claims, a claim whose entry
// was deleted behind its back after a passing IfPresent and claims that
// pass (its index, LockLost). Nothing is written by a failed Txn.
func TestGuardedWriteEveryClaimKind(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	v, err := c.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)

	for _, f := range []string{"e/x", "e2/x"} {
		_, err = c.Create(ctx, f, nil)
		require.NoError(t, err)
	}
	lk, err := c.Lock(ctx, "d", "lock")
	require.NoError(t, err)
	try, err := c.TryLock(ctx, "e", "try")
	require.NoError(t, err)
	name, err := c.LockName(ctx, "name", "name")
	require.NoError(t, err)
	ttl, err := c.LockWithTTL(ctx, "e2", "ttl", time.Minute)
	require.NoError(t, err)
	p, err := c.NewLeaderParticipation("elec", "id")
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	_, err = p.Campaign(ctx, []byte("v"))
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)
	sem, err := semaphore.New(c, "sem", 2, semaphore.Options{})
	require.NoError(t, err)
	permit, err := sem.Acquire(ctx)
	require.NoError(t, err)

	fences := map[string]topo.Fence{"Lock": lk, "TryLock": try, "LockName": name, "LockWithTTL": ttl, "term": term, "permit": permit}
	var all []topo.TxnOp
	for what, f := range fences {
		v, err = topo.GuardedUpdate(ctx, c, f, "d/f", []byte(what), v)
		require.NoError(t, err, what)
		all = append(all, topo.IfHeld(f))
	}
	vs, err := c.Txn(ctx, append(all, topo.UpdateOp("d/f", []byte("all"), v))...)
	require.NoError(t, err, "every claim together")
	v = vs[len(all)]

	before := fileTree(t, raw, root)
	_, err = c.Txn(ctx, topo.IfVersion("d/f", topo.NumericVersion(99)), topo.IfHeld(lk), topo.IfHeld(term), topo.UpdateOp("d/f", []byte("x"), nil))
	requireTxnErr(t, err, 0, topo.BadVersion)
	_, err = c.Txn(ctx, topo.IfHeld(lk), topo.IfHeld(term), topo.IfVersion("d/f", topo.NumericVersion(99)), topo.UpdateOp("d/f", []byte("x"), nil))
	requireTxnErr(t, err, 2, topo.BadVersion)

	// The LockName entry deleted behind the holder's back (by an
	// operator): the Txn fails at its index, whether the deletion's event
	// or the entry's read found it out.
	require.NoError(t, raw.Delete(entryNode(name), -1))
	_, err = c.Txn(ctx, topo.IfPresent("d/f"), topo.IfHeld(lk), topo.IfHeld(name), topo.IfHeld(term), topo.UpdateOp("d/f", []byte("x"), nil))
	requireTxnErr(t, err, 2, topo.LockLost)
	_, err = c.Txn(ctx, topo.IfHeld(name), topo.IfVersion("d/f", topo.NumericVersion(99)), topo.UpdateOp("d/f", []byte("x"), nil))
	requireTxnErr(t, err, 0, topo.LockLost)
	requireClosed(t, name.Done(), "LockName entry deleted")
	// The named lock's directory held nothing but that entry: the session
	// removes it once it has seen the entry deleted (see forgetGone),
	// which may come before, between or after the Txns. Nothing else
	// changed.
	requireGone(t, raw, root+"/name", "the named lock's directory was left")
	want := slices.DeleteFunc(strings.Split(before, "\n"), func(l string) bool {
		return strings.HasPrefix(l, root+"/name ")
	})
	require.Equal(t, strings.Join(want, "\n"), fileTree(t, raw, root), "a failed Txn wrote")

	// The other claims still guard writes.
	_, err = topo.GuardedUpdate(ctx, c, term, "d/f", []byte("after"), v)
	require.NoError(t, err)
	for _, f := range []topo.LockDescriptor{lk, try, ttl, permit} {
		require.NoError(t, f.Unlock(ctx))
	}
	require.NoError(t, p.Resign(ctx))
}

// TestGuardedWriteResumedTerm: a term taken back with
// ResumeLeaderParticipation lives on a session that is not the resuming
// Conn's current one: IfHeld's read of its entry must compare the entry's
// owner with that session, so its guarded writes pass, through the
// resuming Conn and through another Conn of the same servers. Mixed with
// a claim of the Conn's current session it is refused (InvalidArgument,
// one session per Txn); after a Resign it fails LockLost.
func TestGuardedWriteResumedTerm(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	px, err := faultproxy.New(testServer)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	old := openConn(t, []string{px.Addr()}, root) // the process that "restarts"
	c := openConn(t, []string{testServer}, root)
	other := openConn(t, []string{testServer}, root)
	v, err := c.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	p, err := old.NewLeaderParticipation("elec", "id")
	require.NoError(t, err)
	_, err = p.Campaign(ctx, []byte("v"))
	require.NoError(t, err)
	info, err := p.ResumeInfo()
	require.NoError(t, err)
	px.Blackhole() // the old process is gone
	r, err := c.ResumeLeaderParticipation(ctx, "elec", "id", info)
	require.NoError(t, err)
	t.Cleanup(r.Stop)
	_, err = r.WaitForLeadership()
	require.NoError(t, err)
	term, err := r.Term()
	require.NoError(t, err)

	cur, err := c.session("")
	require.NoError(t, err)
	g := claimSession(t, term)
	require.NotSame(t, cur, g, "the test needs the term on a session other than the Conn's current one")
	require.NotEqual(t, cur.zk.SessionID(), g.zk.SessionID())

	v, err = topo.GuardedUpdate(ctx, c, term, "d/f", []byte("resumed"), v)
	require.NoError(t, err, "a resumed term's guarded write")
	v, err = topo.GuardedUpdate(ctx, other, term, "d/f", []byte("other conn"), v)
	require.NoError(t, err, "a resumed term's guarded write through another Conn")
	lk, err := c.Lock(ctx, "d", "lock")
	require.NoError(t, err)
	_, err = c.Txn(ctx, topo.IfHeld(term), topo.IfHeld(lk), topo.UpdateOp("d/f", nil, nil))
	requireTxnErr(t, err, 1, topo.InvalidArgument)
	require.NoError(t, lk.Unlock(ctx))

	require.NoError(t, r.Resign(ctx))
	_, err = topo.GuardedUpdate(ctx, c, term, "d/f", []byte("late"), v)
	requireTxnErr(t, err, 0, topo.LockLost)
	data, _, err := c.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "other conn", string(data))
}

// claimSession returns the session of the claim behind f.
func claimSession(t *testing.T, f topo.Fence) *zkSession {
	t.Helper()
	cl, ok := claimOf(f)
	require.True(t, ok)
	return cl.sess
}

// TestGuardedWriteAfterReconnect: a holder's connection drops and its
// client reconnects (the session lives on, through another of the three
// addresses): IfHeld's read of the entry, on the reconnected session,
// still finds the entry the session's, and the guarded write passes (no
// false LockLost), each of several times.
func TestGuardedWriteAfterReconnect(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	c, ps := proxiedConn(t, root)
	v, err := c.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	lk, err := c.Lock(ctx, "d", "lock")
	require.NoError(t, err)
	s := claimSession(t, lk)
	id := s.zk.SessionID()
	for i := range 3 {
		ps.Reset()
		require.Eventually(t, func() bool { // reconnected
			_, _, err := c.Get(ctx, "d/f")
			return err == nil
		}, time.Minute, time.Millisecond)
		v, err = topo.GuardedUpdate(ctx, c, lk, "d/f", []byte{byte('a' + i)}, v)
		require.NoError(t, err, "reconnect %d", i)
		require.Equal(t, id, s.zk.SessionID(), "the session lives on")
	}
	requireOpen(t, lk.Done(), "lock after reconnects")
	require.NoError(t, lk.Unlock(ctx))
}

// TestClaimLostByVerifyThenUnlock: a claim found lost by IfHeld's read
// (its entry deleted and the name reused by another session, the
// deletion's event held back on the holder's connection) fails the Txn;
// then the holder's Done closes once the event arrives, its Unlock ends
// (LockLost or success, but it returns) without touching the other
// session's entry of the same name, and the store keeps exactly that
// entry.
func TestClaimLostByVerifyThenUnlock(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	g := &readGate{sent: make(chan struct{})}
	a, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: 20 * time.Second, Dialer: g.dial}, root)
	require.NoError(t, err)
	defer a.Close()
	raw := rawConn(t)
	other := rawConn(t)
	_, err = a.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	locks := root + "/d/locks"
	la, err := a.Lock(ctx, "d", "a")
	require.NoError(t, err)
	entry := entryNode(la)

	g.hold()
	require.NoError(t, raw.Delete(entry, -1))
	deleteLocksZnode(t, raw, locks)
	_, err = raw.CreateContainer(locks, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	name, err := other.Create(locks+"/", []byte("other"), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	require.Equal(t, entry, name, "the test needs the name reused")
	_, ost, err := raw.Exists(name)
	require.NoError(t, err)

	g.armed.Store(true)
	done := make(chan error, 1)
	go func() {
		// Several claims' ops in one Txn: the IfHeld is not the first op.
		_, err := a.Txn(ctx, topo.IfPresent("d/f"), topo.IfHeld(la), topo.UpdateOp("d/f", []byte("misattributed"), nil))
		done <- err
	}()
	select {
	case <-g.sent:
	case <-time.After(hangGuard):
		t.Fatal("the guarded write sent nothing")
	}
	g.release()
	requireTxnErr(t, <-done, 1, topo.LockLost)
	requireClosed(t, la.Done(), "entry deleted")
	uctx, cancel := context.WithTimeout(ctx, hangGuard)
	defer cancel()
	err = la.Unlock(uctx)
	require.NotErrorIs(t, err, topo.Timeout, "Unlock of a claim lost by verify hung")
	data, st, err := raw.Get(name)
	require.NoError(t, err, "the other session's entry was deleted by the stale holder's Unlock")
	require.Equal(t, "other", string(data))
	require.Equal(t, ost.Czxid, st.Czxid)
	kids, _, err := raw.Children(locks)
	require.NoError(t, err)
	require.Len(t, kids, 1)
	got, _, err := raw.Get(root + "/d/f")
	require.NoError(t, err)
	require.Equal(t, "0", string(got))
}

// afterMultiHook dials connections that run fn (once, armed) when the
// client writes its first request frame after its first multi, before
// the frame goes out: the server answers that request after what fn did.
type afterMultiHook struct {
	armed  atomic.Bool
	multis atomic.Int32
	once   sync.Once
	fn     func()
}

func (h *afterMultiHook) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	nc, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &afterMultiConn{Conn: nc, h: h}, nil
}

type afterMultiConn struct {
	net.Conn
	h *afterMultiHook
}

func (c *afterMultiConn) Write(b []byte) (int, error) {
	if len(b) >= 12 && int32(binary.BigEndian.Uint32(b[4:8])) > 0 && c.h.armed.Load() {
		if int32(binary.BigEndian.Uint32(b[8:12])) == opMulti {
			c.h.multis.Add(1)
		} else if c.h.multis.Load() == 1 {
			c.h.once.Do(c.h.fn)
		}
	}
	return c.Conn.Write(b)
}

// TestGuardedWriteNameReusedBetweenMultis: a guarded Txn whose first
// multi fails for a missing parent directory (no hint) reads the
// ancestors and sends a second multi. The holder's entry is deleted, the
// "locks" znode re-created and the entry's name reused by another
// session after the first multi was answered and before the ancestors'
// read: that read's answer comes after the deletion's event, so the
// claim has ended locally before the second multi is built, whose check
// of the name alone would pass on the other session's entry. The Txn
// must fail LockLost and write nothing.
func TestGuardedWriteNameReusedBetweenMultis(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	raw := rawConn(t)
	other := rawConn(t)
	h := &afterMultiHook{}
	a, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: 20 * time.Second, Dialer: h.dial}, root)
	require.NoError(t, err)
	defer a.Close()
	_, err = a.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	locks := root + "/d/locks"
	la, err := a.Lock(ctx, "d", "a")
	require.NoError(t, err)
	entry := entryNode(la)
	var reused string
	var hookErr error
	h.fn = func() {
		if hookErr = raw.Delete(entry, -1); hookErr != nil {
			return
		}
		if hookErr = raw.Delete(locks, -1); hookErr != nil {
			return
		}
		if _, hookErr = raw.CreateContainer(locks, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll)); hookErr != nil {
			return
		}
		reused, hookErr = other.Create(locks+"/", []byte("other"), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	}
	h.armed.Store(true)
	_, err = a.Txn(ctx, topo.IfHeld(la), topo.CreateOp("n/e/w", []byte("misattributed")))
	h.armed.Store(false)
	require.NoError(t, hookErr)
	require.Equal(t, entry, reused, "the test needs the name reused")
	requireTxnErr(t, err, 0, topo.LockLost)
	ok, _, err := raw.Exists(root + "/n/e/w")
	require.NoError(t, err)
	require.False(t, ok, "the stale holder's write landed under another session's entry")
	requireClosed(t, la.Done(), "entry deleted")
}

// existsCounter wraps readGate's connections and counts the exists
// request frames written.
type existsCounter struct {
	readGate
	exists atomic.Int32
}

func (e *existsCounter) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	nc, err := e.readGate.dial(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &existsCountConn{Conn: nc, e: e}, nil
}

type existsCountConn struct {
	net.Conn
	e *existsCounter
}

func (c *existsCountConn) Write(b []byte) (int, error) {
	if len(b) >= 12 && int32(binary.BigEndian.Uint32(b[4:8])) > 0 && int32(binary.BigEndian.Uint32(b[8:12])) == opExists {
		c.e.exists.Add(1)
	}
	return c.Conn.Write(b)
}

// TestGuardReadsEntriesPipelined: a Txn guarded by several claims of one
// session reads their entries in one round trip: with the answers held
// back, the exists of every entry is sent (not one, waiting for its
// answer before the next), and the Txn passes once they come.
func TestGuardReadsEntriesPipelined(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	e := &existsCounter{readGate: readGate{sent: make(chan struct{})}}
	c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: 30 * time.Second, Dialer: e.dial}, root)
	require.NoError(t, err)
	defer c.Close()
	v, err := c.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	ops := []topo.TxnOp{}
	for _, n := range []string{"a", "b", "c"} {
		l, err := c.LockName(ctx, n, n)
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Unlock(ctx)) }()
		ops = append(ops, topo.IfHeld(l))
	}
	e.hold()
	n0 := e.exists.Load()
	done := make(chan error, 1)
	go func() {
		_, err := c.Txn(ctx, append(ops, topo.UpdateOp("d/f", []byte("1"), v))...)
		done <- err
	}()
	// Bounded well within the session timeout (the answers are held): the
	// exists frames are written at once or never.
	deadline := time.Now().Add(10 * time.Second)
	for e.exists.Load()-n0 < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	got := e.exists.Load() - n0
	e.release()
	require.GreaterOrEqual(t, got, int32(3), "the entries' exists were sent one round trip after another")
	require.NoError(t, <-done)
}
