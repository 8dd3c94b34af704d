package middleware_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/middleware"
)

// A Server decorates its global cell and every cell it opens, including
// cells opened after read-only mode was switched on.
func TestServerDecoratesEveryCell(t *testing.T) {
	ctx := ctxT(t)
	f := memorytopo.NewFactory()
	global, err := f.Create(topo.GlobalCell, "", "/global")
	require.NoError(t, err)
	var ro middleware.ReadOnly
	m, reg := registeredMetrics(t, middleware.MetricsOptions{})
	ts := topo.NewServer(f, global, topo.WithImplementationName("memory"), topo.WithMiddleware(m.Middleware(), ro.Middleware()))
	defer ts.Close()

	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{Root: "/zone1"}))
	require.NoError(t, ts.CreateCellInfo(ctx, "zone2", &topodatapb.CellInfo{Root: "/zone2"}))
	z1, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	_, err = z1.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)

	ro.Set(true)
	_, err = z1.Create(ctx, "g", []byte("x"))
	require.ErrorIs(t, err, topo.ReadOnly)
	z2, err := ts.ConnForCell(ctx, "zone2") // opened after the switch
	require.NoError(t, err)
	_, err = z2.Create(ctx, "g", []byte("x"))
	require.ErrorIs(t, err, topo.ReadOnly)
	_, err = ts.GlobalCell().Create(ctx, "g", []byte("x"))
	require.ErrorIs(t, err, topo.ReadOnly)
	require.ErrorIs(t, ts.CreateCellInfo(ctx, "zone3", &topodatapb.CellInfo{Root: "/zone3"}), topo.ReadOnly)
	_, _, err = z2.Get(ctx, "g")
	require.ErrorIs(t, err, topo.NoNode, "reads still work")
	ro.Set(false)

	// Metrics carry each cell's name and the backend's.
	require.Equal(t, 1.0, counter(t, reg, "topo_calls_total", map[string]string{"backend": "memory", "cell": "zone1", "op": "Create", "code": "OK"}))
	require.Equal(t, 1.0, counter(t, reg, "topo_calls_total", map[string]string{"backend": "memory", "cell": "zone2", "op": "Create", "code": "ReadOnly"}))
	// The global cell refused two: GlobalCell().Create and CreateCellInfo.
	require.Equal(t, 2.0, counter(t, reg, "topo_calls_total", map[string]string{"backend": "memory", "cell": "global", "op": "Create", "code": "ReadOnly"}))
}
