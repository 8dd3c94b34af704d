// Package consultopo is topokit's Consul backend, registered as "consul".
// It talks to a Consul agent's HTTP API (github.com/hashicorp/consul/api)
// and keeps Vitess's Consul store layout (docs/layout-consul.md), so a
// Vitess process and topokit can share one Consul datacenter:
//
//   - a file is the KV key <root>/<path>; its Version is the key's
//     ModifyIndex (topo.NumericVersion);
//   - the lock on a directory D is the key <root>/D/Lock, acquired by a
//     Consul session with the lock flags (api.LockFlagValue), holding the
//     lock's contents;
//   - election <name> is a lock on <root>/elections/<name> holding the
//     leader's id (names may nest: svc and svc/a are distinct keys, read
//     one at a time, so they never see each other);
//   - the leader's published value is <root>/elections/<name>/locks/<session
//     id>, held by the leader's session (Vitess reads only the election
//     key; election names with a locks segment are refused);
//   - topokit's waiting contenders queue beside the key, which Vitess never
//     reads: <root>/D/locks/queue/<session id>-<random> for a lock,
//     <root>/elections/<name>/locks/queue/... for an election, with a tail
//     key beside each queue naming the entry queued last (queue.go). A
//     Vitess contender does not queue: it races the head at each release.
//
// Locks and leadership live on Consul sessions with the "delete"
// behaviour: when a session ends, the keys it holds vanish. One long-lived
// session per Conn, renewed in the background, carries every lock with the
// default TTL and every election; LockWithTTL with another TTL and LockName
// get a session of their own, destroyed on Unlock.
//
// Consul keeps no history, so GetVersion returns NoImplementation.
//
// # Claims
//
// Locks, leader participations (elections, leader values, Observe, resume)
// and the rule that a lost session ends every claim on it are the claims
// engine's (topo/claims), which the Conn embeds. The backend gives it a
// driver (driver.go; queue.go the contenders' queue, acquire.go the store
// key's acquire, leader.go leaders' values, monitor.go the watch of a held
// key, resume.go Resume) and its sessions (session.go).
//
// # Invariants
//
// Who writes and deletes what:
//
//   - A file key is written only by Create, Update, Delete and Txn's
//     writes, never at a reserved path; a versioned write checks the
//     ModifyIndex in the same request. The path rule is relative to the
//     root, so a Conn rooted at <root>/elections, inside a "locks"
//     directory or above another Conn's root could name a claim's key: a
//     write of a key whose KV path has a "locks", "Lock" or "elections"
//     segment reads the key first and leaves lock and election keys alone
//     (guard.go).
//   - A lock or election key is acquired only by a transaction whose first
//     operation checks what a consistent read said (or, at the first
//     attempt, "absent"): check-not-exists, or check-index of a key with
//     the lock flags that no session holds. A key held by any session, the
//     acquirer's own included, is waited for, never acquired. A key with
//     neither lock flags nor session is another tool's: it is never taken
//     over (ForeignKeyError), overwritten or deleted.
//   - A lock or election key is deleted only by a transaction whose first
//     operation checks the claim's token (check-index on the acquire's
//     ModifyIndex): the release of a claim by its Conn (Unlock, Resign,
//     Stop, the give-back of a key taken in a release's gap), or the
//     resolution of an acquire whose answer was lost (resolve). A leader's
//     value key goes with its election key, with its unlock, or with its
//     session.
//   - A lock or election key is unlocked only by a release that finds it
//     overwritten by another tool yet still bound to the claim's session
//     (freeOverwritten), so that it is never left bound to a session the
//     Conn renews.
//   - A queue entry is created only by its contender, on the Conn's
//     long-lived session, and deleted only by its acquire transaction, by
//     its contender giving up (check-session, then delete), or by Consul
//     with the session. The queue orders acquires; it never grants one.
//   - A queue's tail key is rewritten only by an enqueue transaction and
//     deleted only while it names an entry that has just left the queue,
//     or by Consul with its session. Safety never rests on it.
//   - Everything else a session held goes with the session (Close, the
//     Unlock of a lock's own session and Stop of a resumed participation
//     destroy sessions).
//
// Which request runs on which session:
//
//   - A lock or term belongs to the one session its acquire transaction
//     names; its Check, release, Proclaim and monitor use that session. A
//     lost session is never renewed again nor replaced under a held claim:
//     the claim is lost (LockLost).
//   - A queue entry lives on the Conn's long-lived session, also for a lock
//     with a session of its own (a dead waiter's entry then lapses within
//     twice SessionTTL, not LockName's 24 h); the end of either session
//     ends the wait with LockLost.
//   - A create or enqueue is retried on a new session only when its session
//     turned out invalid before the contender queued.
//   - A session is valid for its holder until its deadline, and declaring
//     it lost ends every claim on it before anything reports it lost (see
//     session).
//
// Every read behind a lock or leadership decision is consistent, whatever
// Options.Reads says.
//
// # Fencing tokens
//
// A claim's fencing token is the ModifyIndex its acquire transaction gave
// the key: the acquire's Raft index. A later holder acquires only after
// the earlier claim ended in the store, in a later Raft entry, so tokens
// increase across session losses, Conns, processes and restarts of servers
// that keep their data (a -dev agent keeps nothing, indexes included).
// Since no acquire takes a key its own session holds, every acquire writes
// the key.
//
// # Errors
//
// An ACL refusal is PermissionDenied and ends every retry loop (watches,
// waits, session renewal) at once. A rolled-back transaction is NodeExists,
// NoNode or BadVersion only when Consul's per-operation errors name the
// failed condition.
package consultopo
