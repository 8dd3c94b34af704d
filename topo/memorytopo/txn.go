package memorytopo

import (
	"bytes"
	"context"
	"errors"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

var errOtherStore = errors.New("if-held: the Fence was issued by a Conn of another memorytopo store")

var errEphemeral = errors.New("path is a lock or election entry")

var writeOps = map[topo.TxnOpKind]Operation{topo.TxnCreate: OpCreate, topo.TxnUpdate: OpUpdate, topo.TxnDelete: OpDelete}

// Txn implements topo.Conn.Txn in one step under the store's write lock,
// after the checks (backendkit.CheckTxn, each IfHeld's Fence from this
// store, then Closed, the partition and faults, see Fault): injected
// faults fail it before anything is applied, so it never returns
// Unavailable with an unknown outcome. An entry counts as present
// (IfPresent) and an UpdateOp of one fails with NodeExists; IfHeld fails
// with LockLost once the claim was released or lost (to a Resume on
// another Conn too). An IfHeld Fence of another backend or store is an
// InvalidArgument *topo.TxnError. There is no limit on the number of ops.
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
	s.lock()
	defer s.mu.Unlock()
	if err := c.closedErr(""); err != nil {
		return nil, err
	}
	for _, op := range checked {
		s.placeFor(op.Path)
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

// txnCheck evaluates the condition of one checked op (an If kind's, or
// the one a write implies), returning the *topo.Error it fails with.
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

func (c *Conn) apply(op backendkit.TxnOp, value *fileState) topo.Version {
	s, n := c.s, c.files[op.Path]
	if op.Kind == topo.TxnDelete {
		s.deleteFile(c.root, op.Path, n)
		return nil
	}
	if n == nil {
		n = ensureBelow(ensureBelow(s.top, c.root), op.Path)
	}
	return s.setFile(c.root, op.Path, n, value).ver
}

// GuardedUpdate implements backendkit.GuardedUpdater: Txn(ctx,
// topo.IfHeld(f), topo.UpdateOp(filePath, contents, version)), counted as
// OpTxn, returning the update's version.
func (c *Conn) GuardedUpdate(ctx context.Context, f topo.Fence, filePath string, contents []byte, version topo.Version) (topo.Version, error) {
	vs, err := c.Txn(ctx, topo.IfHeld(f), topo.UpdateOp(filePath, contents, version))
	if err != nil {
		return nil, err
	}
	return vs[1], nil
}
