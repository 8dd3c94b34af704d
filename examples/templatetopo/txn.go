package templatetopo

import (
	"context"
	"errors"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// Txn implements topo.Conn.Txn as ONE request: every condition is checked
// and every write applied under the store's mutex, so nobody sees a part
// of it. Every condition, and the implied condition of every write, is
// evaluated against the store as it was before the transaction, as the
// contract says (so CreateOp(p) then IfPresent(p) fails at op 1), and the
// first failing op is reported. Each write has exactly the semantics
// of the Conn method of its name, and all writes of one transaction take
// one revision (so a CreateOp and an UpdateOp of one Txn return the same
// version, of different files). Watches see the writes as they see the
// methods'.
//
// Errors, in order: those of backendkit.CheckTxn (the context, an empty
// list, a malformed op); InvalidArgument when there are more than
// MaxTxnOps ops (backendkit.TxnTooLarge) or an IfHeld Fence was not issued
// by this backend (backendkit.ForeignFence) or by another Store; Closed;
// Unavailable when the link is cut (nothing was sent); and for the first
// op whose condition fails, the *topo.TxnError of backendkit.TxnFailed:
// IfVersion NoNode or BadVersion, IfAbsent NodeExists, IfPresent NoNode,
// IfHeld LockLost (the lock was released or its session ended; also for a
// descriptor already unlocked), CreateOp NodeExists, UpdateOp with a
// version NoNode or BadVersion, DeleteOp NoNode or (with a version)
// BadVersion. Nothing is written then.
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
		if !ok {
			return nil, backendkit.ForeignFence(op, FactoryName)
		}
		d, mine := g.Driver().(driver)
		if !mine {
			return nil, backendkit.ForeignFence(op, FactoryName)
		}
		if d.c.store != c.store {
			return nil, backendkit.TxnOpError(op, backendkit.Wrap(topo.InvalidArgument, "",
				errors.New("if-held: the Fence was issued by another store")))
		}
		guards[i] = g
	}
	var versions []topo.Version
	err = c.do(func(s *Store) error {
		var err error
		versions, err = s.txn(c, checked, guards)
		return err
	})
	if err != nil {
		return nil, c.mapErr(ctx, err, "")
	}
	return versions, nil
}

// txn evaluates ops in order against the files as they are, and applies
// the writes only when every op succeeded. Called with store.mu held.
func (s *Store) txn(c *Conn, ops []backendkit.TxnOp, guards []claims.Guard) ([]topo.Version, error) {
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
			return nil, backendkit.TxnFailed(op, classify(failed))
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
		return out, nil // only conditions: nothing to write
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
	return out, nil
}
