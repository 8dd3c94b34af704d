package templatetopo

import (
	"context"
	"errors"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// Txn implements topo.Conn.Txn as ONE request, atomic under the store's
// mutex. Every condition, and the implied condition of every write, is
// evaluated against the store as it was before the transaction (so
// CreateOp(p) then IfPresent(p) fails at op 1); each write has the
// semantics of the Conn method of its name (Create, Update and Delete are
// one-op transactions), and all writes of one Txn take one revision.
//
// Errors, in order: those of backendkit.CheckTxn; InvalidArgument beyond
// MaxTxnOps ops, or for an IfHeld Fence of another backend or Store;
// Closed; Unavailable when the link is cut; and for the first op whose
// condition fails, the *topo.TxnError of backendkit.TxnFailed (IfVersion,
// UpdateOp and DeleteOp with a version: NoNode or BadVersion; IfAbsent and
// CreateOp: NodeExists; IfPresent and DeleteOp: NoNode; IfHeld: LockLost,
// also for a descriptor already unlocked), with nothing written.
func (c *Conn) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	checked, err := backendkit.CheckTxn(ctx, ops)
	if err != nil {
		return nil, err
	}
	if len(checked) > MaxTxnOps {
		return nil, backendkit.TxnTooLarge(FactoryName, len(checked), MaxTxnOps, "ops")
	}
	// Find each IfHeld's claim behind whatever middleware wraps it.
	guards := make([]claims.Guard, len(checked))
	for i, op := range checked {
		if op.Kind != topo.TxnIfHeld {
			continue
		}
		g, ok := claims.FenceGuard(op.Fence)
		var d driver
		if ok {
			d, ok = g.Driver().(driver)
		}
		if !ok {
			return nil, backendkit.ForeignFence(op, FactoryName)
		}
		if d.c.store != c.store {
			return nil, backendkit.TxnOpError(op, backendkit.Wrap(topo.InvalidArgument, "",
				errors.New("if-held: the Fence was issued by another store")))
		}
		guards[i] = g
	}
	var versions []topo.Version
	failed := -1
	err = c.do(func(s *Store) (err error) {
		versions, failed, err = s.txn(c, checked, guards)
		return err
	})
	if failed >= 0 {
		return nil, backendkit.TxnFailed(checked[failed], classify(err))
	}
	if err != nil {
		return nil, c.mapErr(ctx, err, "")
	}
	return versions, nil
}

// txn evaluates ops in order against the files as they are, and applies
// the writes only when every op succeeded; otherwise it returns the first
// failing op's position and store error. Called with store.mu held.
func (s *Store) txn(c *Conn, ops []backendkit.TxnOp, guards []claims.Guard) ([]topo.Version, int, error) {
	rev := s.rev + 1 // the revision of every write, taken only if there are any
	// pending holds the writes to apply, by store path (nil: delete).
	pending := map[string]*file{}
	out := make([]topo.Version, len(ops))
	for i, op := range ops {
		full := c.full(op.Path)
		f := s.files[full]
		var failed error // a store error, classified below
		switch op.Kind {
		case topo.TxnIfVersion:
			failed = checkVersion(f, op.Version)
		case topo.TxnIfAbsent, topo.TxnCreate:
			if f != nil {
				failed = errExists
			}
		case topo.TxnIfPresent:
			if f == nil {
				failed = errNotFound
			}
		case topo.TxnIfHeld:
			// The holder's view and the store's must both say held: a
			// claim lost to a resume keeps its entry in the store.
			g := guards[i]
			d := g.Driver().(driver)
			ss, _ := g.Session().Ref().(*session)
			if !g.Live() || !s.holds(d.key(g.Queue()), g.Entry().Token, ss) {
				failed = errSessionEnded
			}
		case topo.TxnUpdate:
			if op.Version != backendkit.AnyVersion {
				failed = checkVersion(f, op.Version)
			}
		case topo.TxnDelete:
			failed = checkVersion(f, op.Version)
		}
		if failed != nil {
			return nil, i, failed
		}
		switch op.Kind {
		case topo.TxnCreate, topo.TxnUpdate:
			pending[full] = &file{data: op.Contents}
			out[i] = topo.NumericVersion(rev)
		case topo.TxnDelete:
			pending[full] = nil
		}
	}
	if len(pending) == 0 {
		return out, -1, nil // only conditions: nothing to write
	}
	s.rev = rev
	for full, f := range pending {
		if f == nil {
			s.delete(full)
		} else {
			s.write(full, f.data, rev)
		}
	}
	s.notify()
	return out, -1, nil
}
