package memorytopo_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/middleware"
)

// noopMiddleware decorates a Conn with no hooks (it still wraps it).
func noopMiddleware() topo.Middleware {
	return middleware.Middleware(func(topo.ConnInfo) middleware.Hooks { return middleware.Hooks{} })
}

// opaque is a decorator without an Unwrap method.
type opaque struct{ topo.Conn }

// TestConnOfFindsConnBehindMiddleware: ConnOf reaches the *Conn behind a
// Server's decorated connections, whose session it then controls, and
// reports false where no Unwrap chain leads to one.
func TestConnOfFindsConnBehindMiddleware(t *testing.T) {
	ctx := testCtx(t)
	ts, f := memorytopo.NewServerAndFactoryWithOptions(ctx, memorytopo.Options{}, []string{"zone1"},
		topo.WithMiddleware(noopMiddleware(), noopMiddleware()))
	t.Cleanup(ts.Close)
	global := ts.GlobalCell()
	_, isConn := global.(*memorytopo.Conn)
	require.False(t, isConn, "the global cell is decorated")

	c, ok := memorytopo.ConnOf(global)
	require.True(t, ok)
	require.Same(t, f, c.Factory())
	_, err := global.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	lock, err := global.Lock(ctx, "d", "test")
	require.NoError(t, err)
	c.ExpireSession()
	<-lock.Done()
	requireCode(t, lock.Check(ctx), topo.LockLost)

	zone1, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	zc, ok := memorytopo.ConnOf(zone1)
	require.True(t, ok)
	require.NotSame(t, c, zc)

	_, ok = memorytopo.ConnOf(opaque{global})
	require.False(t, ok)
	_, ok = memorytopo.ConnOf(nil)
	require.False(t, ok)
}

// TestNewServerAndFactoryWithOptions: the Options reach the Server's
// Conns (History 1 keeps no earlier version) and its cells, and the
// Server's middlewares see the backend's name.
func TestNewServerAndFactoryWithOptions(t *testing.T) {
	ctx := testCtx(t)
	var seen []topo.ConnInfo
	record := func(info topo.ConnInfo, next topo.Conn) topo.Conn {
		seen = append(seen, info)
		return next
	}
	ts, _ := memorytopo.NewServerAndFactoryWithOptions(ctx, memorytopo.Options{History: 1}, []string{"zone1"}, topo.WithMiddleware(record))
	t.Cleanup(ts.Close)
	conn, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	v1, err := conn.Create(ctx, "f", []byte("1"))
	require.NoError(t, err)
	_, err = conn.Update(ctx, "f", []byte("2"), v1)
	require.NoError(t, err)
	_, err = conn.GetVersion(ctx, "f", int64(v1.(topo.NumericVersion)))
	requireCode(t, err, topo.Compacted)

	require.Len(t, seen, 2)
	for _, info := range seen {
		require.Equal(t, memorytopo.Name, info.Implementation)
	}
	require.Equal(t, "zone1", seen[1].Cell)
}
