// Package vitessinterop tests that topokit keeps Vitess's store layout:
// Vitess v0.24.4's own etcd2topo, zk2topo and consultopo Conns and
// topokit's Conns on the SAME root of the same real servers (embedded etcd,
// ZooKeeper, consul -dev) share elections, locks and files. Vitess's Conns
// are created the way Vitess's factories create them (Factory.Create).
//
// It is a module of its own, like bench/vitess and with the same
// requirements (vitess.io/vitess v0.24.4, topokit replaced by ../..), so
// that the main module's build never compiles Vitess; the two modules
// resolve the same versions, so the build cache compiles Vitess once for
// both. `make test` runs it.
package vitessinterop
