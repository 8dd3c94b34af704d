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

// Implementation notes, moved here from the package documentation (they
// describe store.go, lock.go and election.go, where they belong next to
// the code once the lock rework there has landed).
//
// Lock entries placed late. While no entry of D's lock is in the tree
// (none under D/locks/), Lock, TryLock, LockWithTTL and LockName of D take
// their entry's revision (its fencing token) at once but queue the entry
// on D's node without building or publishing its nodes: the first is the
// holder, each waiter waits for the one queued before it, and a TryLock
// that finds the queue non-empty fails naming the first. The entries are
// placed (their nodes built and published, under the names and versions
// they would have had) only when something could see them: ListDir, a Get
// or GetVersion that finds nothing at a path with a "locks" segment, or a
// Conn opened on a root not used before. From then on the lock's entries
// are in the tree, and later ones are placed when they queue, until
// D/locks empties. Every call observes the same as if each entry had been
// placed at once (TestUnplacedLockMatchesPlaced); Conns rooted inside a
// "locks" directory switch this off for their store. A Fence's Done
// channel is made when first asked for.
//
// Lock hand-over. A waiting Lock is let in by the removal of the entry
// ahead of it (an Unlock, the old holder's session loss, lapse or Close,
// or a waiter ahead of it giving up), under the store's write lock: when
// the removal leaves the waiter's entry the oldest, it marks that entry
// granted and wakes its Lock, which returns at once. The old holder's
// entry is gone (its Check fails, its Done is closed) before the grant, so
// the two never overlap; a waiter that leaves (its context ended) removes
// its entry, handing a lock it was granted meanwhile on to the next.
//
// Concurrency. Get (and GetVersion of the current version) loads an
// immutable snapshot of the file without taking a lock. Update of an
// existing file (with or without a version) takes the store-wide mutex
// only for reading plus a mutex of that file's own, so writers of
// different files run in parallel, each file's versions, history and
// watch events staying in order; while a WatchRecursive is active, Update
// takes the store-wide mutex for writing instead, so that a recursive
// watch gets the events of all files in version order. Create, Delete,
// Txn, List, watch set-up and lock or election changes take it for
// writing; GetVersion of an earlier version and ListDir for reading
// (ListDir for writing while a lock entry waits to be placed). A write
// copies the value it is given and adds the replaced version to the
// file's history (a ring of Options.History-1 entries).
//
// Leader values. Campaign stores its value on the candidate entry when it
// creates it, under the store's write lock; Proclaim replaces it under the
// same lock after checking that the caller's term entry is still in the
// store (and its leadership context live), so a deposed leader's Proclaim
// is NotLeader and never visible. The value is a field of the entry, not a
// node: the entry still holds exactly the participant id, and List,
// ListDir, Get and Watch never show values. Leader reads id, value and
// token at once. Observe and WaitForNewLeader (a view of Observe: ids
// only, non-empty, deduplicated) send the state current at the call first;
// later states are read under the lock after each change, so they are in
// store order and a resigned or lapsed leader is never sent after its
// successor; a slow receiver gets the latest state (coalescing). Resign
// removes the entry (with an ended ctx it tries for 3 s; if the store is
// unreachable the leadership context is cancelled anyway). ResumeInfo is
// JSON naming the store, election, id and entry; a Conn of the same store
// and root resumes the candidacy by adopting the original Conn's session
// (lease), which it renews from then on.
