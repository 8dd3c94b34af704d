package zk2topo

import (
	"slices"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestListDirNamesMatchFull: a names-only ListDir (which checks each
// child's name against the reserved names) lists the same names as a full
// one (which checks each child's path), in every kind of directory: the
// ZooKeeper root (its "zookeeper" znode hidden), a cell root, a locked
// directory (its "locks" shown while held), "elections" with a candidate,
// and directories under "locks" and "elections" (internal: nothing).
func TestListDirNamesMatchFull(t *testing.T) {
	ctx := t.Context()
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "d/sub/g", []byte("x"))
	require.NoError(t, err)
	ld, err := c.Lock(ctx, "d", "held")
	require.NoError(t, err)
	defer func() { require.NoError(t, ld.Unlock(ctx)) }()
	p, err := c.NewLeaderParticipation("e1", "me")
	require.NoError(t, err)
	defer p.Stop()
	_, err = p.WaitForLeadership()
	require.NoError(t, err)

	whole := openConn(t, []string{testServer}, "")
	names := func(es []topo.DirEntry) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.Name
		}
		return out
	}
	for _, tc := range []struct {
		conn *Conn
		dir  string
		want []string // nil: only compare
	}{
		{whole, "", nil},
		{c, "", []string{"d", "elections"}},
		{c, "d", []string{"f", "locks", "sub"}},
		{c, "elections", []string{"e1"}},
		{c, "d/locks", nil},
		{c, "elections/e1", nil},
	} {
		plain, perr := tc.conn.ListDir(ctx, tc.dir, false)
		full, ferr := tc.conn.ListDir(ctx, tc.dir, true)
		require.Equal(t, topo.IsErrType(ferr, topo.NoNode), topo.IsErrType(perr, topo.NoNode), "dir %q: %v / %v", tc.dir, perr, ferr)
		if ferr != nil {
			require.ErrorIs(t, ferr, topo.NoNode, "dir %q", tc.dir)
			continue
		}
		require.NoError(t, perr)
		require.Equal(t, names(full), names(plain), "dir %q", tc.dir)
		require.True(t, slices.IsSorted(names(plain)), "dir %q", tc.dir)
		if tc.want != nil {
			require.Equal(t, tc.want, names(plain), "dir %q", tc.dir)
		}
		if tc.dir == "" && tc.conn == whole {
			require.NotContains(t, names(plain), "zookeeper")
		}
	}
}

// TestListDirOnlyHiddenChildrenIsNoNode: a directory whose only child is
// a "locks" znode with no lock held, and "elections" whose only election
// has no candidate, have no visible entry: both listings return NoNode,
// as for a missing directory.
func TestListDirOnlyHiddenChildrenIsNoNode(t *testing.T) {
	ctx := t.Context()
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	for _, zp := range []string{"", "/lk", "/lk/locks", "/elections", "/elections/idle"} {
		_, err := raw.Create(root+zp, nil, 0, zk.WorldACL(zk.PermAll)) // persistent: never reaped
		require.NoError(t, err)
	}
	for _, dir := range []string{"lk", "elections"} {
		for _, full := range []bool{false, true} {
			_, err := c.ListDir(ctx, dir, full)
			require.ErrorIsf(t, err, topo.NoNode, "ListDir(%q, full=%v)", dir, full)
		}
	}
}
