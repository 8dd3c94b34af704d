// Command topoctl operates a topology store (etcd, ZooKeeper, Consul or
// memory) through topokit; `topoctl serve` runs an embedded etcd for it.
// See docs/quickstart.md and `topoctl --help`.
package main

import (
	"os"

	"github.com/topokit/topokit/cmd/topoctl/internal/cli"
)

func main() {
	os.Exit(cli.Run())
}
