package zk2topo

import (
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestGetForeignReservedFile: Get returns the persistent znodes another
// tool wrote at reserved paths (the files List reports as reserved), with
// their data and Stat.Version, as etcd's and Consul's Get do, while the
// znodes of the lock and election layout (a locks znode, a lock entry, an
// election directory, a candidate, the values znode, a value) stay NoNode.
func TestGetForeignReservedFile(t *testing.T) {
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	ctx := t.Context()
	raw := rawConn(t)
	acl := zk.WorldACL(zk.PermAll)
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	_, err = raw.Create(root+"/r", nil, 0, acl)
	require.NoError(t, err)
	_, err = raw.Create(root+"/r/locks", nil, 0, acl)
	require.NoError(t, err)
	_, err = raw.Create(root+"/r/locks/foreign", []byte("data"), 0, acl)
	require.NoError(t, err)
	_, err = raw.Set(root+"/r/locks/foreign", []byte("data2"), 0)
	require.NoError(t, err)
	_, err = raw.Create(root+"/r/locks/empty", nil, 0, acl)
	require.NoError(t, err)
	_, err = raw.Create(root+"/elections", nil, 0, acl)
	require.NoError(t, err)
	_, err = raw.Create(root+"/elections/cfg", []byte("foreign"), 0, acl)
	require.NoError(t, err)

	got, v, err := c.Get(ctx, "r/locks/foreign")
	require.NoError(t, err)
	require.Equal(t, "data2", string(got))
	require.Equal(t, topo.NumericVersion(1), v)
	got, v, err = c.Get(ctx, "r/locks/empty")
	require.NoError(t, err, "an empty leaf below a locks znode is a file List reports")
	require.Equal(t, []byte{}, got)
	require.Equal(t, topo.NumericVersion(0), v)
	got, _, err = c.Get(ctx, "elections/cfg")
	require.NoError(t, err)
	require.Equal(t, "foreign", string(got))

	// The layout's own znodes are never files.
	l, err := c.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Unlock(ctx)) }()
	entries, _, err := raw.Children(root + "/d/locks")
	require.NoError(t, err)
	require.Len(t, entries, 1)
	p, err := c.NewLeaderParticipation("e", "id1")
	require.NoError(t, err)
	_, err = p.Campaign(ctx, []byte("value"))
	require.NoError(t, err)
	cands, _, err := raw.Children(root + "/elections/e")
	require.NoError(t, err)
	vals, _, err := raw.Children(root + "/elections/e/" + valuesDir)
	require.NoError(t, err)
	require.Len(t, vals, 1)
	internal := []string{"d/locks", "d/locks/" + entries[0], "elections", "elections/e", "elections/e/" + valuesDir, "elections/e/" + valuesDir + "/" + vals[0]}
	for _, n := range entryNames(cands) {
		internal = append(internal, "elections/e/"+n)
	}
	require.Len(t, internal, 7)
	for _, ip := range internal {
		_, _, err := c.Get(ctx, ip)
		require.Truef(t, topo.IsErrType(err, topo.NoNode), "Get(%q) of the layout's znode: %v", ip, err)
	}
	p.Stop()
	// An idle election directory (persistent, empty) and an empty locks
	// znode left by another client are not files either.
	_, err = raw.Create(root+"/d2", nil, 0, acl)
	require.NoError(t, err)
	_, err = raw.Create(root+"/d2/locks", nil, 0, acl)
	require.NoError(t, err)
	for _, ip := range []string{"elections/e", "d2/locks"} {
		_, _, err := c.Get(ctx, ip)
		require.Truef(t, topo.IsErrType(err, topo.NoNode), "Get(%q) of an empty layout znode: %v", ip, err)
	}
}
