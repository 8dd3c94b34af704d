// Command topoctl operates a topology store (etcd, ZooKeeper, Consul or
// memory) through topokit; `topoctl serve` runs an embedded etcd for it.
// See docs/quickstart.md and `topoctl --help`. To build a topoctl that
// includes another backend, see package github.com/topokit/topokit/topoctl.
package main

import (
	"os"

	"github.com/topokit/topokit/topoctl"
)

func main() {
	os.Exit(topoctl.Run())
}
