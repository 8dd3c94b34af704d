package zk2topo

import (
	"context"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/claims"
)

// TestAheadFindsPredecessors: Ahead, from one children read in the
// server's order (not sorted), returns the two entries just ahead of each
// entry of a queue, oldest first, and none for its head; other children
// (a nested lock's directory) are not entries.
func TestAheadFindsPredecessors(t *testing.T) {
	ctx := context.Background()
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	_, err := c.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	q := claims.Queue{Path: "d"}
	parent := driver{c}.parent(q)
	_, err = raw.Create(parent, nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, err = raw.Create(parent+"/sub", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	var nodes []string
	for range 40 {
		n, err := raw.Create(parent+"/", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
		require.NoError(t, err)
		nodes = append(nodes, n)
	}
	for i, n := range nodes {
		ahead, in, err := driver{c}.Ahead(ctx, q, claims.Entry{Key: n}, 2)
		require.NoError(t, err)
		require.True(t, in)
		var want []claims.Entry
		for _, p := range nodes[max(0, i-2):i] {
			want = append(want, claims.Entry{Key: p})
		}
		require.Equal(t, len(want), len(ahead), "entry %d", i)
		for j := range want {
			require.Equal(t, want[j].Key, ahead[j].Key, "entry %d", i)
		}
	}
}
