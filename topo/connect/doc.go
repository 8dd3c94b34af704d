// Package connect opens the bundled backends with their TLS and
// authentication settings given as one plain value (Settings), so that a
// program -- topoctl, a web UI, a cluster manager -- names a store by
// implementation, address and root and never calls a backend package
// itself. Backends other than etcd2, zk2 and consul come from the factory
// registry (topo.GetFactory) as they are.
//
// Settings is a value: copy it freely; its methods are safe for concurrent
// use.
package connect
