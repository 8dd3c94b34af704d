// Package vitessbench benchmarks topokit's backends beside Vitess's
// (vitess.io/vitess v0.24.4 go/vt/topo: memorytopo, etcd2topo, zk2topo,
// consultopo) on the same servers. It is a module of its own, so that the
// main module's build and tests never compile Vitess; run it with
// `make bench-vitess`.
package vitessbench
