package backendkit

import (
	"context"
	"errors"
	"fmt"

	"github.com/topokit/topokit/topo"
)

// TxnOp is one operation of a transaction after CheckTxn validated it.
type TxnOp struct {
	// Index is the op's position in the transaction, for *topo.TxnError.
	Index int
	// Kind is the op's kind.
	Kind topo.TxnOpKind
	// Path is the canonical file path ("" for TxnIfHeld).
	Path string
	// Contents is what TxnCreate and TxnUpdate write.
	Contents []byte
	// Version is the version TxnIfVersion requires, or the compare-and-set
	// version of TxnUpdate and TxnDelete: AnyVersion for none.
	Version int64
	// Fence is the claim of TxnIfHeld.
	Fence topo.Fence
}

// CheckTxn validates the arguments of Conn.Txn, in the package's check
// order, and returns the ops in canonical form. It returns, first to last:
// the Timeout or Interrupted *topo.Error of CheckContext; an
// InvalidArgument *topo.Error when ops is empty; and for the first
// malformed op a *topo.TxnError with its index wrapping an InvalidArgument
// *topo.Error (unknown kind, nil Fence for TxnIfHeld, missing version for
// TxnIfVersion, oversized contents, bad version, a second write of a path
// an earlier op writes) or the InvalidPath *topo.Error of
// topo.CleanFilePath or CheckReserved (conditions, like writes, refuse
// reserved paths: no file lives there). It does not check the store's
// size limits, nor whether a Fence belongs to the backend (see FenceAs).
func CheckTxn(ctx context.Context, ops []topo.TxnOp) ([]TxnOp, error) {
	if err := CheckContext(ctx, ""); err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		return nil, Wrap(topo.InvalidArgument, "", errors.New("a transaction needs at least one op"))
	}
	out := make([]TxnOp, len(ops))
	written := make(map[string]int, len(ops))
	for i, op := range ops {
		c, err := checkTxnOp(op)
		if err != nil {
			return nil, &topo.TxnError{Index: i, Kind: op.Kind, Err: err}
		}
		c.Index = i
		if !op.Kind.IsCondition() {
			if j, dup := written[c.Path]; dup {
				return nil, &topo.TxnError{Index: i, Kind: op.Kind, Err: Wrap(topo.InvalidArgument, c.Path,
					fmt.Errorf("op %d already writes this path: a transaction writes a path at most once", j))}
			}
			written[c.Path] = i
		}
		out[i] = c
	}
	return out, nil
}

// checkTxnOp validates one op (without its index).
func checkTxnOp(op topo.TxnOp) (TxnOp, error) {
	c := TxnOp{Kind: op.Kind, Version: AnyVersion}
	switch op.Kind {
	case topo.TxnIfHeld:
		if op.Fence == nil {
			return c, Wrap(topo.InvalidArgument, "", errors.New("if-held needs a Fence (a LockDescriptor or a leadership term)"))
		}
		c.Fence = op.Fence
		return c, nil
	case topo.TxnIfVersion, topo.TxnIfAbsent, topo.TxnIfPresent, topo.TxnDelete:
		p, err := cleanWritePath(op.Path)
		if err != nil {
			return c, err
		}
		c.Path = p
		if op.Kind == topo.TxnIfVersion && op.Version == nil {
			return c, Wrap(topo.InvalidArgument, p, errors.New("if-version needs a version"))
		}
		if op.Kind == topo.TxnIfVersion || op.Kind == topo.TxnDelete {
			_, c.Version, err = withVersion(p, op.Version)
		}
		return c, err
	case topo.TxnCreate, topo.TxnUpdate:
		p, err := CheckCreate(op.Path, op.Contents)
		if err != nil {
			return c, err
		}
		c.Path, c.Contents = p, op.Contents
		if op.Kind == topo.TxnUpdate {
			_, c.Version, err = withVersion(p, op.Version)
		}
		return c, err
	}
	return c, Wrap(topo.InvalidArgument, op.Path, fmt.Errorf("unknown transaction op kind %d", int(op.Kind)))
}

// TxnTooLarge returns the InvalidArgument *topo.Error a backend returns,
// before sending anything, for a transaction that needs n store operations
// where the store takes at most limit (what counts as one is the store's:
// etcd counts compares and requests separately, Consul counts ops,
// ZooKeeper bytes).
func TxnTooLarge(store string, n, limit int, unit string) error {
	return Wrap(topo.InvalidArgument, "", fmt.Errorf("transaction too large for %s: %d %s, at most %d", store, n, unit, limit))
}

// TxnFailed returns the *topo.TxnError for the op at index i failing with
// code (NodeExists, NoNode, BadVersion or LockLost) on path.
func TxnFailed(op TxnOp, code topo.ErrorCode) error {
	return TxnOpError(op, topo.NewError(code, op.Path))
}

// TxnOpError returns the *topo.TxnError that names op (its index and kind)
// as the op that failed with err, a *topo.Error built with topo.NewError or
// Wrap (or returned by MapError): the one way, with TxnFailed and
// ForeignFence, that a backend builds a transaction's error for one op, for
// example a Fence issued by another store of this backend, or a store
// error that the store attributes to one op. It returns nil when err is nil.
func TxnOpError(op TxnOp, err error) error {
	if err == nil {
		return nil
	}
	return &topo.TxnError{Index: op.Index, Kind: op.Kind, Err: err}
}

// FenceAs finds, in f and the Fences it wraps (through their
// Unwrap() Fence methods, see topo.Fence), the first of type T: a
// backend's own lock descriptor or term behind decorators. It reports
// false when there is none, i.e. f was issued by another backend (IfHeld
// then fails with InvalidArgument).
func FenceAs[T topo.Fence](f topo.Fence) (T, bool) {
	for f != nil {
		if t, ok := f.(T); ok {
			return t, true
		}
		u, ok := f.(interface{ Unwrap() topo.Fence })
		if !ok {
			break
		}
		f = u.Unwrap()
	}
	var zero T
	return zero, false
}

// ForeignFence returns the *topo.TxnError for an IfHeld op whose Fence was
// not issued by this backend (FenceAs found none).
func ForeignFence(op TxnOp, backend string) error {
	return TxnOpError(op, Wrap(topo.InvalidArgument, "",
		fmt.Errorf("if-held: the Fence (%T) was not issued by the %s backend", op.Fence, backend)))
}

// GuardedUpdater is an optional fast path of topo.GuardedUpdate that a
// backend's Conn MAY implement; programs call topo.GuardedUpdate, never
// this method. topo.GuardedUpdate(ctx, conn, f, filePath, contents,
// version) calls conn.GuardedUpdate(ctx, f, filePath, contents, version)
// when conn has this method, and conn.Txn(ctx, topo.IfHeld(f),
// topo.UpdateOp(filePath, contents, version)) otherwise.
//
// An implementation must behave exactly as that transaction on the same
// Conn: the same checks in the same order, the same writes, call
// counting, faults and watch events, and the same errors -- an input error
// or a failed condition is the *topo.TxnError the transaction returns
// (Index 0 for the IfHeld op: LockLost, or InvalidArgument for a foreign
// Fence; Index 1 for the UpdateOp: InvalidPath, InvalidArgument, NoNode,
// BadVersion, NodeExists), any other error (Timeout, Interrupted, Closed,
// an injected or store failure) the same *topo.Error. It returns the new
// version of the file (the transaction's result at index 1). It exists to
// spare the transaction's op slice and result slice; it must be safe for
// concurrent use like every Conn method.
type GuardedUpdater interface {
	GuardedUpdate(ctx context.Context, f topo.Fence, filePath string, contents []byte, version topo.Version) (topo.Version, error)
}

// ConditionsFirst returns the indexes of ops in the order a store that
// runs a transaction's requests one after the other (seeing the writes
// before each) must send them, so that every condition, and every
// condition implied by a write, sees the state before the transaction:
// the conditions in op order, then the writes in op order (CheckTxn
// refuses two writes of one path). It leaves out the indexes skip reports
// (nil skips none). zk2topo and consultopo build their transactions in
// this order.
func ConditionsFirst(ops []TxnOp, skip func(i int) bool) []int {
	order := make([]int, 0, len(ops))
	for _, conditions := range []bool{true, false} {
		for i, op := range ops {
			if op.Kind.IsCondition() == conditions && (skip == nil || !skip(i)) {
				order = append(order, i)
			}
		}
	}
	return order
}
