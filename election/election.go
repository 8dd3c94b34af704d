// Package election is a master-election API in the style of Trillian's
// election2 package, implemented once over topo.Conn's LeaderParticipation so
// that every topokit backend (etcd, ZooKeeper, Consul, memorytopo) provides
// it.
//
// An Election is one instance's candidacy for mastership of one resource.
// The usual cycle is Await (block until master), WithMastership (a context to
// do the master's work under), and Resign or Close. Runner wraps that cycle
// in a loop that re-campaigns after mastership ends and retries transient
// store errors with exponential backoff; permanent ones (IsPermanent:
// PermissionDenied, Closed, invalid arguments, a missing feature) end it.
//
// Mastership can end without the instance asking: when the store drops the
// candidate's session or lease (etcd lease expiry, ZooKeeper session expiry,
// Consul session invalidation) or its election entry is deleted, the backend
// cancels the leadership context, and every context WithMastership returned
// is cancelled with it. Work done as master must therefore run under that
// context and stop when it ends. As with any lease-based election, a master
// that is cut off from the store learns of the loss only when its session
// lapses locally, so a new master may start before the old one has noticed;
// writes that must never overlap need fencing: write through transactions
// guarded by the term (topo.GuardedUpdate with Election.Term, or
// topo.IfHeld in a Conn.Txn), which the store refuses once the term has
// ended, and hand the term's fencing token to any other resource the
// master writes to, so that it can refuse an older token.
//
// The package subdirectory electiontest holds a conformance harness for any
// Election implementation.
package election

import (
	"context"

	"github.com/topokit/topokit/topo"
)

// Election is one instance's participation in the master election for one
// resource. Implementations are safe for concurrent use.
type Election interface {
	// Await blocks until this instance is master, or until ctx ends. It
	// returns nil at once when the instance already is master. When ctx
	// ends first it returns an error and withdraws the candidacy it started,
	// so the instance never becomes master without a caller knowing.
	Await(ctx context.Context) error

	// WithMastership returns a context derived from ctx that stays live
	// while this instance is master and is cancelled when mastership is
	// lost (from the store's side) or given up (Resign, Close). When the
	// instance is not master the returned context is already cancelled and
	// the error is nil.
	WithMastership(ctx context.Context) (context.Context, error)

	// Term returns the current mastership term as a topo.Fence: its Token
	// is the term's fencing token, strictly greater for every later term of
	// the same resource whichever instance is master; its Done closes when
	// the term ends; topo.IfHeld(term) makes a transaction conditional on
	// it (on the Conn of the same backend and store). It returns a
	// NotLeader error when this instance is not master, and Closed after
	// Close.
	Term() (topo.Fence, error)

	// Resign gives up mastership (or a pending candidacy). The contexts
	// returned by WithMastership are cancelled before Resign returns. The
	// instance may Await again later. Resign is a no-op when the instance is
	// neither master nor campaigning.
	Resign(ctx context.Context) error

	// Close stops participating: it resigns, on a best-effort basis even when
	// ctx is already cancelled, and releases the Election's resources. Later
	// calls return errors. Close is idempotent.
	Close(ctx context.Context) error
}

// Factory creates Elections for one instance.
type Factory interface {
	// NewElection returns this instance's Election for resourceID. Nothing
	// happens in the store until Await is called.
	NewElection(ctx context.Context, resourceID string) (Election, error)
}

// IsPermanent reports whether err is an election or store error that
// retrying cannot fix; it is topo.IsPermanent: the store refused the call
// for lack of permission (topo.PermissionDenied: retrying with the same
// credentials is refused again), the Election or its Conn was closed
// (topo.Closed), the arguments are invalid (topo.InvalidArgument,
// topo.InvalidPath), or the backend lacks the feature
// (topo.NoImplementation). Every other error, including topo.Unavailable,
// topo.Timeout, topo.ResourceExhausted and topo.LockLost, is transient. It
// is the default classification of Runner.
func IsPermanent(err error) bool { return topo.IsPermanent(err) }
