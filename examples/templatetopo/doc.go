// Package templatetopo is the template for a new topokit backend: a small,
// complete topo.Conn over a simple in-process store, written to be copied.
// It passes the conformance suite (topo/test) and the election harness
// (election/electiontest) in full, with -race; docs/backends.md walks
// through it. It registers the factory "template" (FactoryName).
//
// To write a backend for your store, copy this directory, replace store.go
// (the in-process store) by your store's client, and keep the rest of the
// shape: every method runs the backendkit checks first, in backendkit's
// order, sends ONE request (Conn.do), and maps the store's errors in ONE
// place (Conn.mapErr, through backendkit.MapError). The comments marked
// STEP and the "why" comments on tokens and sessions are the parts a
// networked backend must redo for its own store.
//
// # The store
//
// A Store holds files in a map from full path (the Conn's root joined with
// the file's path) to value, version and recent history, plus queues of
// lock and election entries, and sessions, all under one mutex: each
// request runs under it, which makes every request atomic and the store
// linearizable. Every write (file, lock entry, candidate, transaction)
// takes the next store revision, which is the version of a file and the
// fencing token of a lock or term. Directories are implied by the files
// below them, so a path can be a file and a directory at once, and an
// emptied directory vanishes.
//
// Layout (that of etcd2topo and zk2topo): a lock on dir is a queue of
// entries dir/locks/<token>; an election called name is a queue of
// candidates elections/<name>/locks/<token>. The oldest entry of a queue
// holds the lock (leads). Entries are not files: List and Get never see
// them, ListDir shows them as Ephemeral.
//
// # Sessions: which request runs on which session
//
// Sessions have no leases to renew. Each Conn has at most one session at a
// time, opened by its first Lock, TryLock, LockWithTTL, LockName,
// WaitForLeadership or Campaign, or by the first one after its last
// session ended. Every entry is created on the Conn's current session. A
// session ends only when:
//   - the store expires it: Conn.ExpireSession (the suite's
//     Options.ExpireSession), Store.Restart (every session);
//   - the Conn's link breaks (Conn.Cut, the suite's Partition): the Conn
//     gives up every claim of the session at once, and the store ends the
//     session SessionTimeout (1 s) later, unless another Conn resumed it
//     meanwhile, or at Heal, when the Conn closes what it gave up; this
//     timer is the store's only clock;
//   - the Conn is closed: Conn.Close.
//
// When the store ends a session, it FIRST declares it lost to every claims
// engine with claims on it (claims.Session.Lost: each claim's Done closes,
// leadership contexts are cancelled, waiters wake with LockLost, all
// before Lost returns) and THEN removes its entries, in one critical
// section; after a Cut the Conn declared its sessions lost even earlier.
// So the old holder has always learned its loss when the next holder
// wins. That is true by construction here only because the notice is a
// function call; a networked backend must get the same order from its
// session safety margin (its client declares a session lost before the
// store can expire the lease).
//
// A Conn can also adopt another Conn's session, with
// ResumeLeaderParticipation (a restarted process taking its candidacy
// back): from then on the adopting Conn's Close, Cut and ExpireSession end
// it, and the Conn that opened it opens a new one for its next lock.
//
// File reads and writes use no session.
//
// # Claims: the engine and the driver
//
// The Conn writes no claims logic. Lock, TryLock, LockWithTTL, LockName,
// NewLeaderParticipation and ResumeLeaderParticipation forward to the
// claims engine (topo/claims), which owns queueing and ordering, who
// holds, TryLock's holder error, tokens, Done, Check, Unlock, terms,
// leader values, Observe, WaitForNewLeader, resume and the argument
// checks. driver.go is the engine's view of this store (claims.Driver):
// create an entry on the Conn's session, list a queue, wait for ONE entry
// to go, delete an entry while its session holds it, check one, read the
// head with its value, write the value guarded by the entry, and resume.
//
// # Who may delete what
//
//   - Files: any Conn may write or delete any file; a version makes the
//     write a compare-and-set.
//   - A lock entry or a candidate is removed only by its own claim's
//     Unlock, Resign or Stop, by its waiter giving up (ctx, Stop, Close),
//     or with its session (driver.Delete refuses an entry whose session is
//     not the caller's or has ended). Removal is by identity (the entry's
//     token on its session), never "the entry at this path", so a stale
//     holder's Unlock releases nothing of its successor's. A claim belongs
//     to the session it was created on, not to the Conn's current one:
//     once that session ended, the claim stays lost (Check and Unlock say
//     LockLost, IfHeld fails). A resumed candidacy keeps its entry; the
//     claim the previous holder had on it is lost (LoseEntry).
//   - Nothing else deletes entries: the store has no lease that lapses
//     behind the holder's back.
//
// # Fences and transactions
//
// A LockDescriptor and a leadership term are the engine's claims: Token
// is the entry's creation revision (strictly greater for every later
// holder of the same lock or election, across sessions, Conns and
// Store.Restart; see driver.go for the argument). Txn runs every
// condition and write in one request; IfHeld holds while the claim is
// live in its holder's view (claims.Guard.Live) and its entry heads its
// queue on its live session, so a write guarded by a lost lock is refused
// by the store itself, whatever the holder believes. GuardedUpdate is one
// request.
//
// # Leader values
//
// A candidate's published value (Campaign, Proclaim) lives beside its
// entry, in the store, and goes with it: a leader is never seen without
// the value it campaigned with (driver.Create writes both), and Proclaim
// is guarded in the store on the entry (driver.SetValue). driver.Head
// reads id, value and token in one request and hands Observe the channel
// the next change of the store closes. ResumeInfo is JSON naming the
// store, the session and the entry.
//
// # Faults, for the suites
//
// Conn.ExpireSession, Conn.Cut and Conn.Heal, and Store.Restart (a restart
// with durable files that ends every session and refuses a given number of
// requests with Unavailable) are the faults topo/test and electiontest
// need; templatetopo_test.go wires them.
//
// # Limits
//
// Values up to topo.MaxValueSize; GetVersion keeps the last 32 versions of
// each file (older ones are Compacted); at most MaxTxnOps ops per Txn.
// LockWithTTL's ttl is checked but a lock lives as long as its session
// (so a ttl below SessionTimeout is rounded up to it).
// The store is simple, not fast: List, ListDir and lock checks scan every
// file. It keeps everything in memory and nothing survives the process.
package templatetopo
