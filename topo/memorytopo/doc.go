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
// gives clients (each a topo.Server of its own, with its own sessions)
// whose sessions the test can expire, freeze and cut off:
//
//	s := memtest.New(t, memtest.Options{Cells: []string{"zone1"}})
//	run(s.Server)             // the code under test gets a *topo.Server
//	s.Client.ExpireSession()  // it lost its session: does it step down?
//	s.Factory.AddFault(memorytopo.Fault{Op: memorytopo.OpUpdate, Path: "config/*"})
//
// docs/testing.md has recipes for each kind of test (compare-and-set
// conflict, contention, watch, fault, session loss, partition and fencing,
// a lease that lapses, a leader that is cut off).
//
// Without memtest, NewServerAndFactory(ctx, cells...) returns a
// topo.Server and the Factory that injects faults into it;
// NewServerAndFactoryWithOptions also takes Options (SessionTTL,
// NamedLockTTL, History) and topo.ServerOptions (topo.WithMiddleware). The
// global cell is the store address "" rooted at "/global", and cell C is
// rooted at "/C", so Factory.NewConn("", "/global") opens another client
// of the global cell with its own session. ConnOf finds the *Conn behind a
// Server's Conn, decorated or not, for its session controls.
//
// # Faults
//
// Faults are set on a Factory and apply at once to every Conn it created,
// until removed; a fault acts when a call starts (an established watch
// keeps delivering). Injected errors are *topo.Error values naming the
// call's path: topo.Unavailable by default (see Fault.Err).
//
//   - AddFault(Fault{Op, Path, Prefix, Err, Times}): calls of one
//     Operation (OpAny: all) on matching paths fail, optionally only the
//     next Times of them. A fault on OpCreate, OpUpdate or OpDelete also
//     fails the guarded and transactional forms of that write
//     (topo.GuardedUpdate, topo.GuardedDelete, a Txn writing the path).
//   - SetError(err): every call fails.
//   - SetLatency(d): every call waits d first.
//   - Hang(), Unhang(): calls block until their context ends.
//   - BreakWatches(err): established watches end with err, to test
//     re-watching.
//   - ClearFaults removes all of them; CallCount(op) counts calls.
//
// A call checks, in this order: its context (Timeout, Interrupted), its
// input (InvalidPath, InvalidArgument), Closed, the partition of its Conn,
// then the faults (latency, hang, SetError, the Faults in the order they
// were added; the first match wins).
//
// # Sessions, leases and partitions
//
// Each Conn is one client with its own session, which holds its locks
// (Lock, TryLock) and election entries; LockWithTTL and LockName locks
// have leases of their own. They are renewed continuously until something
// stops it:
//
//   - Conn.ExpireSession drops every lock and election entry of the Conn
//     at once, as a store expiring the session would; the Conn continues
//     under a new session.
//   - Conn.PauseKeepAlive (a frozen process), a Fault on OpKeepAlive,
//     SetError and Hang stop renewal: each lease lapses its TTL later
//     (Options.SessionTTL, the ttl of LockWithTTL, Options.NamedLockTTL).
//   - Conn.Partition cuts the Conn off until Conn.Heal: renewal stops
//     and its new calls block. Its leadership contexts end a quarter of
//     the TTL before the store lapses its session, as a real client steps
//     down before its lease can expire; lock descriptors have no margin.
//
// A lost claim behaves as on the real backends: its Done closes at the
// moment the store drops it, Check returns LockLost, leadership contexts
// are cancelled, IfHeld (topo.GuardedUpdate) refuses the old holder's
// writes, and the next holder's fencing token is greater. Lapses take real
// time (there is no fake clock): test them with a short SessionTTL and
// wait on channels.
//
// # Behaviour worth knowing
//
// The store layout matches etcd2topo and zk2topo: a file is the node
// <root>/<path>; a lock of directory D is an ephemeral entry under
// D/locks/ (the oldest holds it); a candidate of election N an ephemeral
// entry under elections/N/ (the oldest leads) whose value is its id.
// Versions are topo.NumericVersion values from one counter per store,
// increasing on every write; GetVersion returns the last Options.History
// versions of a file (Compacted before). A fencing token is that counter's
// value when the lock or candidate entry was created. A Txn is one atomic
// step (readers see all its writes or none); faults fail it before
// anything is applied, so its outcome is never unknown. Values are copied
// in and out.
//
// The package registers a process-wide Factory as Name ("memory"), so
// topo.OpenServer("memory", addr, root) works; each distinct address is a
// separate store living as long as the process. For faults on such a
// Server, assert topo.GetFactory(memorytopo.Name) to *Factory.
package memorytopo

// Implementation notes (see also the package documentation above).
//
// Files. Data: store.go (the tree, the lock-free read indexes, versions
// and history), file.go, directory.go, watch.go, txn.go, path.go,
// shapelock.go (the store's mutex). Claims: locks, elections and leader
// values are the claims engine's (topo/claims); driver.go is the engine's
// Driver over the store, entry.go the store's queue entries, session.go
// the leases (sessions) holding them, claimcalls.go the call counting and
// fault injection in front of the engine. Test controls: server.go
// (Factory, Conn, ExpireSession, PauseKeepAlive, Partition), faults.go.
//
// Who may delete what. A queue entry (under <dir>/locks/ or
// elections/<name>/) is removed only by its own claim, through the driver
// (Unlock, Resign, Stop, a waiter giving up: driver.Delete, which checks
// the entry's revision and that its lease is live and still the calling
// Conn's), or with its lease (revokeLease: ExpireSession, a lapse, Close,
// a resumed candidacy given up at a partition's notice). Conn.Delete,
// Update and Txn refuse entries (reserved paths, NodeExists).
//
// Which request runs on which session. Lock, TryLock and candidates use
// the Conn's session lease (opened on first use and anew after it ended);
// LockWithTTL and LockName each get a lease of their own, ended with the
// entry. ResumeLeaderParticipation moves a lease to the resuming Conn
// (adoptLease): from then on only that Conn's driver can delete, check or
// proclaim on it; the original Conn's claim on the resumed entry is lost.
//
// Loss ends claims first. revokeLease declares the lease's engine Session
// lost (every Done closes, leadership contexts are cancelled) before it
// removes the entries, all under the store's write lock, so no successor
// is granted before the old holder's claim ended. At a partition's notice
// (a quarter of the TTL before the lapse) the Conn's terms on the lease
// end (Session.LoseEntry); their entries stay until the lapse, or are
// removed when the partition heals first.
//
// Concurrency. Get (and GetVersion of the current version) loads an
// immutable snapshot of the file without taking a lock. Update of an
// existing file takes the store-wide mutex only for reading plus a mutex
// of that file's own (unless a WatchRecursive is active), so writers of
// different files run in parallel. Create, Delete, Txn, List, watch
// set-up and queue changes take it for writing; reads of queues
// (driver.List, Ahead, Held, Head without watch) for reading.
