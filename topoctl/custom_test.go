package topoctl

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// customBackend is the name of a backend registered by this test binary
// only, as a program embedding topoctl registers its own.
const customBackend = "topoctl-test-custom"

func init() {
	if err := topo.RegisterFactory(customBackend, memorytopo.NewFactory()); err != nil {
		panic(err)
	}
}

// TestCustomBackend checks that a backend registered by the embedding
// program is listed, selected by --topo-implementation with the address
// and root flags (an empty address included), and usable in copy specs.
func TestCustomBackend(t *testing.T) {
	t.Parallel()
	help := target{noFlags: true}.ok(t, "--help")
	assert.Contains(t, help, customBackend)
	for _, name := range []string{"etcd2", "zk2", "consul", "memory"} {
		assert.Contains(t, help, name)
	}

	tg := target{impl: customBackend, addr: "", root: "/" + t.Name()}
	tg.ok(t, "put", "/a/f", "v")
	assert.Equal(t, "v", tg.ok(t, "get", "/a/f"))
	assert.Equal(t, "f\n", tg.ok(t, "ls", "/a"))
	tg.ok(t, "lock", "/a", "--", "true")
	tg.ok(t, "copy", "--to", customBackend+"::/"+t.Name()+"-copy", "/a")
	assert.Equal(t, "v", tg.withRoot("/"+t.Name()+"-copy").ok(t, "get", "/a/f"))
	// Another address is another store of this backend.
	other := target{impl: customBackend, addr: "elsewhere", root: tg.root}
	other.fails(t, ExitFailure, []string{"NoNode"}, "get", "/a/f")

	// --backend (-b) is the same flag.
	b := target{noFlags: true}
	assert.Equal(t, "v", b.ok(t, "-b", customBackend, "--topo-global-root", tg.root, "get", "/a/f"))
	assert.Equal(t, "v", b.ok(t, "--backend", customBackend, "-i", customBackend, "--topo-global-root", tg.root, "get", "/a/f"))
	b.fails(t, ExitUsage, []string{"disagree"}, "--backend", customBackend, "-i", "memory", "ls")

	r := target{impl: "no-such-backend", addr: "x", root: "/"}.fails(t, ExitFailure, []string{"NoImplementation", customBackend}, "ls", "/")
	require.Empty(t, r.stdout)
}
