package claims

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// claimState is the holder's view of a claim: live (waiting or held), then
// released by its owner or lost with its session. Both ends are final.
type claimState uint8

const (
	stateLive claimState = iota
	stateReleased
	stateLost
)

// sharedBit, in claim.state beside a live claimState, marks a claim that
// is on its session's list (Session.add): Session.Lost and LoseEntry end
// it, and it ends under sess.mu. A claim without it (unshared: see
// Engine.lock) is a granted lock that no goroutine but its holder's knows
// of, with no Done channel: it is lost when its session is (stateOf), and
// Unlock releases it with one compare-and-swap, without sess.mu. Done
// sets the bit, under sess.mu, by a compare-and-swap from live, so a
// release and a Done never both win.
const sharedBit = 1 << 7

// unlockedBit, in claim.state, marks a lock whose Unlock was called
// (lockDescriptor.Unlock, claim.unlock); it stays whatever the state
// becomes.
const unlockedBit = 1 << 6

// stateBits are the bits of claim.state that hold its claimState.
const stateBits = 3

// claim is one entry of a queue together with its holder's view of it:
// what a lock descriptor and a leadership term are. Its state is guarded
// by sess.mu.
type claim struct {
	eng *Engine
	q   Queue
	// entry is guarded by sess.mu once the claim is shared (current).
	entry claimEntry
	sess  *Session
	// done is Done's channel, made on its first use (most claims end
	// before anyone asks); guarded by sess.mu.
	done chan struct{}
	// cancel, for a candidacy, cancels the leadership context.
	cancel context.CancelCauseFunc
	// abort, while set, cancels the context of the driver request that
	// bound made for the claim; guarded by sess.mu.
	abort context.CancelFunc
	// acquiring, while set, closes when the driver's Acquire step for the
	// claim has returned and its granted entry is kept (see
	// Engine.acquire, Engine.withdraw); guarded by sess.mu.
	acquiring chan struct{}
	// monitorOnce starts the driver's Monitor of the claim (see monitor).
	monitorOnce sync.Once
	// state is a claimState, with sharedBit while live and shared,
	// written with sess.mu held (an unshared claim's release excepted:
	// see sharedBit) and read with or without it (err needs no lock:
	// every Lock reads it); read it through stateNow.
	state atomic.Uint32
	// position is the entry's place in its queue when it was granted
	// (1: the head), for DefectTokenIsPosition only. An int32 beside
	// linked keeps a lock descriptor in a 192-byte allocation.
	position int32
	// linked is set while the claim is on its session's list of claims,
	// which sprev and snext link; guarded by sess.mu.
	linked       bool
	sprev, snext *claim
}

// claimEntry is what a claim keeps of its Entry: the fields the engine
// and the drivers use. Value is kept: a waiting candidate's Campaign
// value, which a driver publishes when the candidate is granted
// (consultopo writes it then). ValueRev (Head's) and Created (Describe's)
// are never a claim's: leaving them out keeps a lock descriptor small.
type claimEntry struct {
	Token    int64
	Key      string
	Session  string
	Contents string
	Value    []byte
	Granted  bool
	Ref      any
}

// keep sets ce to the fields of e a claim keeps.
func (ce *claimEntry) keep(e *Entry) {
	ce.Token = e.Token
	ce.Key = e.Key
	ce.Session = e.Session
	ce.Contents = e.Contents
	ce.Value = e.Value
	ce.Granted = e.Granted
	ce.Ref = e.Ref
}

// Entry returns the Entry ce keeps.
func (ce *claimEntry) Entry() Entry {
	return Entry{Token: ce.Token, Key: ce.Key, Session: ce.Session, Contents: ce.Contents, Value: ce.Value, Granted: ce.Granted, Ref: ce.Ref}
}

// current returns the claim's entry: the one its driver created, then the
// one Acquire granted (Acquirer), which another goroutine may set while
// this one reads; guarded by sess.mu.
func (cl *claim) current() Entry {
	cl.sess.mu.Lock()
	defer cl.sess.mu.Unlock()
	return cl.entry.Entry()
}

// monitor starts, once, the driver's watch of the granted claim when the
// driver implements Monitor.
func (cl *claim) monitor() {
	if m := cl.eng.monitor; m != nil {
		cl.monitorOnce.Do(func() { m.Monitor(cl.q, cl.sess, cl.current(), cl.Done()) })
	}
}

// lookTimeout bounds the read of a term's first look (see look).
const lookTimeout = 2 * time.Second

// look is a granted term's first look by its leader (its leadership
// context used, Term, Proclaim): on a driver with a Monitor the watch
// starts then, not at the grant, so a term nobody looks at (its leader
// steps down at once) costs no watch. First one read (Driver.Held, at
// most lookTimeout) tells whether the store took the term away since the
// grant, and ends it lost if so: the look then already sees it ended,
// which a watch only started could not promise. A read that fails leaves
// that to the watch. Concurrent first looks wait for the read; later
// looks cost an atomic load.
func (cl *claim) look() {
	m := cl.eng.monitor
	if m == nil {
		return
	}
	cl.monitorOnce.Do(func() {
		if cl.err() != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), lookTimeout)
		held, err := cl.eng.d.Held(ctx, cl.q, cl.sess, cl.current())
		cancel()
		if err == nil && !held {
			cl.end(stateLost)
			return
		}
		m.Monitor(cl.q, cl.sess, cl.current(), cl.Done())
	})
}

// termContext is a term's leadership context on a driver with a Monitor:
// the context WaitForLeadership and Campaign return, whose every method
// first runs the term's look.
type termContext struct {
	context.Context
	cl *claim
}

func (c *termContext) Deadline() (time.Time, bool) { c.cl.look(); return c.Context.Deadline() }
func (c *termContext) Done() <-chan struct{}       { c.cl.look(); return c.Context.Done() }
func (c *termContext) Err() error                  { c.cl.look(); return c.Context.Err() }
func (c *termContext) Value(key any) any           { c.cl.look(); return c.Context.Value(key) }

func newClaim(eng *Engine, q Queue, e Entry, s *Session, cancel context.CancelCauseFunc) *claim {
	cl := &claim{}
	cl.init(eng, q, &e, s, cancel, true)
	return cl
}

// init sets up cl, a new claim, and registers it on s when shared is
// set (else it is unshared: see sharedBit). The fields are set one by
// one, and e comes by pointer: an Entry is large, and a parallel
// assignment would copy it twice.
func (cl *claim) init(eng *Engine, q Queue, e *Entry, s *Session, cancel context.CancelCauseFunc, shared bool) {
	cl.entry.keep(e)
	cl.initKept(eng, q, s, cancel, shared)
}

// initKept is init for a claim whose entry is set already
// (LockRoom.SetEntry).
func (cl *claim) initKept(eng *Engine, q Queue, s *Session, cancel context.CancelCauseFunc, shared bool) {
	cl.eng = eng
	cl.q = q
	cl.sess = s
	cl.cancel = cancel
	if shared {
		s.add(cl)
	}
}

// endLocked moves a live claim to st: Done closes and a leadership context
// is cancelled with the reason. A claim that already ended stays as it is.
// Called with sess.mu held.
func (cl *claim) endLocked(st claimState) {
	// Compare-and-swaps: an unshared claim's release and an Unlock's
	// unlockedBit take no lock. The latter leaves the claim live: try
	// again then (else Lost would leave a shared claim live, its Done
	// open). stateOf decides: an unshared claim on a lost session has
	// ended already (a Done taken since is closed).
	for {
		old := cl.state.Load()
		if cl.stateOf(old) != stateLive {
			return
		}
		if cl.state.CompareAndSwap(old, uint32(st)|old&unlockedBit) {
			break
		}
	}
	if cl.done != nil {
		close(cl.done)
	}
	if cl.cancel != nil {
		cl.cancel(cl.errLocked())
	}
	if cl.abort != nil {
		cl.abort()
	}
}

// bound returns ctx, also cancelled when cl ends (released by Unlock,
// Resign or Stop; lost with its session): the context of a driver
// request of a wait that no goroutine watching the claim covers, such as
// its first read. Call unbind once the request returned. One bound
// request at a time per claim.
func (cl *claim) bound(ctx context.Context) context.Context {
	bctx, cancel := context.WithCancel(ctx)
	cl.sess.mu.Lock()
	defer cl.sess.mu.Unlock()
	cl.abort = cancel
	if cl.stateNow() != stateLive {
		cancel()
	}
	return bctx
}

// unbind releases the context bound returned.
func (cl *claim) unbind() {
	cl.sess.mu.Lock()
	defer cl.sess.mu.Unlock()
	cl.abort()
	cl.abort = nil
}

// end is endLocked taking sess.mu; it also forgets cl on its session.
func (cl *claim) end(st claimState) {
	cl.sess.mu.Lock()
	defer cl.sess.mu.Unlock()
	cl.endLocked(st)
	cl.sess.remove(cl)
}

// release is end(stateReleased) for a live claim; for an ended one it
// returns the claim's error and changes nothing. Its only caller, unlock,
// has set unlockedBit already: an unshared claim's lock-free release is
// unlock's own.
func (cl *claim) release() error {
	cl.sess.mu.Lock()
	defer cl.sess.mu.Unlock()
	if err := cl.errLocked(); err != nil {
		return err
	}
	cl.endLocked(stateReleased)
	cl.sess.remove(cl)
	return nil
}

// unlock is Unlock's release: again when an Unlock came before (nothing
// changes then), else release's error, with unlockedBit set. A live
// unshared claim (see sharedBit) goes to released, unlockedBit set, in
// one compare-and-swap, without sess.mu: it has no Done channel to close
// and is on no list. A loss of its session between the check and the
// swap orders the release first (the store then refuses the Delete:
// LockLost).
func (cl *claim) unlock() (again bool, err error) {
	if old := cl.state.Load(); old == uint32(stateLive) && cl.errLocked() == nil &&
		cl.state.CompareAndSwap(old, uint32(stateReleased)|unlockedBit) {
		return false, nil
	}
	for {
		old := cl.state.Load()
		if old&unlockedBit != 0 {
			return true, nil
		}
		if cl.state.CompareAndSwap(old, old|unlockedBit) {
			return false, cl.release()
		}
	}
}

// stateNow returns the claim's state.
func (cl *claim) stateNow() claimState { return cl.stateOf(cl.state.Load()) }

// stateOf is the claim's state for raw, a value of cl.state: an
// unshared live claim, which Session.Lost does not see, is lost once its
// session was declared lost, except under DefectLossKeepsClaims (a
// shared one is ended by Lost before Lost says so).
func (cl *claim) stateOf(raw uint32) claimState {
	if raw&(stateBits|sharedBit) == uint32(stateLive) && cl.sess.ended.Load() {
		return cl.lostState()
	}
	return claimState(raw & stateBits)
}

// lostState is stateOf's state of a live claim on a lost session.
func (cl *claim) lostState() claimState {
	if cl.eng.defect == DefectLossKeepsClaims {
		return stateLive
	}
	return stateLost
}

// errLocked is the error of an ended claim (nil while live): Interrupted
// once released, LockLost once lost. It needs no lock (err is the same):
// the name says that the callers hold sess.mu to act on the answer.
func (cl *claim) errLocked() error {
	// The live claim's answer first (stateOf's, in short).
	if raw := cl.state.Load(); raw&stateBits == uint32(stateLive) && (raw&sharedBit != 0 || !cl.sess.ended.Load()) {
		return nil
	}
	return cl.endErr()
}

// endErr is errLocked past its first test: nil while live (a live claim
// on a lost session under DefectLossKeepsClaims), else the end's error.
func (cl *claim) endErr() error {
	st := cl.stateNow()
	switch st {
	case stateLive:
		return nil
	case stateReleased:
		return topo.NewError(topo.Interrupted, cl.q.Path)
	}
	return backendkit.Wrap(topo.LockLost, cl.q.Path, ErrNotHeld)
}

// err is errLocked, for callers that do not hold sess.mu: the state at
// one moment, read without the lock.
func (cl *claim) err() error {
	return cl.errLocked()
}

// Token implements topo.Fence: the entry's token.
func (cl *claim) Token() int64 {
	if cl.eng.defect == DefectTokenIsPosition {
		return int64(cl.position)
	}
	return cl.current().Token
}

// Done implements topo.Fence: closed when the claim is released and when
// its session is declared lost (before the declaration returns). An
// unshared claim becomes shared here (see sharedBit), so that Lost
// closes the channel.
func (cl *claim) Done() <-chan struct{} {
	s := cl.sess
	s.mu.Lock()
	defer s.mu.Unlock()
	if cl.done == nil {
		cl.done = make(chan struct{})
		old := cl.state.Load()
		switch {
		case cl.stateOf(old) != stateLive:
			close(cl.done)
		case old&sharedBit == 0:
			if !cl.state.CompareAndSwap(old, old|sharedBit) { // released meanwhile
				close(cl.done)
				break
			}
			s.link(cl)
		}
	}
	return cl.done
}

// Check implements topo.Fence: Closed once the engine is closed (whatever
// happened to the claim before), Interrupted once released and LockLost
// once lost, known without a request; otherwise the store's answer
// (Driver.Held): nil while the entry heads its queue on its live session,
// LockLost (and the claim ends, lost) when it does not. Other errors are
// the driver's, mapped.
func (cl *claim) Check(ctx context.Context) error {
	if err := backendkit.CheckContext(ctx, cl.q.Path); err != nil {
		return err
	}
	if err := cl.eng.closedErr(cl.q.Path); err != nil {
		return err
	}
	if err := cl.err(); err != nil {
		return err
	}
	held, err := cl.eng.d.Held(ctx, cl.q, cl.sess, cl.current())
	if err != nil {
		return cl.eng.d.MapError(ctx, err, cl.q.Path)
	}
	if !held {
		cl.end(stateLost)
		return cl.err()
	}
	return nil
}

// own is what FenceGuard looks for behind middleware.
func (cl *claim) own() *claim { return cl }

type ownFence interface {
	topo.Fence
	own() *claim
}

// Guard is what a backend's Txn checks for an IfHeld op: the claim's
// queue, entry and session, to check in the store in the same request as
// the writes, and whether the holder still believes it holds.
type Guard struct{ cl *claim }

// FenceGuard finds the engine's claim behind f (through Unwrap, see
// backendkit.FenceAs). It reports false for a Fence no engine issued.
func FenceGuard(f topo.Fence) (Guard, bool) {
	o, ok := backendkit.FenceAs[ownFence](f)
	if !ok {
		return Guard{}, false
	}
	return Guard{o.own()}, true
}

// Driver returns the driver of the engine that issued the claim: a
// backend refuses a Fence of another store. It returns nil for the zero
// Guard (FenceGuard's answer for a fence it does not know), so that
// `g.Driver() != d` refuses that too; the other methods of the zero
// Guard panic.
func (g Guard) Driver() Driver {
	if g.cl == nil {
		return nil
	}
	return g.cl.eng.d
}

// Queue returns the claim's queue.
func (g Guard) Queue() Queue { return g.cl.q }

// Entry returns the claim's entry.
func (g Guard) Entry() Entry { return g.cl.current() }

// Session returns the claim's session.
func (g Guard) Session() *Session { return g.cl.sess }

// Live reports whether the holder still holds the claim in its own view
// (not released, not lost). The store's check decides; a backend's IfHeld
// requires both. It takes no lock, so a driver may call it inside its
// critical section.
func (g Guard) Live() bool {
	return g.cl.err() == nil
}
