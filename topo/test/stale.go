package test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// The Stale subtests: a holder whose claim (lock or leadership term) the
// store dropped has every guarded write refused with LockLost, and nothing
// of them reaches the store, while its successor's guarded writes succeed.

// staleFixture is the store content the Stale subtests guard: d/f (so
// that d can be locked), d/data and other/x.
type staleFixture struct {
	reader topo.Conn // a Conn that never holds anything, to read back
}

func newStaleFixture(t *testing.T, ctx context.Context, reader topo.Conn) *staleFixture {
	mustCreate(t, ctx, reader, "d/f", "x")
	mustCreate(t, ctx, reader, "d/data", "v0")
	mustCreate(t, ctx, reader, "other/x", "x0")
	return &staleFixture{reader: reader}
}

// guardedWrites writes through c, guarded by f, and requires every write
// to succeed; it returns the contents d/data then holds.
func (fx *staleFixture) guardedWrites(t *testing.T, ctx context.Context, c topo.Conn, f topo.Fence, tag string) {
	t.Helper()
	_, v, err := fx.reader.Get(ctx, "d/data")
	require.NoError(t, err)
	nv, err := topo.GuardedUpdate(ctx, c, f, "d/data", []byte(tag), v)
	require.NoErrorf(t, err, "%s: GuardedUpdate of d/data by the holder", tag)
	requireFile(t, ctx, fx.reader, "d/data", tag, nv)
	vs, err := c.Txn(ctx, topo.IfPresent("d/data"), topo.IfHeld(f), topo.UpdateOp("other/x", []byte(tag), nil),
		topo.CreateOp("held/"+tag, []byte(tag)))
	require.NoErrorf(t, err, "%s: a Txn guarded by IfHeld by the holder", tag)
	require.Len(t, vs, 4)
	requireFile(t, ctx, fx.reader, "other/x", tag, vs[2])
	requireFile(t, ctx, fx.reader, "held/"+tag, tag, vs[3])
	require.NoError(t, topo.GuardedDelete(ctx, c, f, "held/"+tag, vs[3]), "%s: GuardedDelete by the holder", tag)
	requireNoFile(t, ctx, fx.reader, "held/"+tag)
}

// requireStaleRefused makes every kind of guarded write through c with
// the stale claim f and requires each to be refused with LockLost, named
// at the IfHeld op's index; transient errors (a Conn reconnecting after a
// partition) are retried. It then reads back every file: the store must
// be exactly as before the attempts.
func (fx *staleFixture) requireStaleRefused(t *testing.T, ctx context.Context, c topo.Conn, f topo.Fence, what string) {
	t.Helper()
	before := takeSnapshot(t, ctx, fx.reader)
	_, cur, err := fx.reader.Get(ctx, "d/data")
	require.NoError(t, err)
	attempts := []struct {
		name  string
		index int
		call  func() error
	}{
		{"GuardedUpdate without a version", 0, func() error {
			_, err := topo.GuardedUpdate(ctx, c, f, "d/data", []byte("stale"), nil)
			return err
		}},
		{"GuardedUpdate with the current version", 0, func() error {
			_, err := topo.GuardedUpdate(ctx, c, f, "d/data", []byte("stale"), cur)
			return err
		}},
		{"GuardedUpdate creating a file", 0, func() error {
			_, err := topo.GuardedUpdate(ctx, c, f, "stale/new", []byte("stale"), nil)
			return err
		}},
		{"GuardedDelete", 0, func() error { return topo.GuardedDelete(ctx, c, f, "other/x", nil) }},
		{"GuardedDelete with the current version", 0, func() error { return topo.GuardedDelete(ctx, c, f, "d/data", cur) }},
		{"Txn with IfHeld second", 1, func() error {
			_, err := c.Txn(ctx, topo.IfPresent("d/data"), topo.IfHeld(f), topo.CreateOp("stale/created", []byte("stale")),
				topo.UpdateOp("other/x", []byte("stale"), nil))
			return err
		}},
		{"Txn with IfHeld last", 3, func() error {
			_, err := c.Txn(ctx, topo.CreateOp("stale/c2", []byte("stale")), topo.DeleteOp("d/data", nil),
				topo.UpdateOp("other/x", []byte("stale"), nil), topo.IfHeld(f))
			return err
		}},
	}
	for _, a := range attempts {
		err := retryTransient(ctx, a.call)
		require.Errorf(t, err, "%s: %s by the stale holder was ACCEPTED: a stale write reached the store", what, a.name)
		requireTxnErr(t, err, a.index, topo.LockLost, fmt.Sprintf("%s: %s by the stale holder", what, a.name))
	}
	requireSameSnapshot(t, ctx, fx.reader, before, what+": refused stale writes")
	for _, p := range []string{"stale/new", "stale/created", "stale/c2"} {
		requireNoFile(t, ctx, fx.reader, p)
	}
}

// testStaleAfterSessionLoss: a holder of lock d and of a leadership term
// makes guarded writes; the store drops its session (ExpireSession); every
// guarded write with either claim is refused with LockLost, before and
// after successors on another Conn took over, and writes nothing; the
// successors' guarded writes succeed.
func testStaleAfterSessionLoss(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2 := s.conn(), s.conn()
	fx := newStaleFixture(t, ctx, s.conn())

	l1 := mustLock(t, ctx, c1, "d", "holder")
	p1 := participate(t, c1, "elec", "leader")
	_, err := p1.WaitForLeadership()
	require.NoError(t, err)
	term1, err := p1.Term()
	require.NoError(t, err)
	fx.guardedWrites(t, ctx, c1, l1, "by-lock")
	fx.guardedWrites(t, ctx, c1, term1, "by-term")

	s.opts.ExpireSession(t, c1)
	fx.requireStaleRefused(t, ctx, c1, l1, "the lock after ExpireSession")
	fx.requireStaleRefused(t, ctx, c1, term1, "the term after ExpireSession")

	l2 := mustLock(t, ctx, c2, "d", "successor")
	p2 := participate(t, c2, "elec", "next leader")
	_, err = p2.WaitForLeadership()
	require.NoError(t, err)
	term2, err := p2.Term()
	require.NoError(t, err)
	fx.requireStaleRefused(t, ctx, c1, l1, "the lock once a successor holds it")
	fx.requireStaleRefused(t, ctx, c1, term1, "the term once a successor leads")
	fx.guardedWrites(t, ctx, c2, l2, "by-next-lock")
	fx.guardedWrites(t, ctx, c2, term2, "by-next-term")
	fx.requireStaleRefused(t, ctx, c1, l1, "the lock after the successor's writes")
	fx.requireStaleRefused(t, ctx, c1, term1, "the term after the successor's writes")
	require.NoError(t, l2.Unlock(ctx))
	fx.requireStaleRefused(t, ctx, c2, l2, "a lock released by Unlock")
	p2.Stop()
	fx.requireStaleRefused(t, ctx, c2, term2, "a term ended by Stop")
}

// stalePartition runs the partition variants: a holder of lock d and of a
// term, on a Conn that is then cut off until successors on another Conn
// hold both; after the partition heals, the stale holder's guarded writes
// are refused and write nothing. When paused, the stale holder's very
// first call after the heal is a guarded write (it had no chance to
// notice anything); otherwise the suite first checks that the holder's
// Done channels closed while it was still cut off, and waits for its Check
// to report LockLost after the heal.
func stalePartition(s *store, paused bool) {
	t, ctx := s.t, ctxFor(s.t)
	p := s.partitioned()
	c2 := s.conn()
	fx := newStaleFixture(t, ctx, s.conn())

	l1, err := p.Conn.Lock(ctx, "d", "cut-off holder")
	require.NoError(t, err)
	p1 := participate(t, p.Conn, "elec", "cut-off leader")
	_, err = p1.WaitForLeadership()
	require.NoError(t, err)
	term1, err := p1.Term()
	require.NoError(t, err)
	fx.guardedWrites(t, ctx, p.Conn, l1, "by-lock")
	fx.guardedWrites(t, ctx, p.Conn, term1, "by-term")

	wctx := s.partitionCtx()
	gotLock := lockAsync(t, func() (topo.LockDescriptor, error) { return c2.Lock(wctx, "d", "successor") })
	p2 := participate(t, c2, "elec", "next leader")
	gotLead := leadAsync(p2)
	requireNothing(t, gotLock, "a second Lock while the first is held")
	requireDoneOpen(t, l1, "Done of a held lock while a successor waits")
	requireDoneOpen(t, term1, "Done of a leading term while a successor waits")

	p.Cut()
	rl := recvWithin(t, gotLock, s.opts.SessionBound+longWait, "the successor's Lock after the holder was cut off")
	require.NoError(t, rl.err)
	rp := recvWithin(t, gotLead, s.opts.SessionBound+longWait, "the successor's WaitForLeadership after the leader was cut off")
	require.NoError(t, rp.err)
	term2, err := p2.Term()
	require.NoError(t, err)
	requireDoneOpen(t, rl.l, "the successor's lock")
	requireDoneOpen(t, term2, "the successor's term")
	if !paused {
		// Done of the cut-off holder's claims closes once the successors
		// hold them, while the holder is still cut off. (The paused
		// holder is not watched: its first act is a write.)
		requireDoneClosed(t, l1, "the cut-off holder's Done once the successor holds the lock")
		requireDoneClosed(t, term1, "the cut-off leader's term's Done once the successor leads")
	}
	before := takeSnapshot(t, ctx, fx.reader)
	p.Heal()

	if paused {
		// The first call after the heal: a guarded write at once.
		_, err := topo.GuardedUpdate(ctx, p.Conn, l1, "d/data", []byte("paused stale write"), nil)
		requireTxnErr(t, retryAfter(ctx, err, func() error {
			_, err := topo.GuardedUpdate(ctx, p.Conn, l1, "d/data", []byte("paused stale write"), nil)
			return err
		}), 0, topo.LockLost, "the paused holder's first GuardedUpdate after the heal")
		_, err = topo.GuardedUpdate(ctx, p.Conn, term1, "other/x", []byte("paused stale write"), nil)
		requireTxnErr(t, retryAfter(ctx, err, func() error {
			_, err := topo.GuardedUpdate(ctx, p.Conn, term1, "other/x", []byte("paused stale write"), nil)
			return err
		}), 0, topo.LockLost, "the paused leader's GuardedUpdate after the heal")
		requireSameSnapshot(t, ctx, fx.reader, before, "the paused holder's stale writes")
	} else {
		requireLostAfterHeal(t, ctx, l1, "the cut-off holder")
	}
	fx.requireStaleRefused(t, ctx, p.Conn, l1, "the cut-off holder's lock after the heal")
	fx.requireStaleRefused(t, ctx, p.Conn, term1, "the cut-off leader's term after the heal")
	fx.guardedWrites(t, ctx, c2, rl.l, "by-next-lock")
	fx.guardedWrites(t, ctx, c2, term2, "by-next-term")
	fx.requireStaleRefused(t, ctx, p.Conn, l1, "the cut-off holder's lock after the successor's writes")
	fx.requireStaleRefused(t, ctx, p.Conn, term1, "the cut-off leader's term after the successor's writes")
	require.NoError(t, rl.l.Unlock(ctx))
}

// retryAfter returns err unless it is transient, in which case it retries
// call (see retryTransient).
func retryAfter(ctx context.Context, err error, call func() error) error {
	if !retryable(err) {
		return err
	}
	return retryTransient(ctx, call)
}

// testStaleAfterPartition: see stalePartition (not paused).
func testStaleAfterPartition(s *store) { stalePartition(s, false) }

// testStalePaused: see stalePartition (paused).
func testStalePaused(s *store) { stalePartition(s, true) }
