package etcd2topo

// Leader values in the Vitess layout (issue 12).
//
// A candidate of election <name> is the entry
// <root>/elections/<name>/locks/<lease id> holding exactly the participant
// id, as Vitess lays it out. The value the candidate publishes (Campaign,
// Proclaim) is the key
//
//	<root>/elections/\x00values/<name>/<lease id>
//
// (the segment after "elections/" is a NUL byte followed by "values"),
// put on the entry's lease in the same transaction as the entry (so no
// leader is ever seen without its Campaign value, and the value vanishes
// with the lease), rewritten by Proclaim in a transaction comparing the
// entry's CreateRevision and ModRevision with the term's token and its
// lease with ours, and deleted with the entry by Resign and Stop.
//
// Why no election can take a value key for a candidate:
//
//   - Vitess's etcd GetCurrentLeaderID reads the prefix
//     <root>/elections/<E>/ sorted by ModRevision, limit 1, and its
//     campaign (a lock on elections/<E>) waits on the prefix
//     <root>/elections/<E>/locks/. A value key lies under
//     <root>/elections/<E>/ only if <E> begins with a NUL byte. topokit
//     refuses election names with a NUL (they are canonical paths), and no
//     Vitess election name has one (it is a path joined with path.Join
//     from flag-given names). So a value key sits in no election's
//     prefix, however the names nest: the value of election "a/b" is
//     <root>/elections/\x00values/a/b/<lease>, outside <root>/elections/a/
//     (which Vitess's election "a" reads). It can therefore never tie
//     with a candidate on ModRevision in a Vitess read (etcd's sort is not
//     stable beyond 12 keys: interop/vitess TestElectionQueue).
//   - A lock on any directory D, Vitess's or topokit's, waits on
//     <root>/D/locks/. That prefix holds a value key only if some segment
//     of "\x00values/<name>" is "locks": the name has none (CheckElection
//     refuses a "locks" segment) and "\x00values" is not one. topokit's
//     own queues also count only leased keys directly under the prefix.
//   - Files: the path elections/... is reserved (first segment
//     "elections"), so no topokit file can be or collide with a value;
//     List and WatchRecursive skip reserved paths, and ListDir of
//     "elections" leaves the "\x00values" entry out (the values are under
//     a lease, so "elections" stays Ephemeral in a full ListDir of the
//     root). Vitess's ListDir of elections would show a "\x00values"
//     directory entry, but Vitess lists elections nowhere in its
//     election code.
//
// A value key belongs to the entry of the same name when it is on the
// same lease and was written at or after the entry's revision (Leader
// and Observe check both, from one read of the queue and the values at
// one revision); a key left by a claim whose outcome was unknown is on
// the shared lease and is rewritten by the next claim of that name.
