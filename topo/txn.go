package topo

import (
	"context"
	"fmt"
)

// TxnOpKind is the kind of one operation of a transaction (see Conn.Txn).
type TxnOpKind int

// The kinds of transaction operations. The If kinds are conditions; the
// others are writes, which carry the conditions their Conn method has
// (CreateOp: the file is absent; UpdateOp and DeleteOp with a non-nil
// version: the file is at that version).
const (
	// TxnIfVersion holds when the file at Path exists at Version. It fails
	// with NoNode when the file is absent and BadVersion when its version
	// differs.
	TxnIfVersion TxnOpKind = iota + 1
	// TxnIfAbsent holds when no file is at Path; it fails with NodeExists.
	TxnIfAbsent
	// TxnIfPresent holds when a file is at Path; it fails with NoNode.
	TxnIfPresent
	// TxnIfHeld holds while Fence (a lock or a leadership term issued by the
	// same backend and store) is still held in the store; it fails with
	// LockLost once the claim was released or dropped.
	TxnIfHeld
	// TxnCreate creates the file at Path holding Contents (missing parent
	// directories are created); it fails with NodeExists when a file is
	// there.
	TxnCreate
	// TxnUpdate writes Contents to the file at Path. With a nil Version it
	// is unconditional and creates the file when it is absent; with a
	// non-nil one it fails with NoNode when the file is absent and
	// BadVersion when its version differs.
	TxnUpdate
	// TxnDelete deletes the file at Path. It fails with NoNode when the
	// file is absent and, with a non-nil Version, with BadVersion when its
	// version differs.
	TxnDelete
)

var txnOpKindNames = [...]string{
	TxnIfVersion: "if-version",
	TxnIfAbsent:  "if-absent",
	TxnIfPresent: "if-present",
	TxnIfHeld:    "if-held",
	TxnCreate:    "create",
	TxnUpdate:    "update",
	TxnDelete:    "delete",
}

// String returns the kind's name as topoctl txn spells it: "if-version",
// "if-absent", "if-present", "if-held", "create", "update", "delete".
func (k TxnOpKind) String() string {
	if k > 0 && int(k) < len(txnOpKindNames) {
		return txnOpKindNames[k]
	}
	return fmt.Sprintf("unknown op kind %d", int(k))
}

// IsCondition reports whether k is one of the If kinds, which write
// nothing.
func (k TxnOpKind) IsCondition() bool {
	return k >= TxnIfVersion && k <= TxnIfHeld
}

// TxnOp is one operation of a transaction: a condition or a write. Build it
// with IfVersion, IfAbsent, IfPresent, IfHeld, CreateOp, UpdateOp or
// DeleteOp; the fields are exported so that backends and tools can read
// them.
type TxnOp struct {
	// Kind says what the operation does.
	Kind TxnOpKind
	// Path is the file the operation reads or writes (relative to the
	// cell root, as everywhere). Unused by TxnIfHeld.
	Path string
	// Contents is what TxnCreate and TxnUpdate write (at most MaxValueSize
	// bytes).
	Contents []byte
	// Version is the version TxnIfVersion requires (non-nil), or the
	// compare-and-set version of TxnUpdate and TxnDelete (nil for none).
	Version Version
	// Fence is the claim TxnIfHeld requires.
	Fence Fence
}

// IfVersion is a condition that holds when the file at filePath is at
// version.
func IfVersion(filePath string, version Version) TxnOp {
	return TxnOp{Kind: TxnIfVersion, Path: filePath, Version: version}
}

// IfAbsent is a condition that holds when no file is at filePath.
func IfAbsent(filePath string) TxnOp { return TxnOp{Kind: TxnIfAbsent, Path: filePath} }

// IfPresent is a condition that holds when a file is at filePath.
func IfPresent(filePath string) TxnOp { return TxnOp{Kind: TxnIfPresent, Path: filePath} }

// IfHeld is a condition that holds while f, a lock or a leadership term
// issued by the Conn's backend on the same store, is still held in the
// store.
func IfHeld(f Fence) TxnOp { return TxnOp{Kind: TxnIfHeld, Fence: f} }

// CreateOp creates filePath holding contents; it fails if a file is there.
func CreateOp(filePath string, contents []byte) TxnOp {
	return TxnOp{Kind: TxnCreate, Path: filePath, Contents: contents}
}

// UpdateOp writes contents to filePath: unconditionally when version is
// nil (creating the file if absent), as a compare-and-set otherwise.
func UpdateOp(filePath string, contents []byte, version Version) TxnOp {
	return TxnOp{Kind: TxnUpdate, Path: filePath, Contents: contents, Version: version}
}

// DeleteOp deletes filePath, as a compare-and-set when version is non-nil.
func DeleteOp(filePath string, version Version) TxnOp {
	return TxnOp{Kind: TxnDelete, Path: filePath, Version: version}
}

// TxnError is the error of a transaction that failed because of one of its
// operations: a condition that did not hold (its Err is a *Error with code
// NodeExists, NoNode, BadVersion or LockLost), or an operation that is
// malformed (InvalidPath, InvalidArgument), found before anything was sent.
// Nothing of the transaction was written. errors.Is(err, code) sees the
// code through Unwrap; errors.As finds the *TxnError and its Index.
type TxnError struct {
	// Index is the position of the failing operation in the transaction.
	Index int
	// Kind is the failing operation's kind.
	Kind TxnOpKind
	// Err is the *Error saying why it failed.
	Err error
}

// Error names the operation and why it failed, e.g.
// "transaction op 1 (if-version): bad node version: a/b".
func (e *TxnError) Error() string {
	return fmt.Sprintf("transaction op %d (%s): %v", e.Index, e.Kind, e.Err)
}

// Unwrap returns Err.
func (e *TxnError) Unwrap() error { return e.Err }

// guardedUpdater is the optional fast path of GuardedUpdate a backend's
// Conn may implement: backendkit.GuardedUpdater documents it for backend
// authors.
type guardedUpdater interface {
	GuardedUpdate(ctx context.Context, f Fence, filePath string, contents []byte, version Version) (Version, error)
}

// GuardedUpdate writes contents to filePath only while f is held: one
// transaction of IfHeld(f) and UpdateOp(filePath, contents, version), one
// store round trip (two on ZooKeeper, which reads the claim's entry
// before the transaction: see zk2topo's Txn). It returns the new version. A lost or released claim
// gives a *TxnError with Index 0 and LockLost; a stale version gives Index
// 1 with BadVersion (or NoNode); nothing is written in either case. Other
// errors are those of Conn.Txn. When conn has a GuardedUpdate method of
// its own (a backend's optional fast path with the same results, see
// backendkit.GuardedUpdater) it is called instead of Txn.
func GuardedUpdate(ctx context.Context, conn Conn, f Fence, filePath string, contents []byte, version Version) (Version, error) {
	if g, ok := conn.(guardedUpdater); ok {
		return g.GuardedUpdate(ctx, f, filePath, contents, version)
	}
	vs, err := conn.Txn(ctx, IfHeld(f), UpdateOp(filePath, contents, version))
	if err != nil {
		return nil, err
	}
	return vs[1], nil
}

// GuardedDelete deletes filePath only while f is held: one transaction of
// IfHeld(f) and DeleteOp(filePath, version). Its errors are those of
// GuardedUpdate.
func GuardedDelete(ctx context.Context, conn Conn, f Fence, filePath string, version Version) error {
	_, err := conn.Txn(ctx, IfHeld(f), DeleteOp(filePath, version))
	return err
}
