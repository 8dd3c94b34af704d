package memorytopo

import (
	"context"
	"errors"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// errOtherStore is the cause of an IfHeld whose Fence another memorytopo
// store issued.
var errOtherStore = errors.New("if-held: the Fence was issued by a Conn of another memorytopo store")

// Txn implements topo.Conn.Txn under the store's write lock: after the
// checks (backendkit.CheckTxn, then each IfHeld's Fence must come from a
// Conn of this store, then Closed, the partition and injected faults, as
// for every call, see OpTxn), it evaluates every op's condition against
// the store as it was before the transaction, in op order, and returns
// the first failing one's *topo.TxnError; only when all hold does it apply
// every write, in op order, each exactly as the Conn method of the same
// name (new store revision, history, parents created, watch events), and
// no reader sees some of the writes without the others (Get, List and
// watches see none or all). It returns the new version of each CreateOp
// and UpdateOp, nil for the other ops.
//
// Conditions: IfVersion fails with NoNode or BadVersion, IfAbsent with
// NodeExists, IfPresent with NoNode (a lock or election entry counts as
// present, as Get reads it), IfHeld with LockLost once the lock was
// unlocked or dropped or the term ended; CreateOp fails with NodeExists,
// UpdateOp with NodeExists on an entry and, with a version, NoNode or
// BadVersion; DeleteOp with NoNode and, with a version, BadVersion. An
// IfHeld Fence of another backend or store is an InvalidArgument
// *topo.TxnError. memorytopo has no limit on the number of ops. Injected
// faults fail a transaction before anything of it is applied, so its
// outcome is never unknown (see Fault for which faults match).
func (c *Conn) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	c.f.count(OpTxn)
	// The shape of topo.GuardedUpdate (IfHeld then UpdateOp) of an
	// existing file takes Update's per-file locking instead of the
	// store's write lock (see guardedUpdate), with the same results.
	if len(ops) == 2 && ops[0].Kind == topo.TxnIfHeld && ops[1].Kind == topo.TxnUpdate {
		if v, done, err := c.guardedUpdate(ctx, ops[0].Fence, ops[1].Path, ops[1].Contents, ops[1].Version); done {
			if err != nil {
				return nil, err
			}
			return []topo.Version{nil, v}, nil
		}
	}
	return c.txn(ctx, ops)
}

// GuardedUpdate implements backendkit.GuardedUpdater, the fast path of
// topo.GuardedUpdate: it is exactly Txn(ctx, topo.IfHeld(f),
// topo.UpdateOp(filePath, contents, version)) -- counted as OpTxn, with
// the same checks, faults (OpTxn, OpAny, and OpUpdate on filePath),
// writes and errors -- returning the version Txn returns at index 1.
func (c *Conn) GuardedUpdate(ctx context.Context, f topo.Fence, filePath string, contents []byte, version topo.Version) (topo.Version, error) {
	c.f.count(OpTxn)
	// Without building the op and result slices of Txn; the results are
	// the same (TestGuardedUpdateFastPathMatchesTxn).
	if v, done, err := c.guardedUpdate(ctx, f, filePath, contents, version); done {
		return v, err
	}
	vs, err := c.txn(ctx, []topo.TxnOp{topo.IfHeld(f), topo.UpdateOp(filePath, contents, version)})
	if err != nil {
		return nil, err
	}
	return vs[1], nil
}

var _ backendkit.GuardedUpdater = (*Conn)(nil)

// txn is Txn once counted, without the guardedUpdate shortcut.
func (c *Conn) txn(ctx context.Context, ops []topo.TxnOp) ([]topo.Version, error) {
	checked, err := backendkit.CheckTxn(ctx, ops)
	if err != nil {
		return nil, err
	}
	s := c.s
	values := make([]*fileState, len(checked))
	writes := 0
	for i := range checked {
		op := &checked[i]
		switch op.Kind {
		case topo.TxnIfHeld:
			if _, ours, mine := s.guard(op.Fence); !ours {
				if mine {
					return nil, backendkit.TxnOpError(*op, backendkit.Wrap(topo.InvalidArgument, "", errOtherStore))
				}
				return nil, backendkit.ForeignFence(*op, Name+"topo")
			}
		case topo.TxnCreate, topo.TxnUpdate:
			values[i] = newValue(op.Contents)
			writes++
		case topo.TxnDelete:
			writes++
		}
	}
	if err := c.closedErr(""); err != nil {
		return nil, err
	}
	if err := c.waitCut(ctx, ""); err != nil {
		return nil, err
	}
	if err := c.f.injectTxn(ctx, checked, c.done); err != nil {
		return nil, err
	}
	return c.txnApply(checked, values, writes)
}

// txnApply is the part of Txn under the store's write lock: it checks
// Close again, evaluates every op's condition, then applies the writes.
// values holds the prepared value of each CreateOp and UpdateOp (by op
// index), writes the number of write ops.
func (c *Conn) txnApply(checked []backendkit.TxnOp, values []*fileState, writes int) ([]topo.Version, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.closedErr(""); err != nil {
		return nil, err
	}
	for _, op := range checked {
		s.placeFor(op.Path)
	}
	for _, op := range checked {
		if err := c.txnCheck(op); err != nil {
			return nil, err
		}
	}
	if writes > 1 {
		s.txnSeq.Add(1) // odd: Get waits for the writes below (see load)
		defer s.txnSeq.Add(1)
	}
	out := make([]topo.Version, len(checked))
	for _, op := range checked {
		switch op.Kind {
		case topo.TxnCreate:
			full := c.full(op.Path)
			out[op.Index] = s.setFile(full, s.ensure(full), values[op.Index]).ver
		case topo.TxnUpdate:
			n := c.idx.valueNode(op.Path)
			if n == nil {
				n = s.ensure(c.full(op.Path))
			}
			out[op.Index] = s.setFileRel(c, op.Path, n, values[op.Index]).ver
		case topo.TxnDelete:
			full := c.full(op.Path)
			s.deleteFile(full, s.lookup(full))
		}
	}
	return out, nil
}

// guardedUpdate is Txn's fast path for the shape topo.GuardedUpdate sends:
// IfHeld(f) then UpdateOp(filePath, contents, version) (it takes the
// fields checkTxnOp reads of those two ops), returning the UpdateOp's new
// version (Txn's result at index 1). It reports done=false,
// having done nothing but pure input checks (no Closed check, partition,
// faults or lock), when the general path must run instead: when the ops
// would fail backendkit.CheckTxn or f is not a Fence of this store (the
// general path then returns the very same error), or a cancelled context.
// Otherwise it makes exactly the checks of the general path in the same
// order -- the checked ops it builds are those CheckTxn would return --
// and then writes in place (guardedInPlace) or, when that cannot, runs the
// general locked part (txnApply) with those checked ops.
func (c *Conn) guardedUpdate(ctx context.Context, f topo.Fence, filePath string, contents []byte, version topo.Version) (topo.Version, bool, error) {
	s := c.s
	if f == nil || !s.owns(f) {
		return nil, false, nil
	}
	if backendkit.CheckContext(ctx, "") != nil {
		return nil, false, nil
	}
	// CheckUpdate makes checkTxnOp's checks of an UpdateOp (CheckCreate,
	// then the version); with one write there is no duplicate path.
	// checkWrite is CheckUpdate with Update's fast path for canonical,
	// unreserved paths (same results, TestCheckWriteMatchesBackendkit).
	p, want, err := checkWrite(filePath, contents, version)
	if err != nil {
		return nil, false, nil
	}
	// checked are the ops CheckTxn would return; built only where they
	// are used (faults, the general locked part), the in-place write
	// names its errors' ops itself.
	checked := func() []backendkit.TxnOp {
		return []backendkit.TxnOp{
			{Index: 0, Kind: topo.TxnIfHeld, Version: backendkit.AnyVersion, Fence: f},
			{Index: 1, Kind: topo.TxnUpdate, Path: p, Contents: contents, Version: want},
		}
	}
	value := newValue(contents)
	if err := c.closedErr(""); err != nil {
		return nil, true, err
	}
	if err := c.waitCut(ctx, ""); err != nil {
		return nil, true, err
	}
	if c.f.faultState.Load() != nil {
		if err := c.f.injectTxn(ctx, checked(), c.done); err != nil {
			return nil, true, err
		}
	}
	if v, done, err := c.guardedInPlace(f, p, want, value); done {
		if err != nil {
			return nil, true, err
		}
		return v, true, nil
	}
	out, err := c.txnApply(checked(), []*fileState{nil, value}, 1)
	if err != nil {
		return nil, true, err
	}
	return out[1], true, nil
}

// guardedInPlace is updateInPlace for guardedUpdate: the IfHeld check of
// f and the rewrite of the existing file p (canonical) at version want, with the store's mu held for reading
// and the file's node locked. It reports done=false, having changed
// nothing, where updateInPlace does (nothing published at the path, an
// entry there, a WatchRecursive registered); txnApply then decides under
// the write lock.
//
// Why the IfHeld check is atomic with the write: a Fence stops being held
// only when its entry is removed (removeEntry: Unlock, ExpireSession, a
// lapsed lease's timer, Close, an election's Stop, all through
// revokeLease or removeEntry) or the descriptor is marked unlocked
// (Unlock), and every one of those runs with mu held for WRITING, which
// excludes the read hold this function keeps from the check until after
// setFile has made the new value current. So the claim cannot end between
// the check and the write: either the removal ran before (the check sees
// removed or unlocked and fails with LockLost, writing nothing) or it runs
// after the write (which then precedes the Fence's Done closing, as with
// the general path under the write lock). Both flags only ever go from
// false to true, so a LockLost seen here is what txnApply would see too.
func (c *Conn) guardedInPlace(f topo.Fence, p string, want int64, value *fileState) (v topo.Version, done bool, err error) {
	s := c.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := c.closedErr(""); err != nil {
		return nil, true, err
	}
	if !s.held(f) {
		return nil, true, backendkit.TxnFailed(backendkit.TxnOp{Index: 0, Kind: topo.TxnIfHeld}, topo.LockLost)
	}
	if len(s.recWatchers) > 0 {
		return nil, false, nil
	}
	n := c.idx.valueNode(p)
	if n == nil || n.entry != nil {
		return nil, false, nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	old := n.file
	if old == nil {
		return nil, false, nil
	}
	if want != backendkit.AnyVersion && old.version != want {
		return nil, true, backendkit.TxnFailed(backendkit.TxnOp{Index: 1, Kind: topo.TxnUpdate, Path: p}, topo.BadVersion)
	}
	return s.setFileRel(c, p, n, value).ver, true, nil
}

// txnCheck evaluates the condition of one checked op (the explicit one of
// an If kind, or the implied one of a write) against the store. Call with
// c.s.mu held for writing.
func (c *Conn) txnCheck(op backendkit.TxnOp) error {
	s := c.s
	switch op.Kind {
	case topo.TxnIfHeld:
		if !s.held(op.Fence) {
			return backendkit.TxnFailed(op, topo.LockLost)
		}
		return nil
	case topo.TxnIfVersion:
		fs := c.idx.load(op.Path)
		switch {
		case fs == nil:
			return backendkit.TxnFailed(op, topo.NoNode)
		case fs.version != op.Version:
			return backendkit.TxnFailed(op, topo.BadVersion)
		}
		return nil
	case topo.TxnIfAbsent:
		if c.idx.load(op.Path) != nil {
			return backendkit.TxnFailed(op, topo.NodeExists)
		}
		return nil
	case topo.TxnIfPresent:
		if c.idx.load(op.Path) == nil {
			return backendkit.TxnFailed(op, topo.NoNode)
		}
		return nil
	}
	// The writes: Create, Update and Delete's own conditions.
	n := c.idx.valueNode(op.Path)
	if n == nil {
		n = s.lookup(c.full(op.Path)) // maybe a directory
	}
	switch op.Kind {
	case topo.TxnCreate:
		if n != nil && (n.file != nil || n.entry != nil) {
			return backendkit.TxnFailed(op, topo.NodeExists)
		}
	case topo.TxnUpdate:
		switch {
		case n != nil && n.entry != nil:
			return backendkit.TxnFailed(op, topo.NodeExists)
		case op.Version == backendkit.AnyVersion:
		case n == nil || n.file == nil:
			return backendkit.TxnFailed(op, topo.NoNode)
		case n.file.version != op.Version:
			return backendkit.TxnFailed(op, topo.BadVersion)
		}
	case topo.TxnDelete:
		switch {
		case n == nil || n.file == nil:
			return backendkit.TxnFailed(op, topo.NoNode)
		case op.Version != backendkit.AnyVersion && n.file.version != op.Version:
			return backendkit.TxnFailed(op, topo.BadVersion)
		}
	}
	return nil
}
