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

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// Operation names one kind of call on a Conn, a LockDescriptor or a
// LeaderParticipation, for fault injection (Fault.Op) and call counters
// (Factory.CallCount).
type Operation int

// The operations: each OpX names the method X of Conn, LockDescriptor
// (OpCheck, OpUnlock) or LeaderParticipation (OpWaitForLeadership through
// OpWaitForNewLeader, OpCampaign through OpObserve), except:
//
//   - OpAny matches every operation but OpKeepAlive in a Fault, and has
//     no counter of its own.
//   - OpKeepAlive is the renewal of leases, never counted. A Fault on it
//     (Path, Prefix and Times ignored) blocks renewal, as SetError and
//     Hang do: every live lease lapses its TTL later unless it resumes.
//   - OpTxn counts Conn.Txn, topo.GuardedUpdate and topo.GuardedDelete;
//     Create, Update and Delete count only their own method (see Fault).
//   - OpNewLeaderParticipation meets only error faults (it does not touch
//     the store). Latency and a hang end early for OpWaitForLeadership
//     when the participation is stopped, for OpCampaign also when its
//     context ends; OpResign with a cancelled context waits them out for
//     the bounded grace only. ResumeInfo is not counted, meets no faults.
const (
	OpAny Operation = iota
	OpListDir
	OpCreate
	OpUpdate
	OpGet
	OpGetVersion
	OpList
	OpDelete
	OpLock
	OpLockWithTTL
	OpLockName
	OpTryLock
	OpCheck
	OpUnlock
	OpWatch
	OpWatchRecursive
	OpNewLeaderParticipation
	OpWaitForLeadership
	OpGetCurrentLeaderID
	OpWaitForNewLeader
	OpKeepAlive
	OpTxn
	OpCampaign
	OpProclaim
	OpResign
	OpLeader
	OpObserve
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
// A call is matched on its canonical path, relative to the Conn's root:
// the directory for locks, ListDir and LockDescriptor methods, the prefix
// for List and WatchRecursive, the election name for LeaderParticipation
// methods and ResumeLeaderParticipation.
//
// A Fault on OpCreate, OpUpdate or OpDelete also fails every transaction
// with a CreateOp, UpdateOp or DeleteOp on a matching path (Conn.Txn,
// topo.GuardedUpdate, topo.GuardedDelete), before anything of it is
// applied, with Err naming that path. One on OpTxn or OpAny matches a
// transaction when it matches the path of any of its ops (an IfHeld op's
// is ""); an OpGet or OpCheck Fault never does.
type Fault struct {
	Op     Operation // the operation that fails, or OpAny
	Path   string    // a path.Match pattern (* does not cross "/"); "": any
	Prefix string    // a string prefix of the path, also required; "": any
	// Err is the error returned: a topo.ErrorCode as a *topo.Error with
	// that code and the call's path; a *topo.Error as is; any other error
	// wrapped in a *topo.Error with code Unavailable (errors.Is holds for
	// both); nil means topo.Unavailable.
	Err   error
	Times int // the fault ends after Times matching calls; 0: never
}

type rule struct {
	Fault
	remaining atomic.Int64 // only when Times > 0
}

// faultState is an immutable snapshot of a Factory's faults, replaced
// whole on every change; nil when there is none.
type faultState struct {
	err     error
	latency time.Duration
	hung    chan struct{} // non-nil while hung; closed by Unhang
	rules   []*rule
}

// SetError makes every call on every Conn of f fail with err (as
// Fault.Err describes) until SetError(nil), after the input and Closed
// checks; while set, lease renewal is blocked (see OpKeepAlive). Safe for
// concurrent use.
func (f *Factory) SetError(err error) {
	f.updateFaults(func(fl *faultState) { fl.err = err })
}

// AddFault installs fault and returns a function that removes it
// (idempotent). Faults are checked in the order added, after SetError's
// error; the first match wins. Safe for concurrent use.
func (f *Factory) AddFault(fault Fault) (remove func()) {
	r := &rule{Fault: fault}
	if fault.Times > 0 {
		r.remaining.Store(int64(fault.Times))
	}
	f.updateFaults(func(fl *faultState) { fl.rules = append(fl.rules, r) })
	return func() {
		f.updateFaults(func(fl *faultState) {
			// A copy: published snapshots do not change.
			fl.rules = slices.DeleteFunc(slices.Clone(fl.rules), func(o *rule) bool { return o == r })
		})
	}
}

// SetLatency delays every call on every Conn of f by d (0: none). A call
// whose context ends meanwhile returns Timeout or Interrupted and does
// nothing; one whose Conn closes, Closed. Watches and WaitForNewLeader are
// delayed when they start, not per event. Safe for concurrent use.
func (f *Factory) SetLatency(d time.Duration) {
	f.updateFaults(func(fl *faultState) { fl.latency = max(d, 0) })
}

// Hang simulates a server that stopped answering: every call on every
// Conn of f that starts from now on blocks until its context ends
// (Timeout or Interrupted, nothing done), its Conn closes (Closed) or
// Unhang (it proceeds). Lease renewal stops too, so leases lapse their TTL
// later unless Unhang comes first. Safe for concurrent use.
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
// a store-side failure would: each channel delivers its pending events,
// then one last event whose Err is err (as Fault.Err describes), then
// closes. It returns the number of watches ended. Safe for concurrent use.
func (f *Factory) BreakWatches(err error) int {
	n := 0
	for _, s := range f.allStores() {
		n += s.breakWatchers(err)
	}
	return n
}

// ClearFaults removes every fault: SetError's, the Faults, the latency
// and a hang (as Unhang). Call counters are kept. Safe for concurrent use.
func (f *Factory) ClearFaults() {
	f.updateFaults(func(fl *faultState) {
		if fl.hung != nil {
			close(fl.hung)
		}
		*fl = faultState{}
	})
}

// updateFaults applies change to a copy of f's faults and publishes it,
// then re-evaluates lease renewal if whether it is blocked changed.
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
	if r.Op != op && (r.Op != OpAny || op == OpKeepAlive) {
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
// error names: for a transaction (OpTxn, "", its ops txn) that of the
// first op r matches (see Fault), so a rule is consumed at most once.
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

// inject applies fs (nil: no fault) to a call of op on p (see match) on
// a Conn closed by done: it waits out the latency and a hang, then
// returns SetError's error or that of the first rule that matches.
func (fs *faultState) inject(ctx context.Context, op Operation, p string, txn []backendkit.TxnOp, done <-chan struct{}) error {
	if fs == nil {
		return nil
	}
	if fs.latency > 0 {
		if err := await(ctx, time.After(fs.latency), done, p); err != nil {
			return err
		}
	}
	if fs.hung != nil {
		if err := await(ctx, fs.hung, done, p); err != nil {
			return err
		}
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

// await blocks a call on p until ch delivers or closes (nil), its
// context ends (Timeout, Interrupted) or done closes (Closed).
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

// CallCount returns how many calls of op were made on all Conns of f
// since its creation or ResetCallCounts, failed calls included. OpAny
// returns the total; OpKeepAlive returns 0. Safe for concurrent use; exact
// once the counted calls have returned.
func (f *Factory) CallCount(op Operation) int64 {
	if op == OpAny {
		var t int64
		for i := OpAny + 1; i < numOperations; i++ {
			t += f.counters[i].Load()
		}
		return t
	}
	if op < 0 || op >= numOperations {
		return 0
	}
	return f.counters[op].Load()
}

// ResetCallCounts zeroes every call counter of f. Safe for concurrent use.
func (f *Factory) ResetCallCounts() {
	for i := range f.counters {
		f.counters[i].Store(0)
	}
}

func (f *Factory) count(op Operation) { f.counters[op].Add(1) }

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

// claimHooks count each claim call of c's engine as its Operation and,
// after the engine's argument checks, run Conn.enter, except that
// NewLeaderParticipation meets only error faults and a closed Conn's
// ResumeLeaderParticipation is left to the engine (malformed or foreign
// info is InvalidArgument even then).
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
