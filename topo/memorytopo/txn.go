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
// outcome is never unknown.
func (c *Conn) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	c.f.count(OpTxn)
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
			if !s.owns(op.Fence) {
				if isMemoryFence(op.Fence) {
					return nil, &topo.TxnError{Index: op.Index, Kind: op.Kind, Err: backendkit.Wrap(topo.InvalidArgument, "", errOtherStore)}
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.closedErr(""); err != nil {
		return nil, err
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
	out := make([]topo.Version, len(ops))
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

// isMemoryFence reports whether f (or a Fence it wraps) was issued by a
// memorytopo Conn.
func isMemoryFence(f topo.Fence) bool {
	if _, ok := backendkit.FenceAs[*lockDescriptor](f); ok {
		return true
	}
	_, ok := backendkit.FenceAs[*term](f)
	return ok
}
