package topo_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/freeport"
	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// testConnForCellDeadAddress: a cell whose CellInfo names an address where
// nothing listens fails ConnForCell with Unavailable naming that address,
// within the configured factory's dial timeout (the factory's options
// apply to cells opened from CellInfo), and caches nothing: once the
// record names the real store, the next ConnForCell opens the cell.
func testConnForCellDeadAddress(t *testing.T, impl, addr string, f topo.Factory) {
	ctx := t.Context()
	ts, err := topo.OpenServerContext(ctx, impl, addr, "/dial/global", topo.WithFactory(f))
	require.NoError(t, err)
	defer ts.Close()
	dead, err := freeport.Addrs(1)
	require.NoError(t, err)
	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: dead[0], Root: "/dial/zone1"}))
	_, err = ts.ConnForCell(ctx, "zone1")
	requireCodeT(t, err, topo.Unavailable)
	require.Contains(t, err.Error(), dead[0], "the error names the cell's address")

	require.NoError(t, ts.UpdateCellInfoFields(ctx, "zone1", func(ci *topodatapb.CellInfo) error {
		ci.ServerAddress = addr
		return nil
	}))
	cell, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	_, err = cell.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)
}

func TestConnForCellDeadAddressEtcd(t *testing.T) {
	testConnForCellDeadAddress(t, etcd2topo.FactoryName, etcdtest.Start(t),
		etcd2topo.NewFactory(etcd2topo.Options{DialTimeout: time.Second}))
}

func TestConnForCellDeadAddressZooKeeper(t *testing.T) {
	testConnForCellDeadAddress(t, zk2topo.FactoryName, zktest.Start(t),
		zk2topo.NewFactory(zk2topo.Options{DialTimeout: time.Second}))
}
