package claims

import (
	"context"
	"errors"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// removeGrace bounds the removal of an entry whose caller's context has
// ended (a waiter giving up, Resign with a cancelled ctx).
const removeGrace = 5 * time.Second

// errEntryGone is the cause when a waiter's own entry vanished from its
// queue: the store dropped it with its session.
var errEntryGone = errors.New("claims: the entry left its queue while waiting")

// errSessionLost is the cause when a waiter's session was declared lost
// (waitSignaled).
var errSessionLost = errors.New("claims: the session was lost while waiting")

// create adds an entry to q (Driver.Create) and returns its claim, live
// and new. A *BusyError becomes TryLock's NodeExists naming the holder
// (backendkit.LockHeld).
func (e *Engine) create(ctx context.Context, q Queue, contents string, opts CreateOptions, cancel context.CancelCauseFunc) (*claim, error) {
	var ent Entry
	s, err := e.createEntry(ctx, q, contents, opts, &ent)
	if err != nil {
		return nil, err
	}
	cl := &claim{}
	cl.init(e, q, &ent, s, cancel, true)
	return cl, nil
}

// createEntry is create's request: Driver.Create once the engine is
// not closed, its entry stored in *ent (not returned: an Entry is large,
// and a lock's path copies it once), its error mapped as create says.
func (e *Engine) createEntry(ctx context.Context, q Queue, contents string, opts CreateOptions, ent *Entry) (*Session, error) {
	if err := e.closedErr(q.Path); err != nil {
		return nil, err
	}
	var s *Session
	var err error
	*ent, s, err = e.d.Create(ctx, q, contents, opts)
	if err != nil {
		return nil, e.createErr(ctx, q, err)
	}
	return s, nil
}

// createErr maps err, a Create's error, as create says.
func (e *Engine) createErr(ctx context.Context, q Queue, err error) error {
	if be, ok := errors.AsType[*BusyError](err); ok {
		return backendkit.LockHeld(q.Path, []byte(be.Head.Contents), be.Head.Session)
	}
	return e.d.MapError(ctx, err, q.Path)
}

// await blocks until cl's entry heads its queue, waiting for ONE entry at a
// time: the one just ahead of it (wait, or waitSignaled on a
// GoneSignaler), listing the queue again when that one goes only if the
// last list showed more ahead. When the wait ends otherwise -- ctx ends, stop
// (nil: never) closes, cl ends (its session was declared lost, or another
// call withdrew it), the engine closes, or the driver fails -- it withdraws
// cl's own entry and returns why: Closed, LockLost, Interrupted (stop, or
// withdrawn), ctx's Timeout or Interrupted, or the driver's error. turn
// (nil: none) is a lock's channel from a TurnSignaler (LockRoom.SetTurn),
// on an engine without a defect of the wait.
func (e *Engine) await(ctx context.Context, cl *claim, stop <-chan struct{}, turn <-chan struct{}) error {
	// The uncontended case first: an entry the store granted already
	// (Entry.Granted), or, on a driver that finds the entries ahead in one
	// bounded read (Aheader) and has no Acquire step, an entry that heads
	// its queue, is granted without the goroutine that ends a wait. On a
	// driver with the Acquire step the head is granted through Acquire, in
	// the wait. Otherwise that read is the wait's first.
	var first *aheadRead
	if ctx.Err() == nil && !isClosed(stop) && !e.closed.Load() && cl.err() == nil {
		switch {
		case cl.entry.Granted:
			cl.position = 1
			return nil
		case e.aheader != nil && !e.signals:
			// Bound to cl: no goroutine ends this read when the session
			// is lost or Stop withdraws cl (WaitForLeadership's ctx
			// never ends), and a store cut off from the client may never
			// answer it.
			ahead, in, err := e.ahead(cl.bound(ctx), cl)
			cl.unbind()
			if err == nil && in && len(ahead) == 0 && e.acquirer == nil {
				cl.position = 1
				return cl.err() // lost as it was granted
			}
			if err == nil {
				first = &aheadRead{ahead, in}
			}
		}
	}
	var err error
	switch {
	case turn != nil:
		err = e.waitTurn(ctx, cl, turn)
	case e.signals:
		err = e.waitSignaled(ctx, cl, stop)
	default:
		// The driver's WaitGone sees only a context: one that also ends
		// with the claim, stop and the engine.
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-cl.Done():
			case <-stop:
			case <-e.closing:
			case <-wctx.Done():
			}
			cancel()
		}()
		err = e.wait(wctx, cl, first)
		cancel()
	}
	if err == nil && !isClosed(stop) && !e.closed.Load() {
		if err := cl.err(); err != nil { // lost as it was granted
			return err
		}
		return nil
	}
	lostBefore := cl.err()
	e.withdraw(cl)
	var lost, withdrawn bool
	if lostBefore != nil {
		lost = topo.IsErrType(lostBefore, topo.LockLost)
		withdrawn = topo.IsErrType(lostBefore, topo.Interrupted)
	}
	switch {
	case e.closed.Load():
		return topo.NewError(topo.Closed, cl.q.Path)
	// An entry seen gone (errEntryGone) is no loss when the claim had
	// been released already (withdrawn: Stop, Resign): the entry went
	// with that withdrawal, which the wait's read may see before it sees
	// the claim's end. Stop's and Resign's answer follows.
	case lost || errors.Is(err, errEntryGone) && !withdrawn || err == errSessionLost:
		return backendkit.Wrap(topo.LockLost, cl.q.Path, ErrNotHeld)
	case isClosed(stop):
		return topo.NewError(topo.Interrupted, cl.q.Path)
	case ctx.Err() != nil:
		return backendkit.FromContext(ctx, cl.q.Path)
	case lostBefore != nil: // withdrawn by another call (Resign, Stop)
		return lostBefore
	}
	return e.d.MapError(ctx, err, cl.q.Path)
}

// aheadRead is one answer of ahead.
type aheadRead struct {
	ahead []Entry
	in    bool
}

// wait is await's loop: list (first, when not nil, is the first list's
// answer already), and while cl's entry is not the head, wait for its
// predecessor to go (Driver.WaitGone). It returns nil once cl heads the
// queue.
func (e *Engine) wait(ctx context.Context, cl *claim, first *aheadRead) error {
	if cl.entry.Granted { // the store granted it already
		cl.position = 1
		return nil
	}
	for {
		var ahead []Entry
		var in bool
		var err error
		if first != nil {
			ahead, in, first = first.ahead, first.in, nil
		} else if ahead, in, err = e.ahead(ctx, cl); err != nil {
			return err
		}
		i := len(ahead)
		known := i                       // entries known to be ahead
		if i > 0 && ahead[0].Key == "" { // entries the read did not see
			known--
		}
		switch {
		case !in:
			cl.end(stateLost)
			return errEntryGone
		case i == 0, known == 1 && e.defect == DefectGrantSecond, e.defect == DefectSkipWait:
			cl.position = int32(i + 1)
			return e.acquire(ctx, cl)
		}
		if err := e.d.WaitGone(ctx, cl.q, ahead[i-1]); err != nil {
			return err
		}
		if i == 1 {
			// The one entry ahead is gone, and no entry can have come
			// ahead since (tokens only grow): cl heads the queue, known
			// without another read of it, if its own entry is still there.
			cl.position = 1
			if err := e.confirmHead(ctx, cl); err != nil {
				return err
			}
			return e.acquire(ctx, cl)
		}
	}
}

// confirmHead checks, on a driver whose store may take an entry away
// while its session lives (a Monitor: etcd, where a lease can be revoked
// or a key deleted behind the client's back) and that has no Acquire step
// (which checks the entry in the store itself), that cl's entry is still
// held (Driver.Held, one read) before the wait grants it: a waiter whose
// predecessor went does not know that its own entry is still there, and
// one granted without it would hold a lock the next waiter takes too.
// errEntryGone when it is not.
func (e *Engine) confirmHead(ctx context.Context, cl *claim) error {
	if e.monitor == nil || e.acquirer != nil {
		return nil
	}
	held, err := e.d.Held(ctx, cl.q, cl.sess, cl.entry.Entry())
	if err != nil {
		return err
	}
	if !held {
		cl.end(stateLost)
		return errEntryGone
	}
	return nil
}

// waitSignaled is await's loop on a GoneSignaler without the Acquire step
// (e.signals): one read (GoneAhead) tells whether cl heads its queue and,
// while it does not, gives the channel of the entry just ahead of it, on
// which the waiter parks in one select that also ends with ctx, cl, stop
// and the engine (then it returns context.Canceled, or ctx's error). When
// that entry was the only one ahead, its going makes cl the head, known
// without another read (tokens only grow); otherwise cl reads again. It
// returns nil once cl heads the queue.
func (e *Engine) waitSignaled(ctx context.Context, cl *claim, stop <-chan struct{}) error {
	if cl.entry.Granted { // the store granted it already
		cl.position = 1
		return nil
	}
	ent := cl.entry.Entry() // never changes: there is no Acquire step
	// What else ends the wait: a candidacy ends with its claim (Resign
	// withdraws it, LoseEntry takes it, its session is lost); a lock's
	// claim cannot end before it is granted but with its session (Unlock
	// and Check need the descriptor Lock returns), so a lock's waiter
	// parks on the session's channel, made once per session, rather than
	// on the claim's Done, which would be made for this wait alone.
	var ended <-chan struct{}
	if cl.q.Election {
		ended = cl.Done()
	} else {
		ended = cl.sess.Done()
	}
	for {
		gone, i, in := e.signaler.GoneAhead(cl.q, ent)
		switch {
		case !in:
			cl.end(stateLost)
			return errEntryGone
		case i == 0, i == 1 && e.defect == DefectGrantSecond, e.defect == DefectSkipWait:
			cl.position = int32(i + 1)
			return nil
		}
		select {
		case <-gone:
		case <-ctx.Done():
			return ctx.Err()
		case <-ended:
			if !cl.q.Election {
				// The session was declared lost: its claims end (Lost
				// may not have ended cl yet).
				return errSessionLost
			}
			return context.Canceled
		case <-stop:
			return context.Canceled
		case <-e.closing:
			return context.Canceled
		}
		if i == 1 {
			cl.position = 1
			return nil
		}
	}
}

// waitTurn is await's wait for a lock on a TurnSignaler: the waiter parks
// on turn, its entry's own channel, and its context alone (a plain
// receive when the context never ends), and then asks the driver, with no
// request, whether the channel closed because the entry heads its queue
// (granted) or because it left it. Nothing else needs waking: the driver
// closes turn when the entry goes with its session (whose loss it declares
// first) and when its Conn closes (see TurnSignaler).
func (e *Engine) waitTurn(ctx context.Context, cl *claim, turn <-chan struct{}) error {
	if done := ctx.Done(); done == nil {
		<-turn
	} else {
		select {
		case <-turn:
		case <-done:
			return ctx.Err()
		}
	}
	if !e.turns.Turn(cl.entry.Ref) {
		cl.end(stateLost)
		return errEntryGone
	}
	cl.position = 1
	return nil
}

// TurnSignaler is what a Driver may also implement when it is a Roomer and
// a GoneSignaler without Monitor or Acquire (in process: memorytopo), and
// it grants a lock's entry in place: CreateLock gives an entry that does
// not head its queue a channel of its own (LockRoom.SetTurn), which the
// driver closes, once, when the entry comes to head its queue (its
// predecessors all gone: the release hands the lock over directly) or
// when the entry leaves the queue (withdrawn, or gone with its session)
// -- whichever comes first. The driver must close it for every lock
// entry of a Conn once that Conn's engine is closed (memorytopo's Close
// ends the Conn's sessions), and for an entry whose session it declares
// lost after Session.Lost returned. A lock's waiter then parks on that
// channel and its context alone, and learns its turn without another
// read of the queue: one store request per handover (the release), one
// goroutine woken.
type TurnSignaler interface {
	// Turn reports, once the channel of the entry whose Entry.Ref is ref
	// closed, whether the entry was granted (true) or left its queue
	// first (false). It reads no store and never blocks.
	Turn(ref any) bool
}

// GoneSignaler is what a Driver may also implement when its store closes
// a channel once an entry is gone and its requests never block, in
// process (memorytopo). Unless the driver also has the Acquire step, the
// engine then waits for the entry ahead of a waiter in one select on that
// channel, the caller's context and the claim's own end, without the
// goroutine and the context per wait that Driver.WaitGone needs, and
// calls neither WaitGone nor List nor Aheader.Ahead in a wait: each
// look at the queue is one GoneAhead, which also finds the channel.
//
// A lock's waiter parks on its session's end, not on its own entry's: a
// GoneSignaler must not remove a waiting lock entry while its session
// lives (memorytopo removes one only with its session; it ends single
// entries of elections alone, whose waiters park on the claim's end),
// else that waiter would wake only when the entry ahead of it goes.
//
// Nor may it end a lock's entry by Session.LoseEntry (memorytopo calls it
// for candidates only): without Monitor, a lock granted at Create is
// unshared (on no session's list until Done is called, see Engine.lock),
// and LoseEntry would not find it. Its session's loss ends it all the
// same.
type GoneSignaler interface {
	// GoneAhead returns, in one read, how many entries are ahead of e in
	// q -- 0 when e heads q, 1, or 2 for two or more -- with the channel
	// closed once the entry just ahead of e is gone from the store (nil
	// when e heads q), and whether e is in q at all. It does not block.
	GoneAhead(q Queue, e Entry) (gone <-chan struct{}, ahead int, in bool)
}

// Aheader is what a Driver may also implement when its store finds the
// entries just ahead of an entry without reading the whole queue, in one
// bounded request or without any (etcd: a range sorted by revision,
// limited; Consul: from how the predecessor that WaitGone saw go went).
// The engine's wait then reads those instead of Driver.List, so that one
// handover costs the same whatever the length of the queue; on a driver
// without the Acquire step, an entry that heads its queue at once is also
// granted without starting a goroutine. A GoneSignaler's wait (in
// process) reads through GoneAhead instead.
type Aheader interface {
	// Ahead returns, in one read, the entries just ahead of e in q,
	// oldest first: the one just ahead last, at most max of them (none
	// when e heads q), and whether e is in q at all. A driver that knows
	// the entry just ahead but not whether others are ahead of it returns
	// an Entry with an empty Key (which no entry has) before it, standing
	// for entries it did not see: the engine never waits for that one,
	// and asks again once the entry just ahead goes, rather than taking e
	// for the head.
	Ahead(ctx context.Context, q Queue, e Entry, max int) (ahead []Entry, in bool, err error)
}

// ahead returns the entries ahead of cl's entry in its queue (all of
// them, or the last two when the driver is an Aheader: what wait needs),
// and whether the entry is in the queue.
func (e *Engine) ahead(ctx context.Context, cl *claim) ([]Entry, bool, error) {
	if e.aheader != nil {
		return e.aheader.Ahead(ctx, cl.q, cl.entry.Entry(), 2)
	}
	list, err := e.d.List(ctx, cl.q)
	if err != nil {
		return nil, false, err
	}
	i := indexOf(list, cl.entry.Entry())
	if i < 0 {
		return nil, false, nil
	}
	return list[:i], true, nil
}

// acquire runs the driver's optional Acquire step (Acquirer) for cl, now
// at the head of its queue, and makes the granted entry cl's.
func (e *Engine) acquire(ctx context.Context, cl *claim) error {
	if e.acquirer == nil {
		return nil
	}
	done := make(chan struct{})
	cl.sess.mu.Lock()
	if err := cl.errLocked(); err != nil {
		// Withdrawn (Stop, Resign) or lost before its turn came: no
		// Acquire, whose transaction, detached from ctx, would take the
		// key after the withdrawal returned.
		cl.sess.mu.Unlock()
		return err
	}
	cl.acquiring = done
	ent := cl.entry.Entry()
	cl.sess.mu.Unlock()
	defer func() {
		cl.sess.mu.Lock()
		cl.acquiring = nil
		cl.sess.mu.Unlock()
		close(done)
	}()
	got, err := e.acquirer.Acquire(ctx, cl.q, cl.sess, ent)
	if errors.Is(err, ErrNotHeld) {
		cl.end(stateLost)
		return errEntryGone
	}
	if err != nil {
		return err
	}
	cl.sess.mu.Lock()
	cl.entry.keep(&got)
	cl.sess.mu.Unlock()
	return nil
}

// indexOf returns the place of ent in list, or -1.
func indexOf(list []Entry, ent Entry) int {
	for i, x := range list {
		if x.Token == ent.Token && x.Key == ent.Key {
			return i
		}
	}
	return -1
}

// withdraw ends cl (released, unless it ended already) and removes its
// entry, within removeGrace even when the caller's context has ended (on
// a GoneSignaler, whose requests never block, with no bound); a removal
// that fails is retried in the background (removeLater). An Acquire step
// in flight (Consul: its transaction, sent detached from the caller,
// turns the queue entry into the key) is waited for first, for at most
// removeGrace, so that the entry removed is the one it left: withdraw
// (Stop, Resign) no longer returns while the key it took is still held
// (an observer named the withdrawn candidate leader after its Await had
// failed Interrupted).
func (e *Engine) withdraw(cl *claim) {
	cl.end(stateReleased)
	cl.sess.mu.Lock()
	acquiring := cl.acquiring
	cl.sess.mu.Unlock()
	if acquiring != nil {
		t := time.NewTimer(removeGrace)
		select {
		case <-acquiring:
		case <-t.C:
		}
		t.Stop()
	}
	var err error
	if e.signaler != nil {
		// A GoneSignaler's requests never block: no grace to bound.
		err = e.d.Delete(context.Background(), cl.q, cl.sess, cl.current())
	} else {
		ctx := newGrace()
		err = e.d.Delete(ctx, cl.q, cl.sess, cl.current())
		ctx.end()
	}
	if err != nil && !errors.Is(err, ErrNotHeld) {
		go e.removeLater(cl)
	}
}

// removeLater retries the removal of a released claim's entry that failed
// (the store unreachable), with a growing pause, until it is removed or
// gone, its session is lost or the engine closes: a live Conn never keeps
// an entry it gave up, which would hold the lock (or the lead) for as long
// as the session lives.
func (e *Engine) removeLater(cl *claim) {
	pause := observeRetry
	for {
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-cl.sess.Done():
			t.Stop()
			return
		case <-e.closing:
			t.Stop()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), removeGrace)
		err := e.d.Delete(ctx, cl.q, cl.sess, cl.current())
		cancel()
		if err == nil || errors.Is(err, ErrNotHeld) {
			return
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// isClosed reports whether ch (possibly nil) is closed.
func isClosed(ch <-chan struct{}) bool {
	if ch == nil { // no select (a lock's await has no stop)
		return false
	}
	select {
	case <-ch:
		return ch != nil
	default:
		return false
	}
}
