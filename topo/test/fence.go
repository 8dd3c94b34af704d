package test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// The Fence subtests: fencing tokens of locks and leadership terms, Done,
// and LeaderParticipation.Term.

// lockKind is one way of taking a lock on a directory.
type lockKind struct {
	name string
	lock func(ctx context.Context, c topo.Conn, dir, who string) (topo.LockDescriptor, error)
}

// lockKinds are the four lock calls. They all lock the same thing: the
// directory's one lock, whichever call took it.
var lockKinds = []lockKind{
	{"Lock", func(ctx context.Context, c topo.Conn, dir, who string) (topo.LockDescriptor, error) {
		return c.Lock(ctx, dir, who)
	}},
	{"TryLock", func(ctx context.Context, c topo.Conn, dir, who string) (topo.LockDescriptor, error) {
		return c.TryLock(ctx, dir, who)
	}},
	{"LockWithTTL", func(ctx context.Context, c topo.Conn, dir, who string) (topo.LockDescriptor, error) {
		return c.LockWithTTL(ctx, dir, who, time.Minute)
	}},
	{"LockName", func(ctx context.Context, c topo.Conn, dir, who string) (topo.LockDescriptor, error) {
		return c.LockName(ctx, dir, who)
	}},
}

// requireDoneOpen fails t unless f's Done channel is non-nil and not
// closed right now: the claim has not ended, so Done must not have closed.
func requireDoneOpen(t testing.TB, f topo.Fence, what string) {
	t.Helper()
	ch := f.Done()
	require.NotNilf(t, ch, "%s: Done returned a nil channel (it could never close)", what)
	select {
	case <-ch:
		require.FailNowf(t, "Done closed early", "%s: Done is closed while the claim is held", what)
	default:
	}
}

// requireDoneClosedNow fails t unless f's Done channel is closed right
// now (after Unlock or Stop returned, which close it).
func requireDoneClosedNow(t testing.TB, f topo.Fence, what string) {
	t.Helper()
	ch := f.Done()
	require.NotNilf(t, ch, "%s: Done returned a nil channel", what)
	select {
	case <-ch:
	default:
		require.FailNowf(t, "Done not closed", "%s: Done is not closed", what)
	}
}

// requireDoneClosed fails t unless f's Done channel closes within
// longWait (the backend learns of a dropped claim with some delay).
func requireDoneClosed(t testing.TB, f topo.Fence, what string) {
	t.Helper()
	ch := f.Done()
	require.NotNilf(t, ch, "%s: Done returned a nil channel", what)
	select {
	case <-ch:
	case <-time.After(longWait):
		require.FailNowf(t, "Done not closed", "%s: Done not closed within %v", what, longWait)
	}
}

// tokenLog records the fencing tokens of the successive holders of one
// lock (or the successive terms of one election) and checks each new one.
type tokenLog struct {
	what   string
	tokens []int64
	fences []topo.Fence
}

// add checks f's token (positive, greater than every earlier holder's)
// and records it.
func (l *tokenLog) add(t testing.TB, f topo.Fence, who string) {
	t.Helper()
	tok := f.Token()
	require.Positivef(t, tok, "%s: %s's fencing token", l.what, who)
	for i, prev := range l.tokens {
		require.Greaterf(t, tok, prev, "%s: %s's token %d is not greater than that of holder %d of %d (%d): tokens %v",
			l.what, who, tok, i, len(l.tokens), prev, l.tokens)
	}
	l.tokens = append(l.tokens, tok)
	l.fences = append(l.fences, f)
}

// requireFixed fails t unless every recorded Fence still reports the token
// it had when it was recorded (tokens are fixed for the claim's life and
// after).
func (l *tokenLog) requireFixed(t testing.TB) {
	t.Helper()
	for i, f := range l.fences {
		require.Equalf(t, l.tokens[i], f.Token(), "%s: holder %d's token changed", l.what, i)
	}
}

// retryable reports whether err says that the call could not reach the
// store (Unavailable, or a Timeout of the backend's own): its outcome is
// unknown and it may be retried.
func retryable(err error) bool {
	return topo.IsErrType(err, topo.Unavailable) || topo.IsErrType(err, topo.Timeout)
}

// retryTransient runs call until it returns nil or an error that is not
// retryable, or longWait passes; it returns the last error. It is for
// calls against a store recovering from its fault, or through a Conn
// reconnecting after a partition.
func retryTransient(ctx context.Context, call func() error) error {
	deadline := time.Now().Add(longWait)
	for {
		err := call()
		if !retryable(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		<-time.After(poll) // the polling interval of this retry loop
	}
}

// lockRetry takes the lock on dir with kind, polling TryLock while it
// reports NodeExists (a store may keep a dropped lock for a moment, e.g.
// Consul's lock-delay) and, when transientOK, retrying transient errors.
func lockRetry(t testing.TB, ctx context.Context, c topo.Conn, kind lockKind, dir, who string, transientOK bool) topo.LockDescriptor {
	t.Helper()
	deadline := time.Now().Add(longWait)
	for {
		l, err := kind.lock(ctx, c, dir, who)
		if err == nil {
			return l
		}
		retry := (kind.name == "TryLock" && topo.IsErrType(err, topo.NodeExists)) || (transientOK && transient(err))
		require.Truef(t, retry, "%s(%q) by %s: %v", kind.name, dir, who, err)
		require.Truef(t, time.Now().Before(deadline), "%s(%q) by %s: still failing after %v: %v", kind.name, dir, who, longWait, err)
		<-time.After(poll) // the polling interval of this poll-until
	}
}

// testFenceTokens: one lock directory is handed over many times between
// several Conns, with every lock call (Lock, TryLock, LockWithTTL,
// LockName), to queued waiters and to fresh callers, ending by Unlock or
// by ExpireSession: every holder's token is positive, fixed, and greater
// than every earlier holder's; Done is open while the lock is held and
// closed once it ends (at once after Unlock).
func testFenceTokens(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	const nConns, rounds = 4, 24
	conns := s.conns(nConns)
	mustCreate(t, ctx, conns[0], "tok/f", "x")
	log := &tokenLog{what: "the holders of lock tok"}

	var waiter <-chan lockResult // a Lock queued behind the current holder
	waiterConn := 0              // the index of the waiter's Conn
	expired := false             // the last holder ended by session loss
	for r := range rounds {
		ci := (r*3 + r/nConns) % nConns
		kind := lockKinds[r%len(lockKinds)]
		who := fmt.Sprintf("round %d: %s on conn %d", r, kind.name, ci)
		var l topo.LockDescriptor
		if waiter != nil {
			res, _ := recv(t, waiter, "the queued Lock after the holder ended")
			require.NoErrorf(t, res.err, "%s: the queued Lock", who)
			ci = waiterConn
			l, who = res.l, fmt.Sprintf("round %d: a queued Lock on conn %d", r, ci)
			waiter = nil
		} else if expired && kind.name == "TryLock" {
			l = lockRetry(t, ctx, conns[ci], kind, "tok", who, false)
		} else {
			var err error
			l, err = kind.lock(ctx, conns[ci], "tok", who)
			require.NoErrorf(t, err, "%s", who)
		}
		unlockOnCleanup(t, l)
		log.add(t, l, who)
		requireDoneOpen(t, l, who+": right after the lock was taken")
		require.NoError(t, l.Check(ctx), who)

		// Every third round, queue a Lock behind the holder: it gets the
		// lock next.
		if r%3 == 1 {
			waiterConn = (ci + 1) % nConns
			wc := conns[waiterConn]
			waiter = lockAsync(t, func() (topo.LockDescriptor, error) { return wc.Lock(ctx, "tok", "waiter") })
			requireNothing(t, waiter, who+": a Lock queued behind the holder")
		}
		requireDoneOpen(t, l, who+": while held")

		expired = r%5 == 3
		if expired {
			s.opts.ExpireSession(t, conns[ci])
			requireDoneClosed(t, l, who+": Done after ExpireSession")
			requireCode(t, l.Check(ctx), topo.LockLost, who+": Check after ExpireSession")
			// The suite does not use a Conn whose session it dropped.
			conns[ci] = s.conn()
		} else {
			require.NoErrorf(t, l.Unlock(ctx), "%s: Unlock", who)
			requireDoneClosedNow(t, l, who+": Done after Unlock returned")
		}
		log.requireFixed(t)
	}
	if waiter != nil {
		res, _ := recv(t, waiter, "the last queued Lock")
		require.NoError(t, res.err)
		log.add(t, res.l, "the last queued Lock")
		require.NoError(t, res.l.Unlock(ctx))
	}
	log.requireFixed(t)
}

// testFenceTokensUnderFault: on the backend's FaultyStore, a lock is
// handed over between Conns before and after the store's fault (with the
// lock held while the fault strikes): tokens keep increasing across it.
// Calls may fail transiently around the fault and are retried.
func testFenceTokensUnderFault(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	fs := s.faultStore()
	open := faultOpener(t, fs.Open)
	const nConns, rounds = 3, 12
	conns := make([]topo.Conn, nConns)
	for i := range conns {
		conns[i] = open()
	}
	require.NoError(t, retryTransient(ctx, func() error {
		_, err := conns[0].Create(ctx, "tok/f", []byte("x"))
		if topo.IsErrType(err, topo.NodeExists) {
			return nil
		}
		return err
	}))
	log := &tokenLog{what: "the holders of lock tok across the store's fault"}
	elog := &tokenLog{what: "the terms of election tok across the store's fault"}
	for r := range rounds {
		ci := r % nConns
		kind := lockKinds[r%len(lockKinds)]
		who := fmt.Sprintf("round %d: %s on conn %d", r, kind.name, ci)
		l := lockRetry(t, ctx, conns[ci], kind, "tok", who, true)
		unlockOnCleanup(t, l)
		log.add(t, l, who)

		var p topo.LeaderParticipation
		var term topo.Fence
		require.NoError(t, retryTransient(ctx, func() error {
			// A candidate whose WaitForLeadership failed withdraws, and a
			// new one runs.
			if p != nil {
				p.Stop()
			}
			p = participate(t, conns[(ci+1)%nConns], "tok", fmt.Sprintf("id%d", r))
			if _, err := p.WaitForLeadership(); err != nil {
				if transient(err) {
					// The candidate lost its session to the fault.
					return topo.NewError(topo.Unavailable, "")
				}
				return err
			}
			var err error
			term, err = p.Term()
			if topo.IsErrType(err, topo.NotLeader) {
				// The term ended already (the fault): try again.
				return topo.NewError(topo.Unavailable, "")
			}
			return err
		}), "%s: a leadership term", who)
		elog.add(t, term, who)

		if r == rounds/2 {
			fs.Fault(t)
		}
		// The claims may have ended with the fault; a release then
		// reports LockLost (or a transient error).
		if err := retryTransient(ctx, func() error { return l.Unlock(ctx) }); err != nil {
			// LockLost: the store dropped it; Interrupted: an earlier
			// attempt that reported a transient error released it.
			requireOneOf(t, err, who+": Unlock around the store's fault", topo.LockLost, topo.Interrupted)
		}
		requireDoneClosed(t, l, who+": Done after Unlock")
		p.Stop()
		requireDoneClosed(t, term, who+": the term's Done after Stop")
	}
	log.requireFixed(t)
	elog.requireFixed(t)
}

// requireNotLeader fails t unless p.Term() returns a NotLeader *Error.
func requireNotLeader(t testing.TB, p topo.LeaderParticipation, what string) {
	t.Helper()
	f, err := p.Term()
	requireCode(t, err, topo.NotLeader, what)
	require.Nilf(t, f, "%s: Term returned a Fence with its NotLeader error", what)
}

// testFenceTerms: the terms of one election, led in turn by participants
// on several Conns (by handover to a queued candidate, and by fresh
// candidates), ending by Stop or by ExpireSession: Term is NotLeader
// before leading, while another leads and after Stop; while leading it
// returns the same Fence (same token, same Done) every time, whose token
// is positive and greater than every earlier term's, and whose Done is
// open while leading and closed once the term ends.
func testFenceTerms(s *store) {
	t := s.t
	const nConns, rounds = 3, 12
	conns := s.conns(nConns)
	log := &tokenLog{what: "the terms of election term"}

	var next topo.LeaderParticipation // a queued candidate
	var nextGot <-chan leadResult
	for r := range rounds {
		ci := r % nConns
		who := fmt.Sprintf("round %d: conn %d", r, ci)
		p, got := next, nextGot
		if p == nil {
			p = participate(t, conns[ci], "term", fmt.Sprintf("id%d", r))
			requireNotLeader(t, p, who+": Term before WaitForLeadership")
			got = leadAsync(p)
		}
		res, _ := recv(t, got, who+": WaitForLeadership")
		require.NoError(t, res.err, who)
		next, nextGot = nil, nil
		term, err := p.Term()
		require.NoErrorf(t, err, "%s: Term while leading", who)
		require.NotNil(t, term, who)
		log.add(t, term, who)
		requireDoneOpen(t, term, who+": the term's Done while leading")

		if r%2 == 0 {
			// A queued candidate: Term is NotLeader while it waits.
			nc := conns[(ci+1)%nConns]
			next = participate(t, nc, "term", fmt.Sprintf("next%d", r))
			nextGot = leadAsync(next)
			requireNothing(t, nextGot, who+": a queued candidate's WaitForLeadership")
			requireNotLeader(t, next, who+": Term of a queued candidate")
		}
		again, err := p.Term()
		require.NoErrorf(t, err, "%s: Term again while leading", who)
		require.Equalf(t, term.Token(), again.Token(), "%s: Term returned another token within one term", who)
		require.Truef(t, term.Done() == again.Done(), "%s: Term returned another Done channel within one term", who)
		require.NoError(t, res.ctx.Err(), who)
		requireDoneOpen(t, term, who+": the term's Done while leading")

		if r%4 == 3 {
			s.opts.ExpireSession(t, conns[ci])
			requireDoneClosed(t, term, who+": the term's Done after ExpireSession")
			requireLeadershipGone(t, res.ctx, who+": after ExpireSession")
			// Term is NotLeader, or a later term if the participant
			// rejoined and leads again.
			if f, err := p.Term(); err == nil {
				require.Greaterf(t, f.Token(), term.Token(), "%s: Term after the session loss returned an old term", who)
			} else {
				requireCode(t, err, topo.NotLeader, who+": Term after ExpireSession")
			}
			p.Stop()
			conns[ci] = s.conn()
		} else {
			p.Stop()
			requireDoneClosedNow(t, term, who+": the term's Done after Stop returned")
		}
		requireNotLeader(t, p, who+": Term after Stop")
		log.requireFixed(t)
	}
	if next != nil {
		res, _ := recv(t, nextGot, "the last queued candidate")
		require.NoError(t, res.err)
		term, err := next.Term()
		require.NoError(t, err)
		log.add(t, term, "the last queued candidate")
		next.Stop()
	}
	log.requireFixed(t)
}

// testFenceDone: Done stays open for as long as the claim is held (the
// suite watches it while other Conns contend), and closes when it ends:
// at once on Unlock and Stop, and after ExpireSession. (After a partition
// once the successor holds: Stale/AfterPartition.)
func testFenceDone(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2 := s.conn(), s.conn()
	mustCreate(t, ctx, c1, "d/f", "x")

	// Unlock.
	l := mustLock(t, ctx, c1, "d", "holder")
	requireDoneOpen(t, l, "a held lock")
	_, err := c2.TryLock(shortCtx(t, promptWait), "d", "other")
	requireCode(t, err, topo.NodeExists, "TryLock while held")
	requireNothing(t, l.Done(), "Done of a held lock")
	_, err = c2.Lock(shortCtx(t, shortWait), "d", "other")
	requireCode(t, err, topo.Timeout, "Lock while held")
	requireDoneOpen(t, l, "a held lock after a contender gave up")
	require.NoError(t, l.Unlock(ctx))
	requireDoneClosedNow(t, l, "Done after Unlock returned")
	requireCode(t, l.Unlock(ctx), topo.Interrupted, "a second Unlock")
	requireDoneClosedNow(t, l, "Done after a second Unlock")

	// Stop.
	p := participate(t, c1, "elec", "leader")
	_, err = p.WaitForLeadership()
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)
	p2 := participate(t, c2, "elec", "candidate")
	got := leadAsync(p2)
	requireNothing(t, term.Done(), "Done of a leading term")
	requireNothing(t, got, "a second candidate while the first leads")
	p.Stop()
	requireDoneClosedNow(t, term, "the term's Done after Stop returned")
	r, _ := recv(t, got, "the second candidate after the leader stopped")
	require.NoError(t, r.err)
	term2, err := p2.Term()
	require.NoError(t, err)
	requireDoneOpen(t, term2, "the next term")

	// Session loss.
	c3 := s.conn()
	l3 := mustLock(t, ctx, c3, "d", "to be expired")
	requireNothing(t, l3.Done(), "Done of a held lock")
	s.opts.ExpireSession(t, c3)
	requireDoneClosed(t, l3, "Done after ExpireSession")
	requireDoneOpen(t, term2, "a term on another Conn after ExpireSession")
	s.opts.ExpireSession(t, c2)
	requireDoneClosed(t, term2, "the term's Done after ExpireSession")
}

// requireTxnErr fails t unless err is a *topo.TxnError (found with
// errors.As) naming op index, wrapping a *topo.Error with code.
func requireTxnErr(t testing.TB, err error, index int, code topo.ErrorCode, what string) {
	t.Helper()
	require.Errorf(t, err, "%s: want a transaction error at op %d with %q, got nil", what, index, code)
	var te *topo.TxnError
	require.Truef(t, errors.As(err, &te), "%s: error %q (%T) is not a *topo.TxnError", what, err, err)
	require.Equalf(t, index, te.Index, "%s: the failing op's index (error %q)", what, err)
	requireCode(t, err, code, what)
}
