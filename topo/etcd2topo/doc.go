package etcd2topo

// Leader values in the Vitess layout.
//
// The candidate <root>/elections/<name>/locks/<lease id> holds exactly the
// participant id, as in Vitess. The value it publishes (Campaign,
// Proclaim) is the key
//
//	<root>/elections/\x00values/<name>/<lease id>
//
// (a NUL byte, then "values"), put on the entry's lease in the entry's own
// transaction (no leader is seen without its value; the value goes with
// the lease), rewritten by Proclaim guarded on the entry's token, and
// deleted with the entry by Resign and Stop.
//
// Why no queue can take a value key for a candidate:
//
//   - Vitess's GetCurrentLeaderID reads <root>/elections/<E>/ sorted by
//     ModRevision, limit 1, and its campaign waits on
//     <root>/elections/<E>/locks/. A value key lies under
//     <root>/elections/<E>/ only if <E> begins with a NUL, and no election
//     name has one (topokit refuses it; Vitess joins names from flags).
//     So the value of "a/b", <root>/elections/\x00values/a/b/<lease>, is
//     outside <root>/elections/a/ and never ties with a candidate on
//     ModRevision in a Vitess read (etcd's sort is not stable beyond 12
//     keys: interop/vitess TestElectionQueue).
//   - A lock on any directory D waits on <root>/D/locks/, which holds a
//     value key only if a segment of "\x00values/<name>" is "locks":
//     CheckElection refuses that segment in names. topokit's queues also
//     count only leased keys directly under the prefix.
//   - Files: "elections" is reserved, so no file collides with a value;
//     List and WatchRecursive skip reserved paths, and ListDir of
//     "elections" leaves "\x00values" out (leased, so a full ListDir
//     still shows "elections" Ephemeral; Vitess's ListDir would show
//     "\x00values", but Vitess lists elections nowhere).
//
// A value key belongs to the entry of its name when it is on the entry's
// lease and written at or after the entry's revision (Leader and Observe
// check both, reading queue and values at one revision); a key left by a
// claim of unknown outcome is on the shared lease and is rewritten by the
// next claim of that name.
