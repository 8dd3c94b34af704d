package test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testLongPaths: paths of exactly topo.MaxPathLength bytes, one long
// segment or many short ones, work with every call.
func testLongPaths(s *store) {
	t, ctx, c, r := s.t, ctxFor(s.t), s.conn(), s.conn()
	one := strings.Repeat("a", topo.MaxPathLength)
	deep := strings.Repeat("abcdefg/", topo.MaxPathLength/8-1) + "tail" + strings.Repeat("x", 4)
	require.Len(t, deep, topo.MaxPathLength)
	dirOfLong := strings.Repeat("d", topo.MaxPathLength-2)
	for _, p := range []string{one, deep, dirOfLong + "/f"} {
		t.Run(fmt.Sprintf("%d-segments", strings.Count(p, "/")+1), func(t *testing.T) {
			probeLongPath(t, ctx, c, r, p)
		})
	}
}

func probeLongPath(t *testing.T, ctx context.Context, c, r topo.Conn, p string) {
	require.Len(t, p, topo.MaxPathLength)
	_, ch, err := r.WatchRecursive(ctx, p[:len(p)-1])
	require.NoError(t, err, "WatchRecursive")
	v, err := c.Create(ctx, p, []byte("1"))
	require.NoError(t, err, "Create")
	requireFile(t, ctx, r, p, "1", v)
	waitRecursive(t, ch, p[:len(p)-1], "WatchRecursive", func(wd *topo.WatchDataRecursive) bool { return wd.Path == p })
	kvs, err := r.List(ctx, p)
	require.NoError(t, err, "List")
	require.Equal(t, []string{p}, kvPaths(kvs))
	if i := strings.LastIndex(p, "/"); i > 0 {
		e, err := r.ListDir(ctx, p[:i], true)
		require.NoError(t, err, "ListDir")
		requireSortedNames(t, e, []string{p[i+1:]}, "ListDir")
		l, err := c.Lock(ctx, p[:i], "long")
		require.NoError(t, err, "Lock of the long path's directory")
		vs, err := c.Txn(ctx, topo.IfHeld(l), topo.IfVersion(p, v), topo.UpdateOp(p, []byte("2"), v))
		require.NoError(t, err, "Txn")
		v = vs[2]
		require.NoError(t, l.Unlock(ctx))
	} else {
		vs, err := c.Txn(ctx, topo.IfVersion(p, v), topo.UpdateOp(p, []byte("2"), v))
		require.NoError(t, err, "Txn")
		v = vs[1]
	}
	_, wch, err := r.Watch(ctx, p)
	require.NoError(t, err, "Watch")
	v, err = c.Update(ctx, p, []byte("3"), v)
	require.NoError(t, err, "Update")
	waitWatchValue(t, wch, "3", "Watch")
	ln, err := c.LockName(ctx, p, "long")
	require.NoError(t, err, "LockName")
	require.NoError(t, ln.Unlock(ctx))
	pp, err := c.NewLeaderParticipation(p, "id")
	require.NoError(t, err)
	_, err = pp.WaitForLeadership()
	require.NoError(t, err, "WaitForLeadership of a long election name")
	id, err := r.NewLeaderParticipation(p, "other")
	require.NoError(t, err)
	lid, err := id.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "id", lid)
	pp.Stop()
	require.NoError(t, c.Delete(ctx, p, v), "Delete")
	requireNoFile(t, ctx, r, p)
	kvs, err = r.List(ctx, "")
	if !topo.IsErrType(err, topo.NoNode) {
		require.NoError(t, err)
	}
	require.Empty(t, kvPaths(kvs))
}
