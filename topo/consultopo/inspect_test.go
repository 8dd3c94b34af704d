package consultopo

import (
	"testing"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"
)

// TestStoreMetaFlags: StoreMeta gives a key's flags as Consul keeps them,
// an unsigned 64-bit number (as "consul kv get -detailed" shows it), also
// with the top bit set, as half of topokit's random write nonces have it.
func TestStoreMetaFlags(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	ctx := t.Context()
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	const flags = uint64(1)<<63 | 5
	_, err = rawClient(t).KV().Put(&api.KVPair{Key: root + "/d/f", Value: []byte("x"), Flags: flags}, nil)
	require.NoError(t, err)
	meta, err := c.StoreMeta(ctx, "d/f")
	require.NoError(t, err)
	got := map[string]any{}
	for _, m := range meta {
		got[m.Name] = m.Value
	}
	require.Equal(t, flags, got["flags"])
}
