// Package consultopo is topokit's Consul backend, registered as "consul".
// It talks to a Consul agent's HTTP API through
// github.com/hashicorp/consul/api and keeps Vitess's Consul store layout, so
// a Vitess process and topokit can share one Consul datacenter:
//
//   - a file is the KV key <root>/<path>; its Version is the key's
//     ModifyIndex (topo.NumericVersion);
//   - a lock on a directory D is the key <root>/D/Lock, acquired through a
//     Consul session with the api package's lock flags (api.LockFlagValue)
//     and holding the lock's contents;
//   - leader election <name> is a lock on <root>/elections/<name> whose value
//     is the leader's id (election names may nest: svc and svc/a are the
//     distinct keys elections/svc and elections/svc/a, read one key at a
//     time, so they never see each other);
//   - the leader's published value (Campaign, Proclaim) is the key
//     <root>/elections/<name>/locks/<session id>, locked by the leader's
//     session; Vitess reads only the election key, and no election key can
//     be there (names with a locks segment are refused);
//   - topokit's waiting contenders queue beside the key, an addition Vitess
//     never reads: <root>/D/locks/queue/<session id>-<random> for the lock
//     on D, <root>/elections/<name>/locks/queue/<session id>-<random> for
//     an election, with a tail key beside each queue naming the entry
//     queued last (see queue.go). A Vitess contender does not queue: it
//     races the head at each release.
//
// Locks and leadership live on Consul sessions with the "delete" behaviour:
// when a session is destroyed or its TTL lapses, the keys it holds vanish.
// One long-lived session per Conn, renewed in the background, carries every
// lock taken with the default TTL and every election; LockWithTTL with
// another TTL and LockName use a session of their own, destroyed on Unlock.
// See docs/layout-consul.md for the layout, the sessions, the lock-delay
// default and the TTL minimum.
//
// Consul keeps no history, so GetVersion returns NoImplementation.
//
// # Claims
//
// Lock, TryLock, LockWithTTL, LockName, the lock descriptors, leader
// participations (elections, leader values, Observe, resume) and the rule
// that a lost session ends every claim on it are the claims engine's
// (topo/claims), which the Conn embeds. The backend gives it a driver
// (driver.go; one concept per file: queue.go the contenders' queue,
// acquire.go the store key's acquire, leader.go leaders' values,
// monitor.go the watch of a held key, resume.go ResumeInfo and Resume) and
// its sessions (session.go), which declare the engine's view of a session
// lost (claims.Session.Lost).
//
// # Invariants
//
// Which keys the library writes and deletes, and who may delete what:
//
//   - A file key is written only by Create, Update and Delete of that path
//     and by the CreateOp, UpdateOp and DeleteOp of a Txn, never at a
//     reserved path (backendkit.CheckCreate, CheckUpdate, CheckDelete,
//     CheckTxn). A versioned Update or Delete checks the ModifyIndex in
//     the same transaction or check-and-set request as the write. The
//     path rule works relative to the Conn's root, so a Conn rooted at a
//     reserved place (<root>/elections, where an election key is the
//     plain path "name"; inside a "locks" directory, where the queue
//     entries, the tail and a leader's value key are) or at an ancestor
//     of another Conn's root (which names that Conn's election key
//     <x>/elections/name) could still name a lock or election key. A
//     write of a key whose full KV path has a "locks", "Lock" or
//     "elections" segment anywhere (Update, Delete, and Txn's UpdateOp
//     and DeleteOp) therefore reads the key first (consistent, one read
//     per key) and leaves a key held by a session or carrying the lock
//     flags alone: Update and UpdateOp fail with NodeExists, Delete and
//     DeleteOp with NoNode (such a key is no file), as on memorytopo,
//     etcd2topo and zk2topo, and nothing is written. Its other writes are
//     made at the ModifyIndex read (a check-and-set, or a check-index
//     before the delete), which every acquire changes, so the refusal is
//     atomic on Consul; a key changed meanwhile is read again (at most 10
//     attempts, then ResourceExhausted, nothing written). Keys without a
//     session there stay writable files; every other key (any key under
//     a Vitess root but its claims', which the path rule refuses) is
//     written with the requests it was written with before (guard.go).
//   - A lock or election key is acquired only by a transaction whose first
//     operation checks what a consistent read (or, for the first attempt,
//     the assumption "absent") said: check-not-exists, or check-index of a
//     key that no session holds and that carries the lock flags. A key held
//     by any session, the acquirer's own included, is never acquired: the
//     acquirer waits. A key without lock flags and without session was
//     written by another tool: it is never taken over (ForeignKeyError),
//     overwritten or deleted, and List reports it
//     (backendkit.ReservedFiles).
//   - A lock or election key is deleted by the library only in a
//     transaction whose first operation checks the claim's token
//     (check-index on the acquire's ModifyIndex): the release of a claim
//     (Unlock, Resign, Stop, a give-back of a key taken in a release's
//     gap, retried until done) by the Conn that acquired it, or the
//     resolution of an acquire whose answer was lost, by the same Conn,
//     for a key its session holds at an index none of its claims
//     recorded, decided under the key's stripe (no acquire of the Conn is
//     then between its transaction and the record of its grant). Since a
//     lost acquire may land after the resolution's read, the key is
//     watched for a minute after it: no key is left held by a session of
//     the Conn with no claim on it, unless a request lands later than
//     that. An election's value key of a session is deleted only with its
//     election key, in that same transaction, or with its unlock (below),
//     or by Consul with the session.
//   - A lock or election key is unlocked by the library only by the
//     release of a claim that finds it written since the acquire (by
//     another tool's PUT, which keeps the session) yet still bound to the
//     claim's session, not re-created since and at no index a claim of
//     the Conn acquired it at: one transaction checking the index just
//     read and unlocking it for that session, keeping the value written
//     (and setting the lock flags), so that the key of a lost claim is
//     never left bound to a session the Conn renews.
//   - A queue entry is created only by its contender (a lock operation of
//     the Conn's long-lived session), and deleted only by its contender's
//     acquire transaction at the head of the queue (the same transaction
//     that acquires the key), by its contender giving up (check-session,
//     then delete; an entry whose enqueue got no answer is watched for a
//     minute and deleted if it lands after all), or by Consul when the
//     session ends. The queue orders
//     acquires; it never grants one: exclusion and tokens rest on the key's
//     acquire transaction alone.
//   - A queue's tail key (<dir>/locks/tail, elections/<name>/locks/tail)
//     is deleted and written again, locked by the new entry's session,
//     only by the transaction that creates a queue entry, and deleted
//     otherwise only while it names an entry that has just left the queue
//     (a check of its index, after that entry's acquire or giving up) or
//     by Consul with its session. It orders nothing that safety rests on.
//   - Everything else a session held is deleted by Consul when the session
//     ends (Close, Unlock of a lock's own session and Stop of a resumed
//     participation destroy sessions; "delete" behaviour).
//
// Which request runs on which session:
//
//   - A lock or a leadership term belongs to exactly one session, the one
//     named in its acquire transaction. Its Check, release, Proclaim and
//     monitor use that session's id and no other; a lost session is never
//     renewed again nor replaced under a held claim: the claim is lost
//     (LockLost) and a new claim gets a new session.
//   - A queue entry lives on the Conn's long-lived session, also for a lock
//     with a session of its own (so that a dead waiter's entry lapses
//     within twice the Conn's SessionTTL, not LockName's 24 h); the end of
//     either session ends the wait with LockLost.
//   - A create or an enqueue is retried on a new session only when the
//     session it was given turned out invalid before the contender queued.
//   - A session is valid for its holder until its deadline, and declaring
//     it lost ends every claim on it before anything reports it lost (see
//     the session type).
//
// Reads: every lock and leadership decision (the acquire's reads, Check,
// the monitor of a held key, the emptiness check of Lock, the queue's
// reads, the read explaining a failed check-and-set, the read-back of a
// large write) is a consistent read, whatever Options.Reads says.
//
// # Fencing tokens
//
// The fencing token of a lock or a term is the ModifyIndex the acquiring
// transaction gave the key <dir>/Lock (or elections/<name>), read from the
// lock operation's own result: the Raft index of the acquire. A later
// holder can only acquire after the earlier claim ended in the store (its
// key deleted or unlocked), so in a later Raft entry: its token is
// strictly greater, across session losses, Conns and processes, and
// across restarts of servers that keep their data (a -dev agent keeps
// nothing, so its indexes start again after a restart, as its data does).
// Since no acquire takes a key its own session holds, every acquire
// writes the key and gets a new ModifyIndex.
//
// # Transactions
//
// Conn.Txn is one Consul transaction (/v1/txn), one round trip; its doc
// says how each op maps onto Consul's operations and why every condition
// sees the state before the transaction.
//
// Errors: an ACL refusal is PermissionDenied and ends every retry loop
// (watches, lock waits, leadership waits, session renewal) at once; a
// rolled-back transaction is a compare-and-set outcome (NodeExists, NoNode,
// BadVersion) only when Consul's per-operation errors name the failed
// condition.
package consultopo
