// Package cache serves reads of one subtree of a topo.Conn from memory.
//
// A Cache wraps a Conn and a prefix (a plain string prefix over file
// paths, as in Conn.List). One WatchRecursive on the prefix fills it and
// keeps it current; the Cache is itself a topo.Conn, so an embedder swaps
// conn for the Cache and keeps its code.
//
// Semantics, per call:
//
//   - Get and List of paths under the prefix are answered from memory in
//     the Cached mode (the default): the answer is the state of the store
//     as the watch last delivered it, file by file, with each file's own
//     Version. GetWithInfo and ListWithInfo also say when that state was
//     last confirmed, whether it is stale, and the store revision it
//     reflects (Info.Revision: every change under the prefix committed at
//     or before it is in the answer; 0 where the backend reports no
//     revision, ZooKeeper).
//   - Consistent mode answers so that the answer reflects every write
//     completed before the call started. A Get, when the wrapped Conn is a
//     SyncWatcher (etcd2topo, memorytopo) and the Cache is Healthy, is
//     answered from memory after a revision barrier: one cheap store read
//     of the current revision, then a wait until the watch has delivered
//     every change up to it. Otherwise, and for List and ListDir, it reads
//     through the store (a Get, List or ListDir on the wrapped Conn under
//     topo.WithLinearizableRead), which makes the read linearizable
//     whatever the Conn's options: zk2topo sends its read barrier first,
//     consultopo reads in Consul's consistent mode, etcd2topo and
//     memorytopo reads are linearizable anyway. Reads through do not fill memory
//     (only the watch fills it, which keeps its order the store's). List
//     reads through because memory applies a transaction's files one at a
//     time: a listing between two of them would show half of it.
//   - Bypass mode, and every path outside the prefix, go to the wrapped
//     Conn untouched (but for a Consistent read outside the prefix, made
//     under topo.WithLinearizableRead).
//   - ListDir goes to the wrapped Conn unless Options.ListDirFromMemory is
//     set, because lock and election entries (ephemeral, not files) appear
//     in listings but never in a WatchRecursive; from memory a listing
//     holds only files and directories of files.
//   - Writes (Create, Update, Delete, Txn) go to the wrapped Conn. Until
//     the watch has delivered a path's write made through this Cache (its
//     version, or its deletion), reads of that path, and Lists covering it,
//     go to the store: a writer always reads its own writes.
//
// Outages: when the watch ends with an error the Cache lists the prefix
// again with a new WatchRecursive and applies the difference (no change is
// lost, and local watchers see no change twice); meanwhile it is
// Resyncing. While the store cannot be reached (the new watch cannot be
// started, a probe fails with Unavailable or Timeout, or a call passed
// through returns Unavailable) the Cache is Stale. While not Healthy,
// cached reads are answered from memory, marked stale, for at most
// Options.MaxStaleness after the outage began, and from the store (which
// returns its error) afterwards. When the store answers again while the
// watch still runs, the Cache ends it and lists the prefix again, and is
// Healthy only once that listing is in memory (the resumed watch may
// still be on its way through the outage's changes). State reports
// Healthy, Resyncing, Stale or OverLimit, and Closed once Close was
// called.
//
// Local watchers: Watch and WatchRecursive of paths under the prefix share
// the one store watch. Each gets its initial value from memory and then
// every change in the order the store watch delivered them. A watcher whose
// buffer (Options.WatcherBuffer events) is full is dropped: it gets one last
// event whose Err is a ResourceExhausted *topo.Error wrapping
// ErrSlowWatcher, and its channel closes. Others are never blocked.
// Events carry no stale mark (topo.WatchData has none): WatchWithInfo and
// WatchRecursiveWithInfo say whether the initial values were stale, and
// State or Hooks.OnHealth tell the health afterwards.
//
// Memory: Options.MaxBytes bounds the bytes held (paths plus values). When
// the subtree outgrows it the Cache drops what it holds, stops its watch,
// serves every call from the store (as Bypass), ends its local watchers
// with ErrOverLimit, and State reports OverLimit for the rest of its life.
//
// Metrics: Options.Hooks receive every answer's outcome (hit, miss, stale),
// every resync, every change of health and the number of local watchers;
// topo/middleware.Metrics.CacheHooks turns them into Prometheus series,
// beside the topo calls that the same Metrics counts on the wrapped Conn.
//
// A Cache holds no package-level state and is safe for concurrent use.
package cache
