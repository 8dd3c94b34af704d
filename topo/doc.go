// Package topo is topokit's abstraction over a coordination store (etcd,
// ZooKeeper, Consul or an in-memory store): the Conn interface, the typed
// errors every backend returns, the shared path rules, the factory registry
// and the Server that holds the global cell and per-cell connections.
//
// A topology is split into cells. The global cell holds records that every
// cell shares, including one CellInfo record per cell at
// cells/<cell>/CellInfo; that record names the store address and root of the
// cell's own store. All paths given to a Conn are relative to the root of
// the cell it was opened for: "a/b" and "/a/b" name the same file.
//
// Server caches one Conn per cell and follows each cell's CellInfo record
// through a watch on the global cell; a failure of that watch never closes
// a cell's Conn (see Server). IsPermanent tells retry loops which error
// codes not to retry (PermissionDenied, InvalidPath, InvalidArgument,
// NoImplementation, Closed); the Server's loops and election.Runner use it.
//
// Backends live in subpackages (memorytopo, etcd2topo, zk2topo, consultopo)
// and register themselves with MustRegisterFactory from an init function, so a
// program selects one by importing it for side effects and naming it in
// OpenServer. The conformance suite in topo/test checks any Conn against the
// contract documented here.
package topo
