// Package consultopo is topokit's Consul backend, registered as "consul".
// It talks to a Consul agent's HTTP API (github.com/hashicorp/consul/api)
// and keeps Vitess's Consul layout (docs/layout-consul.md), so Vitess and
// topokit can share one datacenter: a file is the key <root>/<path>, its
// Version the key's ModifyIndex; the lock on directory D is <root>/D/Lock
// and election <name> the key <root>/elections/<name>, both acquired by a
// Consul session with the lock flags (api.LockFlagValue); a leader's
// published value is <root>/elections/<name>/locks/<session id>. topokit's
// contenders also queue beside the key, in <D or elections/name>/locks/queue
// (queue.go), which Vitess never reads: its contenders race the queue's
// head at each release.
//
// Locks and leadership live on Consul sessions with the "delete"
// behaviour: when a session ends, the keys it holds vanish. One long-lived
// session per Conn carries every lock with the default TTL and every
// election; LockWithTTL with another TTL and LockName get a session of
// their own, destroyed on Unlock; Close destroys them all. Consul keeps no
// history: GetVersion returns NoImplementation.
//
// # Claims
//
// Locks, leader participations and the rule that a lost session ends every
// claim on it are the claims engine's (topo/claims), which the Conn embeds,
// over this package's driver (driver.go; queue.go the contenders' queue,
// acquire.go the store key's acquire, leader.go leaders' values,
// monitor.go the watch of a held key, resume.go Resume) and sessions
// (session.go).
//
// # Invariants
//
// Who writes and deletes what:
//
//   - A file key is written only by Create, Update, Delete and Txn's
//     writes, never at a reserved path. A Conn rooted at a reserved place
//     could still name a claim's key: writes there leave lock and election
//     keys alone (guard.go).
//   - A lock or election key is acquired only by a transaction whose first
//     operation checks what a consistent read said (at first, "absent"):
//     check-not-exists, or check-index of a key with the lock flags that no
//     session holds. A key held by any session, the acquirer's own
//     included, is waited for; a key with neither lock flags nor session is
//     another tool's (ForeignKeyError), never taken, written or deleted.
//   - A lock or election key is deleted only by a transaction whose first
//     operation checks the claim's token (the acquire's ModifyIndex): a
//     claim's release, or the resolution of an acquire whose answer was
//     lost (resolve). It is unlocked only by a release that finds it
//     overwritten by another tool but still bound to the claim's session
//     (freeOverwritten). A leader's value key goes with its election key or
//     its session.
//   - A queue entry is created only by its contender and deleted only by
//     its acquire transaction, by its contender giving up (check-session,
//     then delete), or by Consul with its session. The queue orders
//     acquires; it never grants one. Safety never rests on a queue's tail
//     key (see tailName).
//
// Which request runs on which session:
//
//   - A lock or term belongs to the one session its acquire transaction
//     names; its Check, release, Proclaim and monitor use that session. A
//     lost session is never renewed nor replaced under a held claim: the
//     claim is lost (LockLost).
//   - A queue entry lives on the Conn's long-lived session, also for a lock
//     with a session of its own (so a dead waiter's entry lapses within
//     twice SessionTTL, not 24 h); the end of either session ends the wait
//     with LockLost.
//   - A create or enqueue is retried on a new session only when its session
//     turned out invalid before the contender queued.
//   - A queued waiter (Lock, Campaign, WaitForLeadership) rides out a
//     transient failure (the agent restarting or unreachable, a server
//     error): its reads of the queue, its blocking queries of the key and
//     of the entry ahead, and an unanswered acquire transaction are sent
//     again, 20 ms to 500 ms apart, while its session and context live.
//     Only the acquire transaction grants.
//   - A session is valid for its holder until its deadline, and declaring
//     it lost ends every claim on it before anything reports it lost (see
//     session).
//
// Every read behind a lock or leadership decision is consistent, whatever
// Options.Reads says.
//
// # Fencing tokens
//
// A claim's fencing token is the ModifyIndex its acquire gave the key, the
// acquire's Raft index. A later holder acquires only after the earlier
// claim ended in the store, so tokens increase across session losses,
// Conns, processes and server restarts that keep the data (a -dev agent
// keeps nothing). No acquire takes a key its own session holds, so every
// acquire writes the key.
//
// # Connections
//
// Every Watch, WatchRecursive, waiting Lock and leadership wait, and the
// watch of each held lock and term, keeps a blocking query open, holding
// an HTTP connection to the agent, which refuses every request of a client
// address past limits.http_max_conns_per_client connections (default 200)
// with ResourceExhausted (Unavailable when net/http reads the refusal,
// which the agent writes as it accepts the connection, before it sent the
// request). Options.MaxBlockingQueries bounds the Conn's
// open queries of watches, and half of it those of claims (waits, held
// locks' and terms' watches), apart, so a handover never waits behind
// idle watches; Watch calls of one file share one query
// (docs/layout-consul.md, "Watches").
//
// # Errors
//
// An ACL refusal is PermissionDenied and ends every retry loop at once. A
// rolled-back transaction is NodeExists, NoNode or BadVersion only when
// Consul's per-operation errors name the failed condition.
package consultopo
