// Package etcdcluster runs a self-clustering embedded etcd: every instance
// of a program embeds a node, and the nodes form, grow and shrink a real
// etcd cluster (go.etcd.io/etcd/server/v3/embed) to an ideal size stored in
// the cluster, with no separate etcd deployment.
//
// # Nodes
//
// A node is started (Start, or Run for a whole life ending in a graceful
// leave) with a name, client and peer URLs (listened on, and advertised
// ones), a data directory and optional seeds (client URLs of any running
// member):
//
//   - member data in the data directory: the node restarts that member
//     (and is a client of the cluster through it, the seeds, and the
//     other members its data records, so that a member removed while it
//     was down learns so, moves its data aside and volunteers again
//     whatever seeds it was given). The data records whose member it
//     is (DataDir/member/topokit-member.json; for older data, the
//     membership stored in the data is read, and once the server runs
//     its own member is checked): data of a member with another peer
//     URL than the node's -- a copy of another node's data directory,
//     another node's directory, or a changed peer address -- is refused
//     (ErrForeignData), since two processes running one member could
//     lose acknowledged writes and a copy of a one-member cluster would
//     accept writes of its own. Start returns once the member serves
//     again or its server stopped: after an outage the first members
//     restarted wait, logging which members they wait for, until a
//     majority of the voters runs, so members can be started one at a
//     time;
//   - no data and no seeds: it bootstraps a new one-member cluster;
//   - seeds: it waits until a member answers at a seed, then is a client
//     of the cluster and, unless ClientOnly, volunteers to be a member.
//     With Config.BootstrapExpect N, nodes started with the same seeds
//     and N that find no member form one new cluster: once N of them see
//     each other, the one endorsed by N of them bootstraps and the others
//     join it (see Config.BootstrapExpect).
//
// A node that is not a member volunteers only while it can listen on its
// client and peer addresses; while it cannot it withdraws its volunteer
// key and logs why.
//
// Every node that is not ClientOnly keeps a volunteer key on a lease of
// Config.VolunteerTTL and campaigns for the decider leadership. The key
// is written only when it is missing, on the node's own lease, or holds
// the node's own record (its earlier run); Start refuses a node whose
// name a running node with other URLs holds (ErrNameTaken). A member
// also advertises its client URL under the same lease. A node that finds
// itself nominated, and added to the member list as a learner that never
// started, starts its embedded server with initial-cluster-state=existing
// and an initial cluster built from the member list. A node whose member
// was removed (it is no longer in the member list) stops its server,
// moves its data aside (DataDir/member.removed-<ns>) and keeps running as a
// client and volunteer; if nominated again it starts a new server on the
// same ports in the same process. A server that stopped on its own while
// still a member is restarted from its data. A node with no data whose
// earlier member (same peer URL) is still listed withdraws its volunteer
// key until the decider removes that member, then volunteers afresh: a
// member whose data is gone never runs again under its old identity.
//
// # Cluster identity
//
// Every bootstrap draws a random initial cluster token, from which etcd
// derives the cluster ID and the first member's ID: no two bootstraps
// share them. A bootstrap node that lost its data and is started again
// without seeds therefore makes a new, separate cluster at its old URLs,
// whose peers and clients the old cluster's members refuse. A node that
// left or was removed (its data moved aside, DataDir/member.removed-<ns>)
// and is started again without seeds does not bootstrap: Start fails with
// ErrFormerMember. Clients
// (NewClientWith, OpenConn, a node's own client, and etcd2topo.NewConn)
// given several endpoints ask each for its cluster ID at open and refuse
// endpoints of different clusters (etcd2topo.ErrClusterMismatch), writing
// nothing. Once open, a client refuses any answer that carries another
// cluster ID than its own: a connection re-established to an old address
// now served by another cluster returns errors, never that cluster's
// data or acknowledgements (a write it sent there may have been applied
// there, but the caller is told it failed), and the member-list follower
// stops using such an address. Status reports the cluster ID.
//
// # The decider
//
// One node at a time is the decider, elected through topokit's own etcd
// election (etcd2topo's NewLeaderParticipation on the node's Conn rooted at
// the prefix), not by asking which member is the Raft leader. While it
// leads, every Config.CheckInterval and at once when a volunteer key is
// deleted (a node leaving, or its lease expired), it takes the membership lock
// (etcd2topo LockName, on a lease of Config.DeciderTTL) and makes at most
// ONE membership change, the first that applies of:
//
//  1. A change in flight. A learner with no matching nominee record, or
//     whose volunteer key is gone, is removed (rollback). A started
//     learner is promoted (MemberPromote); etcd refuses until the learner
//     has caught up with the leader, and the decider tries again next
//     time. A learner not promoted within Config.NomineeTimeout of the
//     decider first seeing it is removed (rollback), and that volunteer
//     is passed over (not nominated) for NomineeTimeout, doubling with
//     each failure in a row up to 16 NomineeTimeouts, so the next
//     volunteer is nominated meanwhile (the backoff is the decider's
//     memory: a new decider starts afresh). A nominee record
//     with no learner (promoted or never added by a decider that died) is
//     deleted.
//  2. A voter whose volunteer key expired or was withdrawn is removed,
//     unreachable ones first. A key whose lease already expired by the
//     etcd leader's clock (TimeToLive below zero) counts as gone even
//     before etcd deletes it: etcd retries a failed lease revocation only
//     every 3 s.
//  3. Fewer voters than the ideal size and a volunteer that is not a
//     member: the first such volunteer by name is nominated (nominee
//     record) and added as a LEARNER (MemberAddAsLearner).
//  4. More voters than the ideal size: one voter is removed, preferring
//     unreachable ones, then not the Raft leader, then not the decider's
//     own member.
//
// Every removal keeps a quorum of reachable voters in the new
// configuration (a voter is reachable when it answers a status request
// within a second) and never removes the last voter; adding a learner does
// not change the quorum. Each step is computed from the current member
// list and keys, so a decider that dies mid-step leaves nothing its
// successor cannot finish or roll back.
//
// Fencing: before every member API call (add, promote, remove) the decider
// checks that its leadership context is alive, that the membership lock is
// held, and -- through a linearizable etcd transaction -- that its
// candidate key still exists with the CreateRevision it won with (the
// election's lowest CreateRevision wins, and no lower one can appear).
// Writes of the nominee record are conditional on that same compare in
// the same transaction. etcd's member API cannot take such a compare, so a
// decider paused for longer than DeciderTTL between its check and its
// call can still make one stale call; the consequence is bounded by the
// idempotent steps above (a stale add is a learner its successor promotes
// or rolls back; a stale remove is checked by etcd's strict reconfig check
// against quorum loss).
//
// etcd's own reconfiguration checks also apply: it refuses a member
// change until its leader has been connected to the voters for 5 s (e.g.
// right after a promotion or a leadership move); the decider then simply
// tries again next time.
//
// # Known etcd defects worked around
//
//   - etcd v3.7 panics, through its logger, when a request (Status, a
//     learner-checked RPC, the health endpoint) reaches a member while its
//     own removal is being applied (etcd-io/etcd#21966); the embedded
//     server's logger gets a panic hook that ends only that request's
//     goroutine for that one message, so a routine removal does not crash
//     the host process.
//   - etcd v3.6 closes a stopping member's backend (after its removal,
//     or on Close) while its gRPC server still runs requests
//     (etcd-io/etcd#22189); a read of the closed backend panics while
//     holding the backend's read lock, after which every read, and the
//     server's Close, waits forever. The embedded server's unary requests
//     and Snapshot streams pass a gate that refuses them (Unavailable) once the server is
//     stopping, cancels the ones admitted, and holds etcd's shutdown --
//     through the server's own wait group -- until they have returned,
//     so that no request reads a closed backend. The health endpoints
//     need no gate: the only range they read is of the empty key, which
//     etcd answers from its in-memory index.
//   - A member that removes itself (a leaving decider) may be answered
//     "server stopped" by its own server although the removal was
//     applied: the server stops between applying the change and
//     answering. A removal whose call failed is therefore looked up in
//     the member list (a linearizable read, through the other members)
//     before it is reported as failed.
//   - clientv3's per-endpoint maintenance dial reads the client's endpoint
//     list without its lock, racing with SetEndpoints; per-member calls
//     (Status) therefore use clients of their own.
//
// # TLS and authentication
//
// Config.ClientTLS and Config.PeerTLS are etcd's client and peer TLS
// settings (transport.TLSInfo; certificates are re-read on each
// handshake). A node also uses ClientTLS's certificate, key and CA as its
// own client credentials, so with client-certificate auth only nodes
// holding a certificate of the cluster's CA can read, write or
// volunteer. With peer TLS, a node that is not a member answers TLS
// handshakes on its peer address, and the decider nominates a volunteer
// only after a handshake with it succeeded under the decider's own peer
// settings (scheme included): a volunteer without the cluster's peer
// credentials never becomes a learner. Config.EnableAuth makes the
// bootstrapping node turn etcd auth on with the root user; nodes log in
// with Config.Username and Password (root, since membership changes need
// it). NewClientWith and StatusWith take a client's credentials. Start
// refuses (ErrInvalidConfig) a client or peer certificate that is not
// valid for the host of the node's advertised client or peer URL, which
// no node or client could verify there.
//
// # Keys
//
// Under Config.Prefix (default DefaultPrefix, "/topokit/cluster"):
//
//	<prefix>/size                   ideal number of voters, decimal (absent: 3)
//	<prefix>/volunteers/<name>      JSON {name, peerURL, clientURL}, on the node's lease
//	<prefix>/endpoints/<name>       a member's advertised client URL, on the node's lease
//	<prefix>/nominee                JSON Nominee: the learner addition in flight
//	<prefix>/elections/decider/...  topokit election candidates (decider ids "<name>/<nonce>")
//	<prefix>/membership/locks/...   topokit lock serialising membership changes
//
// # Clients
//
// NewClient and OpenConn open an etcd client or a topokit Conn that follow
// the member list (the started voters' client URLs, refreshed every check
// interval with SetEndpoints), so that removing the member a client talks
// to does not break it. Status and SetSize are the operations behind
// `topoctl cluster status` and `topoctl cluster size`.
//
// A write whose answer is lost (the member it went to died or stopped,
// or its deadline passed) has an unknown outcome: it may or may not have
// been applied. clientv3 sends a write again only when it was never sent,
// so NewClient's client never applies a write twice behind the caller's
// back, and reports it as failed, never as done.
//
// OpenConn's client also fails over within the caller's deadline. Every
// key-value request asks for a member with a leader (one without refuses
// at once). A request still running after 300 ms (100 ms for 3 s after
// a check found the members unhealthy: a failover is under way) makes
// the client ask every endpoint for its status (500 ms each; one whose
// process is gone, refusing connections, fails at once instead of being
// waited for), again at that interval while it runs; it abandons the
// request when an endpoint does not answer
// (stopped or dead: the client stops using it until the member-list
// follower sees it answer again), has no leader, is in a newer raft term
// than the client last saw (a new leader: a request forwarded to the old
// one is lost), or when the leader the members follow does not answer.
// What follows depends on the request:
//
//   - a read, or a refusal that etcd gives before proposing (no leader,
//     a proposal raft dropped): sent again (after 50 ms), to whichever
//     endpoint the client picks, within the caller's deadline and for at
//     most 5 s;
//   - a compare-and-set (a transaction comparing one key's ModRevision
//     with a revision and writing or deleting that key, its failure
//     branch only reading: Update and Delete with a version): sent again,
//     since at most one of its attempts can pass the compare. If a later
//     attempt succeeds, the write is done once. If its compare fails, the
//     abandoned attempt may have been applied, or another client wrote:
//     the call fails with Unavailable (outcome unknown), never BadVersion;
//   - any other write (Update without a version, Create, Delete without a
//     version, transactions): never sent again once it may have been
//     applied (an abandoned attempt of a plain put can land later, and a
//     create's compare holds again after a delete). The call fails at once
//     with Unavailable (outcome unknown) instead of waiting out its
//     deadline on the stalled member, and the caller's next call goes to
//     another member.
//
// A caller resolves an unknown outcome by reading the file back (a
// linearizable Get). Contents at a higher version than the write was
// based on say it landed (when nobody else writes the same contents).
// The version it was based on says it has not landed yet; an abandoned
// plain put may still land later, so write again with Update at the
// version read: that compare-and-set and the abandoned attempt cannot
// both be applied, and the loser's compare fails.
// TestLeaderFailover checks the outcomes under SIGKILL and SIGSTOP: no
// call waits out its deadline, the history is linearizable, and a
// compare-and-set counter resolved by reading back after each unknown
// outcome never moves by two, and etcd's count of the writes applied to
// each key shows none applied twice.
//
// How long writes stop when the raft leader dies is mostly the election:
// a follower campaigns after one to two election timeouts without a
// heartbeat. With Config.ElectionMs at LANElectionMs (500 ms, topoctl
// serve's default) BenchmarkClientFailover measured the longest time
// without an acknowledged write through OpenConn at 0.6-1.1 s after a
// kill -9 of the leader and 0.8-1.0 s while it was stopped (SIGSTOP), on
// a loaded 2-core machine; with etcd's default 1000 ms, 1.2-1.9 s and
// 1.1-2.0 s (docs/semantics.md has the table).
//
// A plain etcd2topo Conn given several endpoints (etcd2topo.NewConn,
// or a comma-separated server address) has no such failover:
// it moves to another endpoint when one refuses connections, but a write
// forwarded to a leader that died, or sent to a member that stopped,
// waits out the caller's deadline (clientv3 keeps waiting for a stopped
// member until its 15 s keepalive gives up). Programs that must keep
// writing through a leader's failure open their Conn with OpenConn.
//
// # Graceful leave
//
// Leave (and Run when its context ends) withdraws the volunteer key, moves
// Raft leadership away if this member holds it, waits for the decider
// (which may be this node, and which acts on the withdrawal at once) to
// remove the member, reading the member list every 100 ms, then stops. The last
// member stops without being removed and keeps its data. Close stops a
// node without leaving: its volunteer key expires after VolunteerTTL and
// the decider removes it unless it came back in time.
//
// # What it is not
//
// It does not move data between machines beyond etcd's own replication,
// and it assumes every member can reach every other member's peer URL and
// every node can reach the members' client URLs. It adds members one at a
// time, so growing by k members takes k add-catch-up-promote rounds. A
// learner added by anything other than a decider (e.g. etcdctl) is rolled
// back. It keeps at most one learner, etcd's default limit.
package etcdcluster
