package topo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/freeport"
	"github.com/topokit/topokit/internal/stacks"
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

// A dial that OpenServerContext abandoned when its context ended, and
// that then fails, is not closed: etcd2topo's factory returns a nil
// *etcd2topo.Conn as a topo.Conn with its error, and closing it panicked
// in the background, killing the program a moment after
// OpenServerContext had returned Timeout (a program following
// docs/embedding.md's "Opening with a deadline" on an etcd that was down).
func TestOpenServerContextDeadAddressEtcd(t *testing.T) {
	dead, err := freeport.Addrs(1)
	require.NoError(t, err)
	f := &returnedFactory{f: etcd2topo.Factory{}, returned: make(chan struct{})}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err = topo.OpenServerContext(ctx, etcd2topo.FactoryName, dead[0], "/dial/global", topo.WithFactory(f))
	requireCodeT(t, err, topo.Timeout)
	// The abandoned dial returns (its context ended), and the goroutine
	// that waited for it ends without closing what it returned.
	<-f.returned
	require.Eventually(t, func() bool {
		for _, s := range stacks.All() {
			if strings.Contains(s, "topo.createConn") {
				return false
			}
		}
		return true
	}, 30*time.Second, 10*time.Millisecond)
}

// returnedFactory is the ContextFactory f that closes returned once a
// dial has returned.
type returnedFactory struct {
	f        topo.ContextFactory
	returned chan struct{}
}

func (r *returnedFactory) Create(cell, addr, root string) (topo.Conn, error) {
	return r.CreateContext(context.Background(), cell, addr, root)
}

func (r *returnedFactory) CreateContext(ctx context.Context, cell, addr, root string) (topo.Conn, error) {
	defer close(r.returned)
	return r.f.CreateContext(ctx, cell, addr, root)
}
