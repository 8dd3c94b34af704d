// Package etcd37 checks that topokit's etcd backend builds and works in an
// application whose go.mod requires go.etcd.io/etcd/client/v3 v3.7.x. It is
// a module of its own (so the main module stays at the lowest client it
// supports, v3.6.16): its go.mod requires topokit through a replace of the
// repository root and client v3.7.3, which minimal version selection then
// gives topo/etcd2topo. `make test` runs, from this module, its tests and
// topo/etcd2topo's own (`go test ./...
// github.com/topokit/topokit/topo/etcd2topo`), both built with client
// v3.7.3. The etcd server v3.6.16 they talk to runs out of process
// (etcdtest builds it in a module of its own); the tests named *Server37
// embed server v3.7.3, which does compile against this module's client.
// See docs/compatibility.md.
package etcd37
