// Package etcd37 checks that topokit's etcd backend builds and works in an
// application whose go.mod requires go.etcd.io/etcd/client/v3 v3.7.x. It is
// a module of its own (so the main module stays at the lowest client it
// supports, v3.6.16): its go.mod requires topokit through a replace of the
// repository root and client v3.7.3, which minimal version selection then
// gives topo/etcd2topo. etcd's server v3.6 does not compile against the
// v3.7 client packages, so the etcd under test runs out of process: the
// tests build topoctl from the main module (server v3.6.16) and run
// `topoctl serve`. See docs/compatibility.md.
package etcd37
