// Package backendkit holds what a topo.Conn implementation (a backend)
// needs and an application does not: the argument checks every backend
// runs before it touches its store, in one documented order; the frame
// that maps a store client's errors onto *topo.Error values; path joining;
// the names of the reserved lock and election places of Vitess's layout;
// the constructor of List's report of foreign files at those places; and
// pieces that several backends share: OrDefault (Options defaults),
// MergeEntries (listings of stores of flat keys), Snapshot and Stamp
// (recursive watches), ConditionsFirst (transactions of stores that run
// their requests in sequence), TxnConditionFails (a transaction op's
// condition evaluated on its path's state, for backends that read or hold
// that state), Linked, Sleep and Send (contexts, pauses and sends that
// end with a Conn).
//
// Every backend in this module (memorytopo, etcd2topo, zk2topo,
// consultopo) and the template under examples/templatetopo use it the same
// way, so that all backends reject the same bad input with the same error.
// A custom backend should do the same; docs/backends.md walks through it.
//
// # Check order
//
// Every method of a Conn validates its arguments in this order, before it
// sends anything to its store, and returns the first failure:
//
//  1. the context (CheckContext): Timeout or Interrupted when it has ended;
//  2. the path's syntax (topo.CleanFilePath, CleanDirPath, CleanPrefix):
//     InvalidPath;
//  3. the reserved-name rule (CheckReserved, CheckLockPath): InvalidPath;
//  4. the value's size (CheckValue): InvalidArgument;
//  5. the version (VersionNumber; GetVersion's negative number) and
//     LockWithTTL's ttl: InvalidArgument;
//  6. whether the Conn is closed: Closed.
//
// CheckCreate, CheckUpdate, CheckDelete, CheckGetVersion, CheckLock,
// CheckLockWithTTL, CheckElection and CheckTxn run steps 2 to 5 for their
// method, with the same messages on every backend; Begin runs step 1,
// one of them (or a path check) and step 6 around them, Ready steps 1 and
// 6 alone. Bad input therefore gets the
// same typed error from a closed Conn as from an open one.
//
// Everything here is a pure function or a constant, safe for concurrent
// use.
package backendkit
