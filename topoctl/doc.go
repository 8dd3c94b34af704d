// Package topoctl is the topoctl command-line tool as a library, so that a
// program can build its own topoctl that includes its own topology backend.
//
// topoctl operates any topokit topology store: files, directories,
// watches, locks, leader elections, copies and diffs across stores, on
// etcd ("etcd2"), ZooKeeper ("zk2"), Consul ("consul"), memory ("memory"),
// and on every other backend registered with topo.MustRegisterFactory in the
// same binary. `topoctl --help` lists the registered backends;
// --topo-implementation (-i; alias --backend, -b) selects one,
// --topo-global-server-address (-a) and --topo-global-root give the
// address and root passed to its factory. The bundled backends are always registered (this package
// imports them).
//
// A custom topoctl is one import of the backend (whose init registers its
// factory) and one main:
//
//	package main
//
//	import (
//		"os"
//
//		_ "example.com/mystore/mystoretopo" // registers "mystore"
//		"github.com/topokit/topokit/topoctl"
//	)
//
//	func main() { os.Exit(topoctl.Run()) }
//
// after which `mytopoctl -i mystore -a ADDR --topo-global-root /r ls /`
// works as for a bundled backend. The TLS and authentication flags
// (--etcd-*, --zk-*, --consul-*) configure only the bundled backends; a
// custom backend reads its own settings (from its address, the
// environment or a file) in its factory. An address is required for zk2
// and consul and defaults to the embedded etcd's for etcd2; any other
// backend gets the address as given, "" included.
//
// Run is the binary (process arguments, environment, signals); Main runs
// topoctl in-process on given streams, for tests and programs that embed
// it. Both return the exit codes listed as constants below.
package topoctl
