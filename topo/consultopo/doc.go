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
//     an election, each locked by its Conn's shared session and ordered by
//     CreateIndex; only the head tries the acquire, each waiter blocks on
//     its predecessor's entry alone (see queue.go).
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
// # Invariants
//
// Which keys the library writes and deletes:
//
//   - A file key is written only by Create, Update and Delete of that path
//     and by the CreateOp, UpdateOp and DeleteOp of a Txn, which write it
//     exactly as those methods do, never at a reserved path
//     (backendkit.CheckCreate, CheckUpdate, CheckDelete, CheckTxn). A
//     versioned Update or Delete checks the ModifyIndex in the same
//     transaction or check-and-set request as the write.
//   - A lock or election key is acquired only by a transaction whose first
//     operation checks what a consistent read (or, for the first attempt,
//     the assumption "absent") said: check-not-exists, or check-index of a
//     key that no session holds and that carries the lock flags, or that our
//     own session holds (then an unlock precedes the lock, so that every
//     acquire writes the key and gets a new ModifyIndex). A key without lock flags and without session was
//     written by another tool: it is never taken over (ForeignKeyError),
//     overwritten or deleted, and List reports it (backendkit.ReservedFiles).
//   - A queue entry is created only by a contender's enqueue transaction
//     (a lock operation of its session, and a get-tree of the queue that
//     gives its predecessor), and deleted only by the acquire transaction
//     of its contender at the head of the queue (the same transaction
//     that acquires the key), by its contender giving up (check-session,
//     then delete), or by Consul when the session ends. The queue orders
//     acquires; it never grants one: exclusion, tokens and every rule
//     below rest on the key's acquire transaction alone. A contender that
//     acquires without an entry reads the queue in the same transaction
//     and, when others queue, releases the key (check-session, delete)
//     before returning, as when a caller gives up.
//   - A lock or election key is deleted by the library only in a
//     transaction that first checks that the deleting session holds it
//     (check-session, then delete; for the end of a term, check-index on
//     the term's token): by Unlock, by Stop, Resign or the end of a term,
//     and when undoing an acquire whose caller gave up. An election's value
//     key is deleted in the same transaction, or alone with a
//     check-session, only by the holder of the Conn's local claim on the
//     election (the only writer of its session's value key). Everything
//     else a session held is deleted by Consul when the session ends
//     (Close and Unlock destroy sessions; "delete" behaviour).
//
// Which request runs on which session:
//
//   - A lock or a leadership term belongs to exactly one session, the one
//     named in its acquire transaction. Its Check, Unlock, release and
//     leadership monitor use that session's id and no other; a lost
//     session is never renewed again nor replaced under a held lock: the
//     lock is lost (LockLost) and a new Lock gets a new session.
//   - An acquire is retried on a new session only when the session it was
//     given turned out invalid before the locker started waiting (before
//     its queue entry was created); a waiter, in the queue or at its head,
//     whose session ends fails with LockLost (WaitForLeadership then tries
//     again on a new session, at the queue's tail). A queue entry lives on
//     the Conn's shared session (for a lock with a session of its own too,
//     so that a dead waiter's entry lapses within twice the Conn's
//     SessionTTL, not LockName's 24 h); the end of either session ends the
//     wait with LockLost.
//   - A session is valid for its holder until its deadline: one TTL after
//     the send time of the last renewal Consul acknowledged. Consul
//     invalidates a session only after twice its TTL without renewal, and
//     keeps its keys for the lock-delay after that, so at the deadline
//     (when a timer marks the session lost, Check fails and leadership
//     contexts are cancelled, without any request) at least one TTL plus
//     the lock-delay remain before anyone else can acquire them.
//   - Declaring a session lost (its deadline passed, Consul says it is
//     gone, an ACL refusal, Close) ends every claim on it before the
//     declaration returns and before anything reports the session lost:
//     each lock's Done is closed and each leadership context (of
//     WaitForLeadership and Campaign) cancelled, synchronously, as
//     children of a context of the session's. No one sees the session
//     lost (Check's LockLost) while a claim on it still looks live.
//
// Reads: every lock and leadership decision (the acquire's read, Check,
// the leadership monitor, the watch behind Done, the emptiness check of
// Lock, the read explaining a failed check-and-set, the read-back of a
// large write) is a consistent read, whatever Options.Reads says. Check
// returns nil only when such a read, finished before the session's
// deadline, shows the key held by the lock's session with the LockIndex
// and the ModifyIndex of its acquire.
//
// # Fencing tokens, Done and terms
//
// The fencing token of a lock (LockDescriptor.Token) or of a leadership
// term (LeaderParticipation.Term) is the ModifyIndex the acquiring
// transaction gave the key <dir>/Lock (or elections/<name>), read from the
// lock operation's own result in that transaction: no extra round trip.
// It is the Raft index of the acquire. A later holder can only acquire
// after the earlier claim ended in the store (its key deleted or
// unlocked), so in a later Raft entry: its token is strictly greater,
// across session losses, Conns and processes, and across restarts of
// servers that keep their data (Raft indexes survive them; a -dev agent
// keeps nothing, so its indexes, and tokens, start again after a restart,
// as its data does). Every acquire writes the key: one by the session
// already holding it unlocks it first in the same transaction (a lock
// that changes nothing would keep the old ModifyIndex).
//
// Done closes on Unlock (Stop for a term), when the session ends or
// passes its local deadline, when Check finds the claim lost, and when
// the key is deleted, taken over or written behind the holder's back: a
// lock watches its key with consistent blocking queries from the first
// call of Done on; a term's monitor always does. Sessions are renewed at
// least every half of the Conn's SessionTTL (a 24 h LockName session
// too), so a destroyed session is noticed within that. Term returns the
// same Fence for the whole term, NotLeader otherwise.
//
// # Leader values
//
// Campaign's acquire transaction writes the value key with the election
// key (WaitForLeadership's deletes it: no value); Proclaim is one
// transaction, a check-index of the election key on the term's token then
// the value write, NotLeader when the check fails; Resign and Stop cancel
// the leadership context, then delete both keys in one transaction
// checking the token. Leader and Observe read the prefix elections/<name>
// with one consistent list (one Raft index) and take the value of the
// election key's own session; Observe follows it with consistent blocking
// queries, coalescing to the latest state. ResumeLeaderParticipation
// renews the earlier process's session id and owns it from then on
// (destroyed by Stop or Resign). See docs/layout-consul.md.
//
// # Transactions
//
// Conn.Txn is one Consul transaction (/v1/txn through api.Txn), one round
// trip: IfVersion is a check-index, IfAbsent a check-not-exists, IfPresent
// a get, IfHeld a check-index of the lock key on the token (which implies
// the session still holds it: any change of the entry, its session
// included, and any re-creation give it a new ModifyIndex), CreateOp a
// check-and-set on index 0, UpdateOp a set or a check-and-set (with the
// write nonce, as Update), DeleteOp a get or check-index then a delete.
// Consul evaluates the operations in order on the state the earlier ones
// left, so Txn sends the conditions' operations first and the writes'
// after them (each group in op order): every condition, and every write's
// implied condition, sees the state before the transaction (each write
// touches only its own key, which no other op of the transaction writes).
// Consul reports every failed operation with its OpIndex; the failing op
// is the one, in the caller's order, owning the first of them in op order
// (not the lowest OpIndex: a condition after a failing write has a lower
// one), read off the answer without another round trip. At most
// MaxTxnOps (64) Consul operations and Options.TxnMaxRequestBytes (512 KiB,
// estimated, values in base64) per transaction, checked before sending
// (InvalidArgument): files above about 380 KiB, which Update writes
// through the KV endpoint, cannot be written in a transaction. Consul
// requires key write permission for check-not-exists (IfAbsent).
// topo.GuardedUpdate is one transaction of two Consul operations.
//
// Errors: an ACL refusal is PermissionDenied and ends every retry loop
// (watches, lock waits, leadership waits, session renewal) at once; a
// rolled-back transaction is a compare-and-set outcome (NodeExists, NoNode,
// BadVersion) only when Consul's per-operation errors name the failed
// condition.
package consultopo
