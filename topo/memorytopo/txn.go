package memorytopo

import (
	"bytes"
	"context"
	"errors"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// errOtherStore is the cause of an IfHeld whose Fence another memorytopo
// store issued.
var errOtherStore = errors.New("if-held: the Fence was issued by a Conn of another memorytopo store")

// errEphemeral is the cause of an update of a lock or election entry.
var errEphemeral = errors.New("path is a lock or election entry")

// writeOps is the Operation of each write kind: the Conn method a fault
// on that kind of write names (see Fault), and the count of the method.
var writeOps = map[topo.TxnOpKind]Operation{topo.TxnCreate: OpCreate, topo.TxnUpdate: OpUpdate, topo.TxnDelete: OpDelete}

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
// unlocked or dropped or the term ended, or a ResumeLeaderParticipation on
// another Conn adopted the session it is on (as Check reports then);
// CreateOp fails with NodeExists, UpdateOp with NodeExists on an entry
// and, with a version, NoNode or BadVersion; DeleteOp with NoNode and,
// with a version, BadVersion. An IfHeld Fence of another backend or store
// is an InvalidArgument *topo.TxnError. memorytopo has no limit on the
// number of ops. Injected faults fail a transaction before anything of it
// is applied, so its outcome is never unknown (see Fault for which faults
// match).
func (c *Conn) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	c.f.count(OpTxn)
	checked, err := backendkit.CheckTxn(ctx, ops)
	if err != nil {
		return nil, err
	}
	s := c.s
	values := make([]*fileState, len(checked))
	for i, op := range checked {
		switch op.Kind {
		case topo.TxnIfHeld:
			if _, ours, mine := s.guard(op.Fence); !ours {
				if mine {
					return nil, backendkit.TxnOpError(op, backendkit.Wrap(topo.InvalidArgument, "", errOtherStore))
				}
				return nil, backendkit.ForeignFence(op, Name+"topo")
			}
		case topo.TxnCreate, topo.TxnUpdate:
			values[i] = &fileState{contents: bytes.Clone(op.Contents)}
		}
	}
	if err := c.enter(ctx, OpTxn, "", checked...); err != nil {
		return nil, err
	}
	// Under the store's write lock: Close again, every op's condition,
	// then the writes.
	s.lock()
	defer s.mu.Unlock()
	if err := c.closedErr(""); err != nil {
		return nil, err
	}
	for _, op := range checked {
		s.placeFor(op.Path)
	}
	for _, op := range checked {
		if err := c.txnCheck(op); err != nil {
			return nil, backendkit.TxnOpError(op, err)
		}
	}
	out := make([]topo.Version, len(checked))
	for _, op := range checked {
		if !op.Kind.IsCondition() {
			out[op.Index] = c.apply(op, values[op.Index])
		}
	}
	return out, nil
}

// txnCheck evaluates the condition of one checked op (the explicit one of
// an If kind, or the implied one of a write, the same for Conn.Create,
// Update and Delete) against the store, returning the *topo.Error it
// fails with. Call with c.s.mu held for writing.
func (c *Conn) txnCheck(op backendkit.TxnOp) error {
	n := c.files[op.Path] // the node of every file and placed entry
	fs := stateOf(n)      // an entry counts as present, but for a DeleteOp
	switch {
	case op.Kind == topo.TxnIfHeld:
		if !c.s.held(op.Fence) {
			return topo.NewError(topo.LockLost, op.Path)
		}
		return nil
	case op.Kind == topo.TxnUpdate && n != nil && n.entry != nil:
		return backendkit.Wrap(topo.NodeExists, op.Path, errEphemeral)
	case op.Kind == topo.TxnDelete && n != nil:
		fs = n.file.Load() // DeleteOp deletes files only
	}
	var version int64
	if fs != nil {
		version = fs.version
	}
	if code, failed := backendkit.TxnConditionFails(op, fs != nil, version); failed {
		return topo.NewError(code, op.Path)
	}
	return nil
}

// apply makes the write op (Create, Update or Delete, its condition
// checked) with value, as a new store revision, and returns the new
// version (nil for a delete). Call with c.s.mu held for writing.
func (c *Conn) apply(op backendkit.TxnOp, value *fileState) topo.Version {
	s, n := c.s, c.files[op.Path]
	if op.Kind == topo.TxnDelete {
		s.deleteFile(c.root, op.Path, n)
		return nil
	}
	if n == nil {
		n = ensureBelow(s.ensure(c.root), op.Path)
	}
	return s.setFile(c.root, op.Path, n, value).ver
}

// GuardedUpdate implements backendkit.GuardedUpdater (topo.GuardedUpdate
// calls it): exactly Txn(ctx, topo.IfHeld(f), topo.UpdateOp(filePath,
// contents, version)), counted as OpTxn, returning the version Txn returns
// at index 1.
func (c *Conn) GuardedUpdate(ctx context.Context, f topo.Fence, filePath string, contents []byte, version topo.Version) (topo.Version, error) {
	vs, err := c.Txn(ctx, topo.IfHeld(f), topo.UpdateOp(filePath, contents, version))
	if err != nil {
		return nil, err
	}
	return vs[1], nil
}
