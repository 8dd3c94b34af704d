// Package templatetopo is the template for a new topokit backend: a small,
// complete topo.Conn over a simple in-process store, written to be copied.
// It passes the conformance suite (topo/test) and the election harness
// (election/electiontest) in full, with -race; docs/backends.md walks
// through it. It registers the factory "template" (FactoryName).
//
// To write a backend, copy this directory, replace store.go by your
// store's client, and keep the shape: every method runs the backendkit
// checks first, sends ONE request (Conn.do), and maps the store's errors
// in ONE place (Conn.mapErr). The STEP comments and the "why" comments on
// tokens and sessions are what a networked backend redoes for its store.
//
// # The store
//
// A Store holds files (value, version, recent history) by full path (the
// Conn's root joined with the file's path), queues of lock and election
// entries, and sessions, all under one mutex: each request runs under it,
// which makes every request atomic and the store linearizable. Every write
// (file, entry, transaction) takes the next store revision: the version
// of a file and the fencing token of a lock or term. Directories are
// implied by the files below them (a path can be a file and a directory
// at once; an emptied directory vanishes).
//
// Layout (that of etcd2topo and zk2topo): a lock on dir is a queue of
// entries dir/locks/<token>; an election called name is a queue of
// candidates elections/<name>/locks/<token>. The oldest entry holds the
// lock (leads). Entries are not files: List and Get never see them,
// ListDir shows them as Ephemeral.
//
// # Sessions
//
// Sessions have no leases. A Conn has at most one session at a time,
// opened by its first claim (or the first after its last session ended);
// every entry is created on it. A session ends when the store expires it
// (Conn.ExpireSession, Store.Restart), SessionTimeout (1 s, the store's
// only clock) after the Conn's link broke (Conn.Cut; the Conn gave up its
// claims at the break) unless another Conn resumed it, or when the Conn
// closes. Ending a session FIRST declares it lost to every claims engine
// with claims on it (claims.Session.Lost), THEN removes its entries, so
// the old holder has always learned its loss when the next one wins: true
// here because the notice is a function call; a networked backend gets
// the same order from its session safety margin. ResumeLeaderParticipation
// makes a Conn adopt another Conn's session, which the resumed
// participation's Stop or Resign end (topo.Conn.ResumeLeaderParticipation
// states the rules). File reads and writes use no session.
//
// # Claims
//
// The Conn writes no claims logic: its claim methods are the claims
// engine's (topo/claims), over driver.go, the engine's view of this store
// (claims.Driver). An entry is removed only by its own claim, its waiter
// giving up, or with its session, by identity (token on its session),
// never "the entry at this path"; a claim stays lost once its session
// ended. Txn's IfHeld is checked by the store itself (the entry heads its
// queue on its live session). A candidate's value lives beside its entry
// and goes with it. See docs/backends.md for the driver, method by method.
//
// # Faults and limits
//
// Conn.ExpireSession, Conn.Cut, Conn.Heal and Store.Restart (a restart
// with durable files) are the faults the suites need. Values up to
// topo.MaxValueSize; GetVersion keeps the last 32 versions of each file
// (older ones are Compacted); at most MaxTxnOps ops per Txn. LockWithTTL's
// lock lives as long as its session. The store is simple, not fast (List,
// ListDir and lock checks scan every file), and keeps nothing on disk.
package templatetopo
