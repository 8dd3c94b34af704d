package memorytopo

import (
	"context"
	"errors"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// Operation names one kind of call on a Conn, a LockDescriptor or a
// LeaderParticipation, for fault injection (Fault.Op) and call counters
// (Factory.CallCount).
type Operation int

// The operations. OpAny matches every operation in a Fault; it has no
// counter of its own.
const (
	// OpAny matches every operation (Fault.Op only).
	OpAny Operation = iota
	// OpListDir is Conn.ListDir.
	OpListDir
	// OpCreate is Conn.Create. A Fault with Op OpCreate also fails a
	// transaction (Conn.Txn) with a CreateOp on a matching path; only
	// Conn.Create counts as OpCreate.
	OpCreate
	// OpUpdate is Conn.Update. A Fault with Op OpUpdate also fails
	// topo.GuardedUpdate and every transaction (Conn.Txn) with an UpdateOp
	// on a matching path; only Conn.Update counts as OpUpdate.
	OpUpdate
	// OpGet is Conn.Get.
	OpGet
	// OpGetVersion is Conn.GetVersion.
	OpGetVersion
	// OpList is Conn.List.
	OpList
	// OpDelete is Conn.Delete. A Fault with Op OpDelete also fails
	// topo.GuardedDelete and every transaction (Conn.Txn) with a DeleteOp
	// on a matching path; only Conn.Delete counts as OpDelete.
	OpDelete
	// OpLock is Conn.Lock.
	OpLock
	// OpLockWithTTL is Conn.LockWithTTL.
	OpLockWithTTL
	// OpLockName is Conn.LockName.
	OpLockName
	// OpTryLock is Conn.TryLock.
	OpTryLock
	// OpCheck is LockDescriptor.Check.
	OpCheck
	// OpUnlock is LockDescriptor.Unlock.
	OpUnlock
	// OpWatch is Conn.Watch.
	OpWatch
	// OpWatchRecursive is Conn.WatchRecursive.
	OpWatchRecursive
	// OpNewLeaderParticipation is Conn.NewLeaderParticipation. Only error
	// faults apply to it (it does not touch the store); latency and a hung
	// server do not.
	OpNewLeaderParticipation
	// OpWaitForLeadership is LeaderParticipation.WaitForLeadership. Latency
	// and a hung server end early when the participation is stopped.
	OpWaitForLeadership
	// OpGetCurrentLeaderID is LeaderParticipation.GetCurrentLeaderID.
	OpGetCurrentLeaderID
	// OpWaitForNewLeader is LeaderParticipation.WaitForNewLeader.
	OpWaitForNewLeader
	// OpKeepAlive is the simulated renewal of sessions and lock leases. It
	// is never counted. A Fault with Op OpKeepAlive (its Path, Prefix and
	// Times are ignored), an error for every call (SetError) or a hung
	// server (Hang) blocks renewal: every live lease then lapses its TTL
	// later unless renewal resumes first.
	OpKeepAlive
	// OpTxn is Conn.Txn (topo.GuardedUpdate and topo.GuardedDelete are
	// Txn calls, and are counted as OpTxn). A Fault with Op OpTxn or OpAny
	// matches a transaction when its Path and Prefix match the path of any
	// of its ops (an IfHeld op has the path ""); one with Op OpCreate,
	// OpUpdate or OpDelete when they match the path of a write of that
	// kind (see Fault). A matching fault fails the whole transaction
	// before anything of it is applied.
	OpTxn
	// OpCampaign is LeaderParticipation.Campaign. Latency and a hung
	// server end early when its context ends or the participation is
	// stopped.
	OpCampaign
	// OpProclaim is LeaderParticipation.Proclaim.
	OpProclaim
	// OpResign is LeaderParticipation.Resign (with a cancelled context,
	// latency and a hung server are waited out for the bounded grace
	// only).
	OpResign
	// OpLeader is LeaderParticipation.Leader.
	OpLeader
	// OpObserve is LeaderParticipation.Observe.
	OpObserve
	// OpResumeLeaderParticipation is Conn.ResumeLeaderParticipation, on
	// the election name. (ResumeInfo does not contact the store, is not
	// counted and meets no faults.)
	OpResumeLeaderParticipation

	numOperations
)

var opNames = [...]string{
	OpAny: "Any", OpListDir: "ListDir", OpCreate: "Create", OpUpdate: "Update", OpGet: "Get",
	OpGetVersion: "GetVersion", OpList: "List", OpDelete: "Delete", OpLock: "Lock",
	OpLockWithTTL: "LockWithTTL", OpLockName: "LockName", OpTryLock: "TryLock", OpCheck: "Check",
	OpUnlock: "Unlock", OpWatch: "Watch", OpWatchRecursive: "WatchRecursive",
	OpNewLeaderParticipation: "NewLeaderParticipation", OpWaitForLeadership: "WaitForLeadership",
	OpGetCurrentLeaderID: "GetCurrentLeaderID", OpWaitForNewLeader: "WaitForNewLeader",
	OpKeepAlive: "KeepAlive", OpTxn: "Txn", OpCampaign: "Campaign", OpProclaim: "Proclaim",
	OpResign: "Resign", OpLeader: "Leader", OpObserve: "Observe",
	OpResumeLeaderParticipation: "ResumeLeaderParticipation",
}

// String returns the operation's method name, e.g. "Get".
func (op Operation) String() string {
	if op >= 0 && op < numOperations {
		return opNames[op]
	}
	return "Operation(" + strconv.Itoa(int(op)) + ")"
}

// Fault is one injected failure: calls of Op (or of every operation, with
// OpAny) whose path matches fail with Err instead of running.
//
// The path a call is matched against is the canonical path it was given,
// relative to the Conn's root (for ListDir and the locks, the directory; for
// List and WatchRecursive, the prefix; for LockDescriptor methods, the
// locked directory; for LeaderParticipation methods, the election name).
// Path, when not empty, is a path.Match pattern ("a/*/b"; note that * does
// not cross "/"); Prefix, when not empty, is a plain string prefix. Both
// must match when both are set; with neither, every path matches.
//
// A Fault on a write targets the write, whichever call makes it: one with
// Op OpCreate, OpUpdate or OpDelete fails the call of that name and also
// every transaction that writes a matching path that way -- Conn.Txn with
// a CreateOp, UpdateOp or DeleteOp on it, topo.GuardedUpdate (an UpdateOp)
// and topo.GuardedDelete (a DeleteOp) -- failing the whole transaction,
// before anything of it is applied, with Err naming that path. So a Fault
// aimed at "the update of x" fails a fenced update of x too. The
// conditions of a transaction (IfVersion, IfAbsent, IfPresent, IfHeld)
// are matched only by OpTxn and OpAny: an OpGet or OpCheck Fault does not
// fail a transaction. Call counters are not affected: a transaction counts
// as OpTxn only (Factory.CallCount).
type Fault struct {
	// Op is the operation that fails, or OpAny for all of them.
	Op Operation
	// Path is a path.Match pattern the call's path must match ("" = any).
	Path string
	// Prefix is a string prefix the call's path must have ("" = any).
	Prefix string
	// Err is the error returned. A topo.ErrorCode (e.g. topo.Unavailable)
	// is returned as a *topo.Error with that code and the call's path; a
	// *topo.Error is returned as is; any other error is wrapped in a
	// *topo.Error with code Unavailable whose Unwrap returns Err, so both
	// errors.Is(err, Err) and errors.Is(err, topo.Unavailable) hold.
	// A nil Err means topo.Unavailable.
	Err error
	// Times limits the fault to the next Times matching calls; 0 means
	// until it is removed.
	Times int
}

type rule struct {
	Fault
	remaining atomic.Int64 // only when Times > 0
}

// faultState is an immutable snapshot of a Factory's faults, replaced as a
// whole on every change. A nil *faultState means no fault is configured.
type faultState struct {
	err     error
	latency time.Duration
	hung    chan struct{} // non-nil while hung; closed by Unhang
	rules   []*rule
}

// SetError makes every call on every Conn of f fail with err (see
// Fault.Err for how err is returned) until SetError(nil). Calls fail after
// the Closed check and input validation, so a closed Conn still returns
// Closed and bad input still returns InvalidPath or InvalidArgument. While
// set, it also blocks lease renewal (see OpKeepAlive). Safe for concurrent
// use.
func (f *Factory) SetError(err error) {
	f.updateFaults(func(fl *faultState) { fl.err = err })
}

// AddFault installs fault and returns a function that removes it (calling
// it more than once is harmless). Faults are checked in the order they were
// added, after SetError's error; the first match wins. Safe for concurrent
// use.
func (f *Factory) AddFault(fault Fault) (remove func()) {
	r := &rule{Fault: fault}
	if fault.Times > 0 {
		r.remaining.Store(int64(fault.Times))
	}
	f.updateFaults(func(fl *faultState) { fl.rules = append(fl.rules, r) })
	return func() {
		f.updateFaults(func(fl *faultState) {
			// A copy: the published snapshot's rules do not change.
			fl.rules = slices.DeleteFunc(slices.Clone(fl.rules), func(o *rule) bool { return o == r })
		})
	}
}

// SetLatency delays every call on every Conn of f by d before it runs (0
// removes the delay). A call whose context ends during the delay returns
// Timeout (deadline) or Interrupted (cancelled) and does nothing; a Conn
// closed during the delay returns Closed. Watches and WaitForNewLeader are
// delayed when they start, not per event. Safe for concurrent use.
func (f *Factory) SetLatency(d time.Duration) {
	f.updateFaults(func(fl *faultState) { fl.latency = max(d, 0) })
}

// Hang simulates a server that stopped answering: from now on every call on
// every Conn of f blocks until its context ends (then it returns Timeout or
// Interrupted and does nothing), its Conn is closed (Closed) or Unhang is
// called (then it proceeds). Lease renewal stops too, so sessions and locks
// lapse their TTL after Hang unless Unhang comes first. Calls already past
// the fault check are not affected. Safe for concurrent use.
func (f *Factory) Hang() {
	f.updateFaults(func(fl *faultState) {
		if fl.hung == nil {
			fl.hung = make(chan struct{})
		}
	})
}

// Unhang ends Hang: blocked calls proceed and lease renewal resumes. Safe
// for concurrent use.
func (f *Factory) Unhang() {
	f.updateFaults(func(fl *faultState) {
		if fl.hung != nil {
			close(fl.hung)
			fl.hung = nil
		}
	})
}

// BreakWatches ends every active Watch and WatchRecursive of f's Conns as
// a store-side failure would (a lost connection, an etcd watch cancelled by
// compaction): each channel still delivers the events already pending, then
// one last event whose Err is err (returned as Fault.Err describes: nil
// means Unavailable), then closes. Programs are expected to watch again.
// It returns the number of watches ended. Safe for concurrent use.
func (f *Factory) BreakWatches(err error) int {
	n := 0
	for _, s := range f.allStores() {
		n += s.breakWatchers(err)
	}
	return n
}

// ClearFaults removes every fault: the SetError error, all Faults added
// with AddFault, the latency, and a hang (as Unhang). Call counters are
// kept. Safe for concurrent use.
func (f *Factory) ClearFaults() {
	f.updateFaults(func(fl *faultState) {
		if fl.hung != nil {
			close(fl.hung)
		}
		*fl = faultState{}
	})
}

// updateFaults applies change to a copy of f's faults and publishes it
// (nil when no fault is left), then re-evaluates lease renewal if that
// changed whether renewal is blocked.
func (f *Factory) updateFaults(change func(*faultState)) {
	f.faultMu.Lock()
	var next faultState
	if cur := f.faultState.Load(); cur != nil {
		next = *cur
	}
	change(&next)
	var fs *faultState
	if next.err != nil || next.latency > 0 || next.hung != nil || len(next.rules) > 0 {
		fs = &next
	}
	f.faultState.Store(fs)
	blocked := next.err != nil || next.hung != nil || slices.ContainsFunc(next.rules, func(r *rule) bool { return r.Op == OpKeepAlive })
	changed := f.keepAliveBlocked.Swap(blocked) != blocked
	f.faultMu.Unlock()
	if changed {
		f.refreshLeases()
	}
}

// faultErr turns an injected error into the error a call returns.
func faultErr(err error, p string) error {
	if err == nil {
		return topo.NewError(topo.Unavailable, p)
	}
	switch e := err.(type) {
	case topo.ErrorCode:
		return backendkit.Wrap(e, p, errors.New("injected fault"))
	case *topo.Error:
		return e
	}
	return backendkit.Wrap(topo.Unavailable, p, err)
}

func (r *rule) matches(op Operation, p string) bool {
	if r.Op != OpAny && r.Op != op {
		return false
	}
	if r.Op == OpAny && op == OpKeepAlive {
		return false
	}
	if r.Prefix != "" && !strings.HasPrefix(p, r.Prefix) {
		return false
	}
	if r.Path != "" {
		if ok, err := path.Match(r.Path, p); err != nil || !ok {
			return false
		}
	}
	// With Times, exactly the first Times matching calls take a count >= 0.
	return r.Times <= 0 || r.remaining.Add(-1) >= 0
}

// match reports whether r matches a call of op on p, and the path its
// error names. For a transaction (op OpTxn, p "", its ops txn) that is the
// first op r matches: an OpTxn or OpAny rule by the op's path, an
// OpCreate, OpUpdate or OpDelete rule a write of that kind on a matching
// path (see Fault); so a rule is consumed at most once per transaction.
func (r *rule) match(op Operation, p string, txn []backendkit.TxnOp) (string, bool) {
	if op != OpTxn {
		return p, r.matches(op, p)
	}
	for _, o := range txn {
		as := OpTxn
		if w, ok := writeOps[o.Kind]; ok && r.Op != OpAny && r.Op != OpTxn {
			as = w
		}
		if r.matches(as, o.Path) {
			return o.Path, true
		}
	}
	return "", false
}

// inject applies fs to a call of op on p (see match) on a Conn whose
// close channel is done: it waits out the latency and a hang, then
// returns SetError's error or that of the first rule that matches. A nil
// fs (no fault) returns nil at once.
func (fs *faultState) inject(ctx context.Context, op Operation, p string, txn []backendkit.TxnOp, done <-chan struct{}) error {
	if fs == nil {
		return nil
	}
	if err := fs.wait(ctx, p, done); err != nil {
		return err
	}
	if fs.err != nil {
		return faultErr(fs.err, p)
	}
	for _, r := range fs.rules {
		if at, ok := r.match(op, p, txn); ok {
			return faultErr(r.Err, at)
		}
	}
	return nil
}

// wait waits out the latency and a hang of fs for a call on p.
func (fs *faultState) wait(ctx context.Context, p string, done <-chan struct{}) error {
	if fs.latency > 0 {
		t := time.NewTimer(fs.latency)
		err := await(ctx, t.C, done, p)
		t.Stop()
		if err != nil {
			return err
		}
	}
	if fs.hung != nil {
		return await(ctx, fs.hung, done, p)
	}
	return nil
}

// await blocks a call on p until ch delivers or is closed (nil), its
// context ends (Timeout, Interrupted) or its Conn's done is closed
// (Closed).
func await[T any](ctx context.Context, ch <-chan T, done <-chan struct{}, p string) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return backendkit.FromContext(ctx, p)
	case <-done:
		return topo.NewError(topo.Closed, p)
	}
}

// counter is a striped call counter: increments from many goroutines land
// on different cache lines, so that counting does not serialise reads.
type counter struct {
	stripes [16]struct {
		n atomic.Int64
		_ [56]byte
	}
}

// add counts one call on the stripe of the calling goroutine's stack: the
// address of a local variable tells goroutines apart (each runs on a
// stack of its own, 2 KiB or more), costs no random number per call, and
// keeps one goroutine on one cache line. Which stripe a call lands on
// changes nothing but contention: load sums them all.
func (c *counter) add() {
	var here byte
	p := uintptr(unsafe.Pointer(&here))
	c.stripes[(p>>11^p>>15^p>>19)&15].n.Add(1)
}

func (c *counter) load() int64 {
	var t int64
	for i := range c.stripes {
		t += c.stripes[i].n.Load()
	}
	return t
}

func (c *counter) reset() {
	for i := range c.stripes {
		c.stripes[i].n.Store(0)
	}
}

// CallCount returns how many calls of op were made on all Conns of f since
// it was created or ResetCallCounts was called, including calls that failed
// (closed Conn, bad input, injected fault). OpAny returns the total of all
// operations; OpKeepAlive is not counted and returns 0. Safe for concurrent
// use; the count is exact once the counted calls have returned.
func (f *Factory) CallCount(op Operation) int64 {
	if op == OpAny {
		var t int64
		for i := OpAny + 1; i < numOperations; i++ {
			t += f.counters[i].load()
		}
		return t
	}
	if op < 0 || op >= numOperations {
		return 0
	}
	return f.counters[op].load()
}

// ResetCallCounts sets every call counter of f to zero. Safe for
// concurrent use.
func (f *Factory) ResetCallCounts() {
	for i := range f.counters {
		f.counters[i].reset()
	}
}

func (f *Factory) count(op Operation) { f.counters[op].add() }

// claimOps is the Operation of each of the engine's claim calls.
var claimOps = [...]Operation{
	claims.CallLock: OpLock, claims.CallLockWithTTL: OpLockWithTTL, claims.CallLockName: OpLockName,
	claims.CallTryLock: OpTryLock, claims.CallCheck: OpCheck, claims.CallUnlock: OpUnlock,
	claims.CallNewLeaderParticipation:    OpNewLeaderParticipation,
	claims.CallResumeLeaderParticipation: OpResumeLeaderParticipation,
	claims.CallWaitForLeadership:         OpWaitForLeadership, claims.CallCampaign: OpCampaign,
	claims.CallProclaim: OpProclaim, claims.CallResign: OpResign, claims.CallLeader: OpLeader,
	claims.CallGetCurrentLeaderID: OpGetCurrentLeaderID, claims.CallObserve: OpObserve,
	claims.CallWaitForNewLeader: OpWaitForNewLeader,
}

// claimHooks put c's call counting and fault injection in front of each
// claim call of its engine, as for every other call of a Conn: the call
// is counted as its Operation, its arguments are checked, then it meets
// Closed, the partition and the faults (Conn.enter). Two calls differ:
// NewLeaderParticipation meets only error faults (it does not reach the
// store), and ResumeLeaderParticipation on a closed Conn is left to the
// engine's checks (malformed or foreign info is InvalidArgument even then).
func (c *Conn) claimHooks() claims.Hooks {
	return claims.Hooks{
		Count: func(call claims.Call) { c.f.count(claimOps[call]) },
		Enter: func(ctx context.Context, call claims.Call, p string) error {
			op := claimOps[call]
			switch call {
			case claims.CallNewLeaderParticipation:
				if fs := c.f.faultState.Load(); fs != nil {
					errOnly := &faultState{err: fs.err, rules: fs.rules}
					return errOnly.inject(ctx, op, p, nil, c.done)
				}
				return nil
			case claims.CallResumeLeaderParticipation:
				if err := c.enter(ctx, op, p); !topo.IsErrType(err, topo.Closed) {
					return err
				}
				return nil
			}
			return c.enter(ctx, op, p)
		},
	}
}
