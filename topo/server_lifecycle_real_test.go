package topo_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
)

// testCellRecordLifecycle: another Server (another process) moves, deletes
// and re-creates a cell's record while this Server has the cell's
// connection cached: each connection handed out is closed once its record
// moves or goes, ConnForCell then dials the record's new place, says NoNode
// while there is none, and dials the re-created record; ConnForCell calls
// racing Close return the cell's connection or Closed, and every
// connection handed out is closed once Close returned.
func testCellRecordLifecycle(t *testing.T, b partitionedGlobal) {
	ctx := t.Context()
	addr := b.start(t)
	ts := topo.NewServer(b.factory, b.open(t, addr, b.root("global")))
	t.Cleanup(ts.Close)
	other := topo.NewServer(b.factory, b.open(t, addr, b.root("global")))
	t.Cleanup(other.Close)
	requireClosed := func(c topo.Conn, why string) {
		t.Helper()
		require.Eventually(t, func() bool {
			_, _, err := c.Get(ctx, "d/f")
			return topo.IsErrType(err, topo.Closed)
		}, waitFor, tick, why)
	}

	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: addr, Root: b.root("zone1")}))
	c1, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	_, err = c1.Create(ctx, "d/f", []byte("one"))
	require.NoError(t, err)

	require.NoError(t, other.UpdateCellInfoFields(ctx, "zone1", func(ci *topodatapb.CellInfo) error {
		ci.Root = b.root("zone1-moved")
		return nil
	}))
	requireClosed(c1, "the connection of a moved record stayed open")
	c2, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	require.False(t, c2 == c1)
	_, _, err = c2.Get(ctx, "d/f")
	requireCodeT(t, err, topo.NoNode)

	require.NoError(t, other.DeleteCellInfo(ctx, "zone1"))
	requireClosed(c2, "the connection of a deleted record stayed open")
	_, err = ts.ConnForCell(ctx, "zone1")
	requireCodeT(t, err, topo.NoNode)

	require.NoError(t, other.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: addr, Root: b.root("zone1")}))
	c3, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	got, _, err := c3.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "one", string(got))

	var wg sync.WaitGroup
	var mu sync.Mutex
	var handed []topo.Conn
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			for range 20 {
				c, err := ts.ConnForCell(ctx, "zone1")
				if err != nil {
					requireCodeT(t, err, topo.Closed)
					return
				}
				mu.Lock()
				handed = append(handed, c)
				mu.Unlock()
			}
		})
	}
	close(start)
	require.Eventually(t, func() bool { // some calls through before Close
		mu.Lock()
		defer mu.Unlock()
		return len(handed) > 0
	}, waitFor, time.Microsecond)
	ts.Close()
	wg.Wait()
	for _, c := range handed {
		_, _, err := c.Get(ctx, "d/f")
		requireCodeT(t, err, topo.Closed)
	}
}

func TestCellRecordLifecycleEtcd(t *testing.T) {
	testCellRecordLifecycle(t, etcdGlobal("life/"))
}

func TestCellRecordLifecycleZooKeeper(t *testing.T) {
	testCellRecordLifecycle(t, zkGlobal("life/"))
}

func TestCellRecordLifecycleConsul(t *testing.T) {
	testCellRecordLifecycle(t, consulGlobal("life/"))
}

// TestUpdateCellInfoFieldsRefusesGlobalEtcd: the global cell has no
// CellInfo, so UpdateCellInfoFields refuses it as CreateCellInfo does
// (InvalidArgument, update never called, nothing written): a record there
// would be listed by GetCellInfoNames as a cell that ConnForCell never
// dials (it returns the global connection).
func TestUpdateCellInfoFieldsRefusesGlobalEtcd(t *testing.T) {
	ctx := t.Context()
	b := etcdGlobal("noglobal/")
	ts := topo.NewServer(b.factory, b.open(t, b.start(t), b.root("global")))
	t.Cleanup(ts.Close)
	err := ts.UpdateCellInfoFields(ctx, topo.GlobalCell, func(ci *topodatapb.CellInfo) error {
		t.Error("update called for the global cell")
		ci.Root = "/elsewhere"
		return nil
	})
	requireCodeT(t, err, topo.InvalidArgument)
	names, err := ts.GetCellInfoNames(ctx)
	require.NoError(t, err)
	require.Empty(t, names, "GetCellInfoNames after UpdateCellInfoFields(global)")
}
