package topoctl

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// A Consul root with a leading "/" works in topokit but not for Vitess's
// Consul backend on the same agent: every command warns, copy and diff
// specs included; the form without it, and the default root on Consul
// (vitess/global), do not.
func TestConsulRootWarning(t *testing.T) {
	t.Parallel()
	addr := consultest.Start(t)
	const warning = `topoctl: warning: Consul root "/warn" starts with "/"`
	slash := target{impl: "consul", addr: addr, root: "/warn"}
	r := slash.run(t, "", "put", "f", "v")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, warning)
	assert.Contains(t, r.stderr, `give the root as "warn"`)

	plain := target{impl: "consul", addr: addr, root: "warn"}
	r = plain.run(t, "", "get", "f")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "v", r.stdout, "the same root, with or without the leading /")
	assert.Empty(t, r.stderr)

	r = target{impl: "memory", addr: t.Name(), root: "/"}.run(t, "", "copy", "--from", "consul:"+addr+":/warn", "--to", "memory:"+t.Name()+":/")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, warning)

	def := target{noFlags: true, env: map[string]string{envImplementation: "consul", envServerAddress: addr}}
	r = def.run(t, "", "put", "g", "w")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	assert.Equal(t, "w", target{impl: "consul", addr: addr, root: "vitess/global"}.ok(t, "get", "g"), "the default root on Consul is vitess/global")
}
