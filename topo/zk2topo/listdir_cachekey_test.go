package zk2topo

import (
	"fmt"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"
)

// TestListDirCacheKeyedByParentStat: a names-only ListDir of a large
// directory stores its sorted names under the directory's child state as
// the same Children reply gave it (Czxid, Cversion, NumChildren), so an
// unchanged directory is a hit and one child more is a miss.
func TestListDirCacheKeyedByParentStat(t *testing.T) {
	ctx := t.Context()
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := openRaw(t)
	_, err := c.Create(ctx, "d/f000", nil)
	require.NoError(t, err)
	zp := root + "/d"
	for i := 1; i < listCacheMin; i++ {
		_, err := raw.Create(fmt.Sprintf("%s/f%03d", zp, i), nil, 0, zk.WorldACL(zk.PermAll))
		require.NoError(t, err)
	}
	_, err = c.ListDir(ctx, "d", false)
	require.NoError(t, err)
	_, st, err := raw.Exists(zp)
	require.NoError(t, err)
	require.Len(t, c.listCache.get(zp, st), listCacheMin, "the listing was not cached under the directory's Stat")
	_, err = raw.Create(zp+"/g", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, st2, err := raw.Exists(zp)
	require.NoError(t, err)
	require.Nil(t, c.listCache.get(zp, st2), "a changed directory must miss")
}
