// Package memorytopo is an in-memory topo.Conn for the unit tests of
// programs built on topokit. It keeps the whole topo.Conn contract of the
// real backends (files, versions and compare-and-set, locks, watches,
// elections, fencing tokens, transactions) and lets a test cause the
// failures a cluster manager must survive: errors, latency and a hung
// store, lost sessions, lapsed leases and network partitions.
//
// # Testing your program
//
// Package memtest (topo/memorytopo/memtest) sets a store up in one call,
// with your cells, TTLs and middleware, closes it when the test ends, and
// gives clients (each a topo.Server with its own sessions) whose sessions
// the test can expire, freeze and cut off:
//
//	s := memtest.New(t, memtest.Options{Cells: []string{"zone1"}})
//	run(s.Server)             // the code under test gets a *topo.Server
//	s.Client.ExpireSession()  // it lost its session: does it step down?
//	s.Factory.AddFault(memorytopo.Fault{Op: memorytopo.OpUpdate, Path: "config/*"})
//
// docs/testing.md has recipes for each kind of test.
//
// Without memtest, NewServerAndFactory returns a topo.Server and the
// Factory that injects faults into it; Factory.NewConn opens more clients
// of its cells, and ConnOf finds the *Conn behind a Server's Conn.
//
// # Faults
//
// Faults are set on a Factory (AddFault, SetError, SetLatency, Hang,
// BreakWatches; ClearFaults) and apply at once to every Conn it created,
// until removed; a fault acts when a call starts (an established watch
// keeps delivering). CallCount counts calls. A call checks, in this
// order: its context (Timeout, Interrupted), its input (InvalidPath,
// InvalidArgument), Closed, the partition of its Conn, then the faults
// (latency, hang, SetError, the Faults in the order they were added; the
// first match wins).
//
// # Sessions, leases and partitions
//
// Each Conn is one client with its own session, which holds its Lock and
// TryLock locks and its election entries; LockWithTTL and LockName locks
// have leases of their own. Leases are renewed continuously until
// Conn.PauseKeepAlive (a frozen process), Conn.Partition (which also
// blocks calls and ends leadership early: see there), a Fault on
// OpKeepAlive, SetError or Hang stops renewal: each lease then lapses its
// TTL later (Options.SessionTTL, the ttl of LockWithTTL,
// Options.NamedLockTTL). Conn.ExpireSession drops them at once.
//
// A lost claim behaves as on the real backends: its Done closes when the
// store drops it, Check returns LockLost, leadership contexts are
// cancelled, IfHeld (topo.GuardedUpdate) refuses the old holder's writes,
// and the next holder's fencing token is greater. Lapses take real time
// (there is no fake clock): use a short SessionTTL and wait on channels.
//
// # Behaviour worth knowing
//
// The store layout matches etcd2topo and zk2topo: a file is the node
// <root>/<path>; a lock of directory D is an ephemeral entry under
// D/locks/ (the oldest holds it); a candidate of election N an ephemeral
// entry under elections/N/ (the oldest leads) whose value is its id.
// Versions are topo.NumericVersion values from one counter per store (its
// revision), increasing on every write; a delete takes a value of it too,
// and watch events carry the value the watch has reached
// (topo.WatchData.Revision); GetVersion returns the last Options.History
// versions of a file (Compacted before). A fencing token is that counter's
// value when the lock or candidate entry was created. A Txn is one atomic
// step; faults fail it before anything is applied, so its outcome is
// never unknown. Values are copied in and out.
//
// The package registers a process-wide Factory as Name ("memory"), so
// topo.OpenServer("memory", addr, root) works; each distinct address is a
// separate store living as long as the process. For faults on such a
// Server, assert topo.GetFactory(memorytopo.Name) to *Factory.
package memorytopo

// Implementation notes. Data: store.go (tree, indexes, versions,
// locking), file.go, directory.go, watch.go, txn.go. Claims are the
// engine's (topo/claims): driver.go is its Driver, entry.go the queues,
// session.go the leases. A queue entry is removed only by its own claim
// (driver.Delete, by identity on its live lease) or with its lease
// (revokeLease), which declares the lease's engine Session lost first,
// under the store's write lock, so no successor is granted before the old
// holder's claim ended.
