package topo_test

import (
	"context"
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

// heldDialFactory holds each Create until release is closed, after
// sending on entered.
type heldDialFactory struct {
	topo.Factory
	entered chan struct{}
	release chan struct{}
}

func (f heldDialFactory) Create(cell, addr, root string) (topo.Conn, error) {
	f.entered <- struct{}{}
	<-f.release
	return f.Factory.Create(cell, addr, root)
}

// heldWatchConn holds back the changes of its Watches while held is open.
type heldWatchConn struct {
	topo.Conn
	held chan struct{} // closed to let the changes through
}

func (c heldWatchConn) Watch(ctx context.Context, p string) (*topo.WatchData, <-chan *topo.WatchData, error) {
	cur, in, err := c.Conn.Watch(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	out := make(chan *topo.WatchData)
	go func() {
		defer close(out)
		<-c.held
		for wd := range in {
			out <- wd
		}
	}()
	return cur, out, nil
}

// TestUpdateCellInfoFieldsBeatsADialInFlightEtcd: a ConnForCell dials the
// cell's record while UpdateCellInfoFields of this Server moves it; once
// UpdateCellInfoFields returned, ConnForCell hands out connections to the
// new place only, as it promises, not the dial of the old record that
// completes afterwards (its watch's change event held back, so the Server
// cannot learn it that way first).
func TestUpdateCellInfoFieldsBeatsADialInFlightEtcd(t *testing.T) {
	ctx := t.Context()
	b := etcdGlobal("dialrace/")
	addr := b.start(t)
	f := heldDialFactory{Factory: b.factory, entered: make(chan struct{}, 4), release: make(chan struct{})}
	global := heldWatchConn{Conn: b.open(t, addr, b.root("global")), held: make(chan struct{})}
	ts := topo.NewServer(f, global)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(global.held) })
	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: addr, Root: b.root("old")}))
	raw := b.open(t, addr, b.root("new"))
	_, err := raw.Create(ctx, "where", []byte("new"))
	require.NoError(t, err)

	type result struct {
		conn topo.Conn
		err  error
	}
	first := make(chan result, 1)
	go func() {
		c, err := ts.ConnForCell(ctx, "zone1")
		first <- result{c, err}
	}()
	<-f.entered // the dial of the old record is in flight
	require.NoError(t, ts.UpdateCellInfoFields(ctx, "zone1", func(ci *topodatapb.CellInfo) error {
		ci.Root = b.root("new")
		return nil
	}))
	close(f.release)
	r := <-first
	require.NoError(t, r.err)
	c, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	got, _, err := c.Get(ctx, "where")
	require.NoErrorf(t, err, "ConnForCell after UpdateCellInfoFields moved the cell returned a connection to the old root")
	require.Equal(t, "new", string(got))
}
