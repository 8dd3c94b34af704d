// Package zk2topo is topokit's ZooKeeper backend, registered as "zk2". It
// keeps the store layout of Vitess's zk2topo so that a Vitess process and
// topokit can share one ensemble (docs/layout-zookeeper.md):
//
//   - a file is the znode <root>/<path>; intermediate znodes are
//     persistent directories, created on demand and removed again when
//     their last file is deleted;
//   - the lock on directory D is an ephemeral-sequential child of
//     <root>/D/locks/ holding the lock's contents; the lowest sequence holds
//     it and every waiter watches its predecessor (and the entry ahead of
//     that one: see driver.WaitGone);
//   - election "name" has one ephemeral-sequential child per candidate under
//     <root>/elections/<name>/, holding the candidate's id; the lowest leads.
//     Only children named by a sequence (ten digits) are candidates, so the
//     directory of a nested election ("name/sub") is never one;
//   - a candidate's published value (Campaign, Proclaim) is an
//     ephemeral-sequential znode of its session under
//     <root>/elections/<name>/values/, named "<session id in 16 hex
//     digits>-<sequence>", created in the same multi as the candidate (same
//     Czxid), holding a flag byte and the value. Vitess takes the first
//     sorted child of the election directory for the leader: "values" sorts
//     after every sequence name, and Vitess reads its empty data as "nobody
//     leads" only when no candidate exists.
//
// Versions are the znode's Stat.Version (starting at 0). ZooKeeper keeps no
// history, so GetVersion returns NoImplementation. Paths follow the shared
// reserved-name rule (backendkit.CheckCreate, CheckLockPath, CheckElection).
//
// # Locks and elections: the claims engine
//
// Locks and leader participations are the claims engine's (topo/claims),
// over a driver (driver.go) whose entries are ephemeral-sequential znodes;
// every claim of a session ends when the session is declared lost
// (zkSession.lose, the only place). Files: entry.go (a session's record
// of its entries, the watch behind Done), lock.go, pipeline.go, leader.go,
// resume.go, queue.go (creates whose outcome may be lost), session.go.
//
// # Sessions
//
// A Conn runs one ZooKeeper session at a time, each on its own client
// (*zk.Conn). Left alone, the library would send an expired session's
// queued requests on its next session: a stale Unlock could delete the
// next holder's entry, a stale create leave an entry nobody owns. So:
//
//   - a request runs on the session it was issued on, or nowhere: once a
//     session is over (expired, given up, Close) its dialer refuses every
//     connection and its client is closed, failing every request issued
//     on it, sent or queued;
//   - the next call starts a new session; reads are retried on it, writes
//     are not (their outcome is unknown: Unavailable);
//   - a lock, a waiting Lock and a candidate belong to the session that
//     created their entry (claims.Session); every request that reads or
//     changes the entry (its token's read, the watch behind Done, Check,
//     Unlock, Stop, Resign, Proclaim, a waiter giving up, a Txn guarded by
//     IfHeld) runs on that session only, so once it is over they report
//     LockLost or end the leadership, never touching the entry's name on
//     another session (a znode of that name may be someone else's). Reads
//     of a queue (List, the watch on a waiter's predecessor, Leader,
//     Observe) change nothing and run on the current session;
//   - when a session is declared over (lose), claims.Session.Lost closes
//     every lock's Done, cancels every leadership context and wakes its
//     waiters before the session reads as over;
//   - a session is given up once the latest request its answers through
//     the ensemble's leader prove was sent more than (negotiated session
//     timeout - Options.SafetyMargin) ago: the server may then expire it
//     and hand its claims on, so the holder steps down first. Only writes,
//     syncs, multis and the connect handshake are answered through the
//     leader (so the library's pings go as syncs of "/", and each
//     connection sends its own every twelfth of the timeout); an answer
//     proves the send time of the latest request sent a quarter of the
//     timeout before the answered one; only answers without error count;
//     the first deadline comes with the server's first answer (the timeout
//     granted). Why each: docs/layout-zookeeper.md, Sessions. Leadership
//     also ends as soon as the connection drops (stepDown);
//   - the connection writes the session's last zxid into connect and
//     set-watches requests itself (see hideZxid). Requests queued while
//     disconnected may go out before set-watches: the server still reports
//     every change after its zxid, and an event for what a read already
//     saw is read again and ignored (Watch and WatchRecursive compare
//     Mzxids). The library re-sends the credentials, awaiting their
//     answers, before any queued request (TestReconnection*,
//     TestRequestsQueuedDuringDisconnection, TestSetWatchesInSeveralFrames,
//     TestQueuedRequestsAfterCredentials, TestLockWaiterAcrossReconnection,
//     TestWatchStartedWhileDisconnected,
//     TestChangeReportedAfterQueuedAnswers).
//
// # Which znodes the library deletes, and when
//
//   - a lock or election entry: only its own, on the session that created
//     it, while that session still knows it with its token (Unlock, a
//     Lock or TryLock giving up, Stop, Resign, a leader's entry after its
//     connection dropped, an entry whose create lost its answer); the
//     server deletes the rest with their session;
//   - a file: Delete, at the caller's version when given. A Conn rooted at
//     a reserved place (inside a "locks" znode, or below a segment
//     "elections" at any depth) reads the Stat of what it writes or deletes
//     first and leaves ephemeral znodes alone: Update finds NodeExists,
//     Delete NoNode, as on memorytopo and etcd2topo;
//   - a directory znode: only when a read showed it empty (no data, no child
//     but an empty "locks" znode), or holding nothing but what the same
//     multi deletes (an empty childless directory reads as an empty file,
//     so it must never be left between two multis), at the data version
//     read, so that a directory re-created meanwhile as a file is kept. The
//     library writes a directory's data only in Create over a directory (it
//     becomes the file), Delete of a file with children (it empties the
//     data), and the same ops in a Txn;
//   - "locks" and election "values" znodes are containers: the server
//     deletes them once empty (znode.container.checkIntervalMs, 60 s by
//     default); the library removes an empty "locks" znode with its
//     directory;
//   - election directories ("elections", elections/<name>) are persistent
//     and outlive their candidates, as Vitess creates them.
//
// # Fencing tokens, Done and terms
//
// A lock's token is the Czxid of its entry; a term's, the Czxid of the
// leading candidate: every later holder's is greater (why: driver). Done
// closes on Unlock (Stop or Resign for a term), when the claim's session
// ends, and when the watch behind it (pipeline.go, watchEntry) sees the
// entry deleted or another session's. A term also ends when its
// connection drops.
//
// # Transactions
//
// Conn.Txn is one multi, conditions first, then writes, so that every
// condition sees the state before the transaction. IfHeld runs the multi on
// the claim's session (once it ends, the server refuses its requests, while
// the entry's name may be another session's), behind a sync and an exists
// of the entry (before every multi) that must show it the session's with
// the claim's token: a multi's check compares only the data version. The
// window left: a deletion and a reuse of the name both committed between
// the last sync and the multi (TestGuardedWriteNameReusedEventInFlight,
// TestGuardedWriteNameReusedBetweenMultis). See Txn, and
// docs/layout-zookeeper.md, Transactions.
//
// # Resuming a candidacy
//
// ResumeInfo carries the candidate's session id and password;
// ResumeLeaderParticipation opens a client on that session, and its end
// closes the session with the earlier process's other claims on it. That
// process must be gone (driver.Resume).
//
// # Reads
//
// A Conn never reads state older than a write it acknowledged, on any of
// its sessions: ZooKeeper keeps one session's reads monotonic, a new
// session is a transaction its follower applies in order, and the first
// read of every session is preceded by a sync. Options.LinearizableReads
// (or a context of topo.WithLinearizableRead) puts a read barrier before
// reads (see Conn.read). Check always syncs before it reads the entry.
package zk2topo
