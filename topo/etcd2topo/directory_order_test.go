package etcd2topo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
)

// TestListDirKeyOrder: ListDir streams etcd's key order into sorted,
// de-duplicated names, including the one case where the keys of a name
// are not adjacent: a name that is a file and a directory ("n", "n/x")
// with names extending it by a byte below '/' ("n-b", "n.c") between its
// keys. Full listings merge the kinds (a directory wins) and the leases
// (ephemeral only when every key has one).
func TestListDirKeyOrder(t *testing.T) {
	c := openConn(t, serverAddr, newRoot())
	cli := c.Client()
	ctx := t.Context()
	lease, err := cli.Grant(ctx, 60)
	require.NoError(t, err)
	// Revoked at the end: left to expire, it would delete its keys in
	// whichever test runs a minute later.
	t.Cleanup(func() { _, _ = cli.Revoke(context.Background(), lease.ID) })
	for _, k := range []string{"a", "n", "n-b", "n.c/y", "n/x", "n/z/w", "z"} {
		_, err := cli.Put(ctx, c.key("d/"+k), "v")
		require.NoError(t, err)
	}
	for _, k := range []string{"e/x", "e/y", "n-b/leased", "m", "m!/x"} {
		_, err := cli.Put(ctx, c.key("d/"+k), "v", clientv3.WithLease(lease.ID))
		require.NoError(t, err)
	}
	names, err := c.ListDir(ctx, "d", false)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "a"}, {Name: "e"}, {Name: "m"}, {Name: "m!"}, {Name: "n"}, {Name: "n-b"}, {Name: "n.c"}, {Name: "z"}}, names)

	full, err := c.ListDir(ctx, "d", true)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{
		{Name: "a", Type: topo.TypeFile},
		{Name: "e", Type: topo.TypeDirectory, Ephemeral: true},
		{Name: "m", Type: topo.TypeFile, Ephemeral: true},
		{Name: "m!", Type: topo.TypeDirectory, Ephemeral: true},
		{Name: "n", Type: topo.TypeDirectory},
		{Name: "n-b", Type: topo.TypeDirectory},
		{Name: "n.c", Type: topo.TypeDirectory},
		{Name: "z", Type: topo.TypeFile},
	}, full)

	sub, err := c.ListDir(ctx, "d/n", false)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "x"}, {Name: "z"}}, sub)
	_, err = c.ListDir(ctx, "d/none", false)
	require.ErrorIs(t, err, topo.NoNode)
}
