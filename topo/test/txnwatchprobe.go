package test

import (
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testTxnConditionsInvisible: conditions write nothing a watcher sees: a
// WatchRecursive of the root and a Watch of a file on another Conn
// report a transaction's writes only, never an event for the paths of
// its IfAbsent, IfPresent and IfVersion conditions (ZooKeeper's IfAbsent
// is a create and delete of the path, or of its highest missing
// directory, in the multi).
func testTxnConditionsInvisible(s *store) {
	t, ctx, c, w := s.t, ctxFor(s.t), s.conn(), s.conn()
	v := mustCreate(t, ctx, c, "w/v", "v")
	mustCreate(t, ctx, c, "w/file", "f")
	_, rec := mustWatchRecursive(t, ctx, w, "", "WatchRecursive of the root")
	_, one := mustWatch(t, ctx, w, "w/v", "Watch(w/v)")
	for i := range 3 {
		_, err := c.Txn(ctx, topo.IfAbsent("w/p"), topo.IfAbsent("none/a/b"), topo.IfAbsent("w/file/below"),
			topo.IfPresent("w/v"), topo.IfVersion("w/v", v), topo.UpdateOp("w/q", []byte{byte('0' + i)}, nil))
		require.NoError(t, err)
	}
	waitRecursive(t, rec, "", "WatchRecursive after transactions of conditions", func(wd *topo.WatchDataRecursive) bool {
		require.Equalf(t, "w/q", wd.Path, "an event for %q (err %v) from a transaction's condition", wd.Path, wd.Err)
		require.NoError(t, wd.Err)
		return string(wd.Contents) == "2"
	})
	requireNothing(t, one, "Watch(w/v) of a file only conditions read")
	requireNothing(t, rec, "WatchRecursive after the last write")
}
