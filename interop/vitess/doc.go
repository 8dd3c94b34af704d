// Package vitessinterop tests that topokit keeps Vitess's store layout:
// Vitess v0.24.4's own etcd2topo, zk2topo and consultopo Conns and
// topokit's Conns on the SAME root of the same real servers (embedded etcd,
// ZooKeeper, consul -dev) share elections, locks and files. Vitess's Conns
// are created the way Vitess's factories create them (Factory.Create).
//
//   - Elections (election_test.go): leadership handed over between a
//     Vitess and a topokit participant, a free race of two of each, and a
//     queue of ten of both; an in-process owner counter, both libraries'
//     GetCurrentLeaderID, topokit's WaitForNewLeader (and Observe, Leader,
//     Campaign and Proclaim where the backend implements them; a
//     NoImplementation placeholder is logged and WaitForLeadership used
//     instead), and Vitess's WaitForNewLeader on etcd (it has none on
//     ZooKeeper and Consul).
//   - Locks (lock_test.go): Lock and TryLock of each library against the
//     other's holder, both ways, and under concurrent churn.
//   - Faults (fault_test.go, restart_test.go): Vitess and topokit
//     contenders on one lock while a topokit Conn is partitioned (a
//     faultproxy blackhole outliving its session or lease: Lock,
//     LockWithTTL, LockName), while its session or lease is ended behind
//     it (Consul session destroyed, etcd lease revoked), while a Vitess
//     holder's is, and while the server (a member, node or persistent
//     agent of the test's own) restarts; a churn of both libraries with
//     partitions in between. Whenever one acquires, no other holds but a
//     topokit holder that already knows it lost (Done closed, Check
//     LockLost); a lost holder's Unlock says LockLost and leaves the new
//     holder alone, its IfHeld write is refused; inspect names Vitess's
//     holder; and nothing is left that a session or lease owns (raw
//     clients list lock and queue entries, tail keys and sessions).
//   - Files (file_test.go): bytes, versions and compare-and-set across
//     libraries, watches, ListDir and List with Vitess's lock and election
//     entries in the tree (topokitView lists the documented differences),
//     and Vitess's plain files at topokit's reserved paths.
//
// It is a module of its own, like bench/vitess and with the same
// requirements (vitess.io/vitess v0.24.4, topokit replaced by ../..), so
// that the main module's build never compiles Vitess; the two modules
// resolve the same versions, so the build cache compiles Vitess once for
// both. `make test` runs it (its last line):
//
//	cd interop/vitess && go test -race -count=1 ./...
package vitessinterop
