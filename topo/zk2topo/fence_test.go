package zk2topo

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// requireClosed fails unless ch is closed within hangGuard.
func requireClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	require.NotNil(t, ch, what)
	select {
	case <-ch:
	case <-time.After(hangGuard):
		t.Fatalf("%s: Done not closed", what)
	}
}

// requireOpen fails if ch is closed.
func requireOpen(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	require.NotNil(t, ch, what)
	select {
	case <-ch:
		t.Fatalf("%s: Done closed while held", what)
	default:
	}
}

// TestLockTokenIsCzxid checks that a lock's token is its entry's Czxid,
// fixed, and greater for each later holder (Lock, TryLock, LockName).
func TestLockTokenIsCzxid(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	a := openConn(t, []string{testServer}, root)
	b := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	_, err := a.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	var last int64
	for i := range 6 {
		c := []*Conn{a, b}[i%2]
		var l topo.LockDescriptor
		switch i % 3 {
		case 0:
			l, err = c.Lock(ctx, "d", "x")
		case 1:
			l, err = c.TryLock(ctx, "d", "x")
		default:
			l, err = c.LockName(ctx, "d", "x")
		}
		require.NoError(t, err)
		_, st, err := raw.Exists(entryNode(l))
		require.NoError(t, err)
		require.Equal(t, st.Czxid, l.Token())
		require.Greater(t, l.Token(), last)
		last = l.Token()
		require.NoError(t, l.Unlock(ctx))
		require.Equal(t, last, l.Token(), "the token is fixed")
	}
}

// TestLockTokenSameConn takes and releases one lock many times through
// one Conn (whose token comes from the create's answer and whose watch
// behind Done is the children read pipelined behind it) with another
// Conn's lock and a foreign entry mixed in: every token is its entry's
// Czxid and greater than the last, and Done still closes when the entry
// is deleted behind the holder's back.
func TestLockTokenSameConn(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	a := openConn(t, []string{testServer}, root)
	b := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	_, err := a.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	var last int64
	for i := range 20 {
		c := a
		if i%7 == 6 {
			c = b
		}
		if i%5 == 4 {
			// A foreign entry comes and goes: the sequence skips.
			p, err := raw.Create(root+"/d/locks/", []byte("x"), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
			if err == nil {
				require.NoError(t, raw.Delete(p, -1))
			}
		}
		l, err := c.Lock(ctx, "d", "x")
		require.NoError(t, err)
		_, st, err := raw.Exists(entryNode(l))
		require.NoError(t, err)
		require.Equal(t, st.Czxid, l.Token(), "round %d", i)
		require.Greater(t, l.Token(), last)
		last = l.Token()
		if i == 10 {
			require.NoError(t, raw.Delete(entryNode(l), -1))
			requireClosed(t, l.Done(), "entry deleted")
			require.ErrorIs(t, l.Unlock(ctx), topo.LockLost)
			continue
		}
		requireOpen(t, l.Done(), "held")
		require.NoError(t, l.Unlock(ctx))
	}
}

// TestLockDone checks that Done closes on Unlock, on session expiry and
// when the entry is deleted behind the holder's back, and stays open
// while the lock is held.
func TestLockDone(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	_, err := c.Create(ctx, "d/f", nil)
	require.NoError(t, err)

	l, err := c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	requireOpen(t, l.Done(), "held")
	require.NoError(t, l.Unlock(ctx))
	requireClosed(t, l.Done(), "Unlock")
	require.ErrorIs(t, l.Unlock(ctx), topo.Interrupted) // idempotent close

	l, err = c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	expireSession(t, c, testServer)
	requireClosed(t, l.Done(), "expiry")
	require.ErrorIs(t, l.Check(ctx), topo.LockLost)

	l, err = c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	// Another client rewrites the entry's data: still held.
	_, err = raw.Set(entryNode(l), []byte("y"), -1)
	require.NoError(t, err)
	require.NoError(t, l.Check(ctx))
	requireOpen(t, l.Done(), "entry rewritten")
	require.NoError(t, raw.Delete(entryNode(l), -1))
	requireClosed(t, l.Done(), "entry deleted")
	require.ErrorIs(t, l.Check(ctx), topo.LockLost)
	_, err = topo.GuardedUpdate(ctx, c, l, "d/f", []byte("stale"), nil)
	requireTxnErr(t, err, 0, topo.LockLost)
	require.ErrorIs(t, l.Unlock(ctx), topo.LockLost)

	// A lock whose watch behind Done is the children watch of the read
	// pipelined behind its create (the session's second entry there): an
	// entry coming and going behind it moves the watch onto the entry,
	// which then still closes Done when deleted.
	l, err = c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	l, err = c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	other, err := raw.Create(root+"/d/locks/", []byte("w"), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	require.NoError(t, raw.Delete(other, -1))
	require.NoError(t, l.Check(ctx))
	requireOpen(t, l.Done(), "another entry came and went")
	require.NoError(t, raw.Delete(entryNode(l), -1))
	requireClosed(t, l.Done(), "entry deleted after the queue changed")
	require.ErrorIs(t, l.Unlock(ctx), topo.LockLost)
}

// TestGuardedWrites checks IfHeld with locks: writes while held, LockLost
// (index 0) once released, with a lock of another Conn, and two claims of
// different sessions refused.
func TestGuardedWrites(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	a := openConn(t, []string{testServer}, root)
	b := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	v, err := a.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	la, err := a.Lock(ctx, "d", "a")
	require.NoError(t, err)

	_, err = topo.GuardedUpdate(ctx, a, la, "d/f", []byte("1"), v)
	require.NoError(t, err)
	v, err = topo.GuardedUpdate(ctx, a, la, "d/f", []byte("2"), nil)
	require.NoError(t, err)
	// A claim of another Conn guards a write through this one.
	v, err = topo.GuardedUpdate(ctx, b, la, "d/f", []byte("3"), v)
	require.NoError(t, err)
	_, err = topo.GuardedUpdate(ctx, a, la, "d/f", []byte("x"), topo.NumericVersion(0))
	requireTxnErr(t, err, 1, topo.BadVersion)

	lb, err := b.LockName(ctx, "other", "b")
	require.NoError(t, err)
	_, err = a.Txn(ctx, topo.IfHeld(la), topo.IfHeld(lb), topo.UpdateOp("d/f", nil, nil))
	requireTxnErr(t, err, 1, topo.InvalidArgument)
	require.NoError(t, lb.Unlock(ctx))
	// A claim of a Conn of other server addresses (which could be another
	// ensemble's) guards nothing here.
	p, _ := proxiedConn(t, root)
	lp, err := p.LockName(ctx, "other", "p")
	require.NoError(t, err)
	_, err = topo.GuardedUpdate(ctx, a, lp, "d/f", []byte("x"), nil)
	requireTxnErr(t, err, 0, topo.InvalidArgument)
	require.NoError(t, lp.Unlock(ctx))

	require.NoError(t, la.Unlock(ctx))
	before := fileTree(t, raw, root)
	_, err = topo.GuardedUpdate(ctx, a, la, "d/f", []byte("late"), nil)
	requireTxnErr(t, err, 0, topo.LockLost)
	err = topo.GuardedDelete(ctx, a, la, "d/f", nil)
	requireTxnErr(t, err, 0, topo.LockLost)
	// A released claim after an op that fails: the earlier op is named.
	_, err = a.Txn(ctx, topo.IfVersion("d/f", topo.NumericVersion(99)), topo.IfHeld(la), topo.UpdateOp("d/f", nil, nil))
	requireTxnErr(t, err, 0, topo.BadVersion)
	_, err = a.Txn(ctx, topo.IfPresent("d/f"), topo.IfHeld(la), topo.UpdateOp("d/f", nil, nil))
	requireTxnErr(t, err, 1, topo.LockLost)
	// The same with a claim whose session is over.
	lx, err := b.Lock(ctx, "d", "x")
	require.NoError(t, err)
	expireSession(t, b, testServer)
	_, err = a.Txn(ctx, topo.IfAbsent("d/f"), topo.IfHeld(lx), topo.UpdateOp("d/f", nil, nil))
	requireTxnErr(t, err, 0, topo.NodeExists)
	_, err = a.Txn(ctx, topo.IfAbsent("d/nope"), topo.IfHeld(lx), topo.UpdateOp("d/f", nil, nil))
	requireTxnErr(t, err, 1, topo.LockLost)
	require.Equal(t, before, fileTree(t, raw, root))
	data, got, err := a.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "3", string(data))
	require.Equal(t, v, got)
}

// staleGuardedWrite is the common end of the stale-holder tests: b takes
// the lock that a's la lost, writes under it, and then a's guarded write
// (already issued as pending, or issued now) must fail and leave b's
// value.
func requireOnlySuccessorWrote(t *testing.T, ctx context.Context, b *Conn, staleErr error) {
	t.Helper()
	require.Error(t, staleErr, "the stale holder's guarded write must be refused")
	t.Logf("stale write refused with: %v", staleErr)
	require.False(t, topo.IsErrType(staleErr, topo.InvalidArgument), "refused for the wrong reason: %v", staleErr)
	data, _, err := b.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "successor", string(data), "a stale write was applied")
}

// TestStaleGuardedWriteAfterExpiry is case (a): the holder's session is
// expired by the server, a successor takes the lock, and the old holder's
// guarded write is refused.
func TestStaleGuardedWriteAfterExpiry(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	a := openConn(t, []string{testServer}, root)
	b := openConn(t, []string{testServer}, root)
	_, err := a.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	la, err := a.Lock(ctx, "d", "a")
	require.NoError(t, err)
	expireSession(t, a, testServer)
	lb, err := b.Lock(ctx, "d", "b")
	require.NoError(t, err)
	require.Greater(t, lb.Token(), la.Token())
	_, err = topo.GuardedUpdate(ctx, b, lb, "d/f", []byte("successor"), nil)
	require.NoError(t, err)
	_, staleErr := topo.GuardedUpdate(ctx, a, la, "d/f", []byte("stale"), nil)
	requireTxnErr(t, staleErr, 0, topo.LockLost)
	requireOnlySuccessorWrote(t, ctx, b, staleErr)
	require.NoError(t, lb.Unlock(ctx))
}

// TestStaleGuardedWritePartitioned is case (b): the holder is cut off by a
// partition with its guarded write in flight (held by the partition); the
// server expires its session, the directory is emptied and re-created so
// that the successor's entry has the holder's old entry name, the
// successor writes; then the partition heals and the held write must not
// be applied.
func TestStaleGuardedWritePartitioned(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	a, proxy := proxiedConn(t, root)
	b := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	_, err := a.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	la, err := a.Lock(ctx, "d", "a")
	require.NoError(t, err)
	entryA := entryNode(la)

	proxy.Blackhole()
	stale := make(chan error, 1)
	go func() {
		_, err := topo.GuardedUpdate(ctx, a, la, "d/f", []byte("stale"), nil)
		stale <- err
	}()
	waitNoChildren(t, raw, root+"/d/locks")
	// Empty d (the locks znode goes with it) and re-create it: the
	// successor's entry gets A's old name.
	require.NoError(t, b.Delete(ctx, "d/f", nil))
	_, err = b.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	lb, err := b.Lock(ctx, "d", "b")
	require.NoError(t, err)
	require.Equal(t, entryA, entryNode(lb), "the test needs the successor's entry to have A's old name")
	require.Greater(t, lb.Token(), la.Token())
	_, err = topo.GuardedUpdate(ctx, b, lb, "d/f", []byte("successor"), nil)
	require.NoError(t, err)

	proxy.Heal()
	var staleErr error
	select {
	case staleErr = <-stale:
	case <-time.After(hangGuard):
		t.Fatal("the stale guarded write did not return")
	}
	// A's Conn works again on a new session: its old requests are settled.
	_, _, err = a.Get(ctx, "d/f")
	require.NoError(t, err)
	requireOnlySuccessorWrote(t, ctx, b, staleErr)
	// And one issued now is refused without being sent.
	_, err = topo.GuardedUpdate(ctx, a, la, "d/f", []byte("stale"), nil)
	requireTxnErr(t, err, 0, topo.LockLost)
	requireOnlySuccessorWrote(t, ctx, b, err)
	require.NoError(t, lb.Check(ctx))
	require.NoError(t, lb.Unlock(ctx))
}

// TestStaleGuardedWritePausedHolder is case (c): the holder sends nothing
// (its connection is silent, as if its process were paused) while the
// server ends its session; a successor takes the lock; the holder, before
// it has noticed anything, tries a guarded write at once.
func TestStaleGuardedWritePausedHolder(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	// A long session timeout: the holder's own safety deadline is far away,
	// so it notices nothing by itself.
	a, proxy := proxiedConnOpts(t, root, Options{SessionTimeout: 30 * time.Second})
	b := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	_, err := a.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	la, err := a.Lock(ctx, "d", "a")
	require.NoError(t, err)
	s := a.cur
	id, pw := sessionPassword(t, s.zk)

	proxy.Blackhole()
	taken, err := zktest.TakeOverSession(testServer, id, pw)
	require.NoError(t, err)
	require.NoError(t, taken.Close())
	waitNoChildren(t, raw, root+"/d/locks")
	lb, err := b.Lock(ctx, "d", "b")
	require.NoError(t, err)
	_, err = topo.GuardedUpdate(ctx, b, lb, "d/f", []byte("successor"), nil)
	require.NoError(t, err)

	proxy.Heal()
	_, staleErr := topo.GuardedUpdate(ctx, a, la, "d/f", []byte("stale"), nil)
	_, _, err = a.Get(ctx, "d/f") // settles A's old session
	require.NoError(t, err)
	requireOnlySuccessorWrote(t, ctx, b, staleErr)
	require.NoError(t, lb.Unlock(ctx))
}

// TestElectionTerm checks Term: NotLeader before leading, the candidate
// entry's Czxid as token, greater for each later term whoever leads, Done
// closing when the term ends, and IfHeld guarding on it.
func TestElectionTerm(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	a := openConn(t, []string{testServer}, root)
	b := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	_, err := a.Create(ctx, "f", []byte("0"))
	require.NoError(t, err)

	var last int64
	for i := range 4 {
		c := []*Conn{a, b}[i%2]
		p, err := c.NewLeaderParticipation("e", []string{"a", "b"}[i%2])
		require.NoError(t, err)
		_, err = p.Term()
		require.ErrorIs(t, err, topo.NotLeader)
		_, err = p.WaitForLeadership()
		require.NoError(t, err)
		tm, err := p.Term()
		require.NoError(t, err)
		again, err := p.Term()
		require.NoError(t, err)
		require.Same(t, tm, again, "one Fence per term")
		_, st, err := raw.Exists(entryNode(tm))
		require.NoError(t, err)
		require.Equal(t, st.Czxid, tm.Token())
		require.Greater(t, tm.Token(), last)
		last = tm.Token()
		require.NoError(t, tm.Check(ctx))
		requireOpen(t, tm.Done(), "leading")
		_, err = topo.GuardedUpdate(ctx, c, tm, "f", []byte{byte('0' + i)}, nil)
		require.NoError(t, err)
		if i == 2 {
			// Lose the tm to a session expiry instead of Stop.
			expireSession(t, c, testServer)
			requireClosed(t, tm.Done(), "expiry")
			require.ErrorIs(t, tm.Check(ctx), topo.LockLost)
		}
		p.Stop()
		requireClosed(t, tm.Done(), "Stop")
		_, err = p.Term()
		require.ErrorIs(t, err, topo.NotLeader)
		_, err = topo.GuardedUpdate(ctx, c, tm, "f", []byte("late"), nil)
		requireTxnErr(t, err, 0, topo.LockLost)
	}
	data, _, err := a.Get(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "3", string(data))
}

// TestTokensIncreaseAcrossFaults hands a lock and an election over many
// times between three Conns on a three-node ensemble, mixing in session
// expiries, Conn restarts and a rolling restart of every node (the
// leader's restart starts a new epoch): every token is greater than every
// earlier one.
func TestTokensIncreaseAcrossFaults(t *testing.T) {
	e := zktest.StartEnsemble(t, 3)
	ctx := txnCtx(t)
	root := freshRoot(t)
	open := func() *Conn {
		c, err := NewConn(Options{Servers: e.Addrs(), SessionTimeout: faultySessionTimeout}, root)
		require.NoError(t, err)
		return c
	}
	conns := []*Conn{open(), open(), open()}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	_, err := conns[0].Create(ctx, "d/f", nil)
	require.NoError(t, err)
	var lastLock, lastTerm int64
	for round := range 12 {
		i := round % 3
		c := conns[i]
		l, err := c.Lock(ctx, "d", "x")
		require.NoError(t, err)
		require.Greater(t, l.Token(), lastLock, "round %d", round)
		lastLock = l.Token()
		p, err := c.NewLeaderParticipation("e", "x")
		require.NoError(t, err)
		_, err = p.WaitForLeadership()
		require.NoError(t, err)
		tm, err := p.Term()
		require.NoError(t, err)
		require.Greater(t, tm.Token(), lastTerm, "round %d", round)
		lastTerm = tm.Token()

		switch round % 4 {
		case 0: // the session expires under the holder and the leader
			s, err := c.session("")
			require.NoError(t, err)
			id, pw := sessionPassword(t, s.zk)
			// Any member can close the session; one that is still
			// catching up after its restart may refuse to reattach it.
			k := 0
			require.Eventually(t, func() bool {
				select {
				case <-l.Done():
					return true
				default:
				}
				_ = zktest.ExpireSession(e.Addr(k%3), id, pw)
				k++
				return false
			}, hangGuard, 50*time.Millisecond, "could not expire the session")
			requireClosed(t, l.Done(), "expired lock")
			requireClosed(t, tm.Done(), "expired tm")
			p.Stop()
		case 1: // the Conn restarts
			c.Close()
			requireClosed(t, l.Done(), "closed lock")
			conns[i] = open()
		case 2: // a node restarts (every node once over the test)
			require.NoError(t, l.Unlock(ctx))
			p.Stop()
			n := (round / 4) % 3
			e.Stop(n)
			e.Restart(n)
		default:
			require.NoError(t, l.Unlock(ctx))
			p.Stop()
		}
	}
	leader := e.WaitLeader(zktest.StartTimeout)
	e.Stop(leader)
	e.Restart(leader)
	l, err := conns[0].Lock(ctx, "d", "x")
	require.NoError(t, err)
	require.Greater(t, l.Token(), lastLock)
	require.NoError(t, l.Unlock(ctx))
}

// TestDeletedEntryNameReused deletes a holder's lock entry behind its back
// and lets the name be used again (the empty "locks" znode removed, so
// its sequence restarts): first by a new lock of the same session, then
// by another Conn's. The old descriptor's guarded write and Unlock must
// fail with LockLost and leave the new holder's entry alone.
func TestDeletedEntryNameReused(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	a := openConn(t, []string{testServer}, root)
	b := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	_, err := a.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	locks := root + "/d/locks"

	la, err := a.Lock(ctx, "d", "a1")
	require.NoError(t, err)
	entry := entryNode(la)
	require.NoError(t, raw.Delete(entry, -1))
	deleteLocksZnode(t, raw, locks)
	// The same session takes the lock again, under the same name; la's
	// watch may not have fired yet.
	lb, err := a.Lock(ctx, "d", "a2")
	require.NoError(t, err)
	require.Equal(t, entry, entryNode(lb), "the test needs the name reused")
	_, err = topo.GuardedUpdate(ctx, a, la, "d/f", []byte("stale"), nil)
	requireTxnErr(t, err, 0, topo.LockLost)
	require.ErrorIs(t, la.Unlock(ctx), topo.LockLost)
	require.NoError(t, lb.Check(ctx), "la's Unlock must not delete lb's entry")
	_, err = topo.GuardedUpdate(ctx, a, lb, "d/f", []byte("lb"), nil)
	require.NoError(t, err)

	// Now another Conn gets the name, once lb's watch saw its entry go.
	require.NoError(t, raw.Delete(entry, -1))
	requireClosed(t, lb.Done(), "entry deleted")
	deleteLocksZnode(t, raw, locks)
	lc, err := b.Lock(ctx, "d", "b")
	require.NoError(t, err)
	require.Equal(t, entry, entryNode(lc), "the test needs the name reused")
	_, err = topo.GuardedUpdate(ctx, a, lb, "d/f", []byte("stale"), nil)
	requireTxnErr(t, err, 0, topo.LockLost)
	require.ErrorIs(t, lb.Unlock(ctx), topo.LockLost)
	require.NoError(t, lc.Check(ctx), "lb's Unlock must not delete lc's entry")
	data, _, err := b.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "lb", string(data))
	require.NoError(t, lc.Unlock(ctx))
}

// deleteLocksZnode deletes the empty "locks" container zp, unless the
// server's container check removed it first.
func deleteLocksZnode(t *testing.T, raw *zk.Conn, zp string) {
	t.Helper()
	if err := raw.Delete(zp, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		require.NoError(t, err)
	}
}
