package topoctl

import (
	"testing"

	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// TestZooKeeper runs every scenario against a real ZooKeeper, each under
// its own root.
func TestZooKeeper(t *testing.T) {
	t.Parallel()
	addr := zktest.Start(t)
	runSuite(t, func(t *testing.T) target {
		return target{impl: "zk2", addr: addr, root: "/" + t.Name()}
	}, capabilities{})
}

// TestConsul runs every scenario against a real Consul agent, each under
// its own root.
func TestConsul(t *testing.T) {
	t.Parallel()
	addr := consultest.Start(t)
	runSuite(t, func(t *testing.T) target {
		// Without a leading "/", as Vitess's Consul backend needs.
		return target{impl: "consul", addr: addr, root: t.Name()}
	}, capabilities{})
}
