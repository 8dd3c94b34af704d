package topo

import "context"

// Fence is a claim the store can revoke: a held lock (LockDescriptor) or a
// leadership term (LeaderParticipation.Term). Its fencing token lets a
// resource that an old holder may still reach refuse that holder's late
// requests, and IfHeld makes a transaction conditional on the claim, in the
// store itself. Its methods are safe for concurrent use.
//
// A decorator that wraps a Fence (see Middleware) must implement
//
//	Unwrap() Fence
//
// returning the Fence it wraps, so that the backend that issued the claim
// can find its own through backendkit.FenceAs (IfHeld needs it).
type Fence interface {
	// Token returns the claim's fencing token, a positive number fixed for
	// the claim's life. For one lock path (or one election), the token of
	// every later holder (or term) is strictly greater than the token of
	// every earlier one, whichever Conn or process held it, across session
	// and lease loss, Conn restarts and store restarts. Tokens of different
	// paths are not comparable. The token comes from the store: etcd's
	// create revision of the lock key, ZooKeeper's creation zxid of the
	// lock entry, Consul's ModifyIndex of the lock key at acquisition,
	// memorytopo's store revision (see each backend's package doc).
	Token() int64

	// Done returns a channel that is closed once the claim ends: when it
	// is released (Unlock, Stop, Resign) or when the backend learns that
	// the store dropped it (session or lease ended, entry deleted behind
	// the holder's back). A closed Done is final. Between the store
	// dropping a claim and Done closing there is a delay bounded by the
	// backend's session safety margin; IfHeld and the store, not Done, are
	// what make a write safe.
	Done() <-chan struct{}

	// Check returns nil while the claim is held, LockLost once the store
	// dropped it (session or lease lost, entry deleted behind the holder's
	// back), and Interrupted once it was released. Once the Conn that
	// issued the claim is closed it returns Closed, on every backend and
	// whatever happened to the claim before (Close released it). It
	// returns Timeout or Interrupted when ctx has ended, and the store's
	// errors (Unavailable, PermissionDenied) when holding cannot be
	// proven. Backends check their local session state and may ask the
	// store.
	Check(ctx context.Context) error
}
