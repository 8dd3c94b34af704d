// Package inspect reads who holds what in a topology store, on every
// backend: the holder of a directory's lock (LockHolder), with its
// fencing token, session and queued waiters (LockOf; Locks for every held
// lock of a subtree), the leader of an election (Leader; Elections for
// every election, with its candidates in queue order), the holders of a
// semaphore (SemaphoreHolders), and what the store itself keeps about a
// path beyond the topology interface (StoreMeta: etcd's revisions and
// lease, ZooKeeper's zxids and ACL, Consul's indexes and session).
//
// Each function takes a topo.Conn, a context and plain arguments and
// returns values and typed errors (topo.Error codes); none writes to the
// store. What only one backend can read is behind a small interface that
// the backend's Conn implements (QueueReader, which every backend on the
// claims engine has; LockHolderReader, MetaReader, SessionTTLReader),
// found through the Unwrap() topo.Conn methods of decorators (see
// topo.Middleware), so that callers never call a backend package.
//
// How long a lock or a candidacy has been there (Lock.Since, Entry.Since)
// is shown on ZooKeeper only (the znode's ctime, read with the queue),
// and the holder's remaining TTL (Lock.TTL) on etcd only (its lease,
// SessionTTLReader); etcd keeps no creation time, Consul neither, and
// Consul's session TTL is not a remaining time, nor does ZooKeeper tell
// another client's session timeout.
//
// topoctl, Go programs that embed topokit and a web UI share it. Every
// function is safe for concurrent use.
package inspect
