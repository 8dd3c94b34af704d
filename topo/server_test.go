package topo_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// waitFor bounds waits for things that must happen; it is not a timing
// assertion.
const (
	waitFor = 10 * time.Second
	tick    = 5 * time.Millisecond
)

func newServer(t *testing.T, cells ...string) (*topo.Server, *memorytopo.Factory) {
	t.Helper()
	ts, f := memorytopo.NewServerAndFactory(t.Context(), cells...)
	t.Cleanup(ts.Close)
	return ts, f
}

// rawConn opens a connection to the store's root, bypassing the Server.
func rawConn(t *testing.T, f *memorytopo.Factory) topo.Conn {
	t.Helper()
	c, err := f.Create("raw", "", "/")
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func requireCodeT(t *testing.T, err error, code topo.ErrorCode) {
	t.Helper()
	require.Truef(t, topo.IsErrType(err, code), "want %v, got %v", code, err)
}

func TestCellInfoCRUD(t *testing.T) {
	ctx := t.Context()
	ts, f := newServer(t, "zone2", "zone1")

	names, err := ts.GetCellInfoNames(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"zone1", "zone2"}, names)

	ci, err := ts.GetCellInfo(ctx, "zone1")
	require.NoError(t, err)
	require.Equal(t, "/zone1", ci.GetRoot())

	want := &topodatapb.CellInfo{ServerAddress: "somewhere:2181", Root: "/vitess/zone3"}
	require.NoError(t, ts.CreateCellInfo(ctx, "zone3", want))
	got, err := ts.GetCellInfo(ctx, "zone3")
	require.NoError(t, err)
	require.True(t, proto.Equal(want, got), "got %v", got)
	requireCodeT(t, ts.CreateCellInfo(ctx, "zone3", &topodatapb.CellInfo{}), topo.NodeExists)
	got, err = ts.GetCellInfo(ctx, "zone3")
	require.NoError(t, err)
	require.True(t, proto.Equal(want, got), "a refused CreateCellInfo changed the record")

	// The record lives at cells/<cell>/CellInfo in the global cell, as a
	// CellInfo protobuf (the Vitess layout).
	raw := rawConn(t, f)
	data, _, err := raw.Get(ctx, "global/cells/zone3/CellInfo")
	require.NoError(t, err)
	decoded := &topodatapb.CellInfo{}
	require.NoError(t, proto.Unmarshal(data, decoded))
	require.True(t, proto.Equal(want, decoded))
	require.Equal(t, "cells/zone3/CellInfo", topo.CellInfoPath("zone3"))

	names, err = ts.GetCellInfoNames(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"zone1", "zone2", "zone3"}, names)

	_, err = ts.GetCellInfo(ctx, "nowhere")
	requireCodeT(t, err, topo.NoNode)

	require.NoError(t, ts.DeleteCellInfo(ctx, "zone3"))
	requireCodeT(t, ts.DeleteCellInfo(ctx, "zone3"), topo.NoNode)
	_, err = ts.GetCellInfo(ctx, "zone3")
	requireCodeT(t, err, topo.NoNode)
	names, err = ts.GetCellInfoNames(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"zone1", "zone2"}, names)

	require.NoError(t, ts.DeleteCellInfo(ctx, "zone1"))
	require.NoError(t, ts.DeleteCellInfo(ctx, "zone2"))
	names, err = ts.GetCellInfoNames(ctx)
	require.NoError(t, err)
	require.NotNil(t, names)
	require.Empty(t, names, "no cells: an empty list and no error")
}

func TestCellInfoBadNames(t *testing.T) {
	ctx := t.Context()
	ts, _ := newServer(t)
	for _, cell := range []string{"", "a/b", "/a", "..", ".", "a\x00", "bad\n"} {
		err := ts.CreateCellInfo(ctx, cell, &topodatapb.CellInfo{})
		require.Truef(t, topo.IsErrType(err, topo.InvalidArgument) || topo.IsErrType(err, topo.InvalidPath),
			"CreateCellInfo(%q): got %v", cell, err)
		_, err = ts.GetCellInfo(ctx, cell)
		require.Errorf(t, err, "GetCellInfo(%q)", cell)
		_, err = ts.ConnForCell(ctx, cell)
		require.Errorf(t, err, "ConnForCell(%q)", cell)
		require.Errorf(t, ts.DeleteCellInfo(ctx, cell), "DeleteCellInfo(%q)", cell)
	}
	requireCodeT(t, ts.CreateCellInfo(ctx, topo.GlobalCell, &topodatapb.CellInfo{}), topo.InvalidArgument)
	names, err := ts.GetCellInfoNames(ctx)
	require.NoError(t, err)
	require.Empty(t, names)
}

func TestUpdateCellInfoFields(t *testing.T) {
	ctx := t.Context()
	ts, _ := newServer(t, "zone1")
	global := ts.GlobalCell()

	// Creates an absent record.
	require.NoError(t, ts.UpdateCellInfoFields(ctx, "zone2", func(ci *topodatapb.CellInfo) error {
		require.Empty(t, ci.GetRoot(), "an absent record starts empty")
		ci.Root = "/zone2"
		ci.ServerAddress = "addr2"
		return nil
	}))
	ci, err := ts.GetCellInfo(ctx, "zone2")
	require.NoError(t, err)
	require.Equal(t, "/zone2", ci.GetRoot())
	require.Equal(t, "addr2", ci.GetServerAddress())

	// Changes one field, keeps the others.
	require.NoError(t, ts.UpdateCellInfoFields(ctx, "zone2", func(ci *topodatapb.CellInfo) error {
		require.Equal(t, "/zone2", ci.GetRoot())
		ci.ServerAddress = "addr2b"
		return nil
	}))
	ci, err = ts.GetCellInfo(ctx, "zone2")
	require.NoError(t, err)
	require.Equal(t, "/zone2", ci.GetRoot())
	require.Equal(t, "addr2b", ci.GetServerAddress())

	// NoUpdateNeeded: nil, and nothing written.
	_, before, err := global.Get(ctx, topo.CellInfoPath("zone2"))
	require.NoError(t, err)
	require.NoError(t, ts.UpdateCellInfoFields(ctx, "zone2", func(ci *topodatapb.CellInfo) error {
		ci.Root = "/changed-but-not-written"
		return topo.NewError(topo.NoUpdateNeeded, "zone2")
	}))
	_, after, err := global.Get(ctx, topo.CellInfoPath("zone2"))
	require.NoError(t, err)
	require.Equal(t, before.String(), after.String(), "NoUpdateNeeded wrote the record")
	// Also as a wrapped sentinel, and for an absent record (nothing created).
	require.NoError(t, ts.UpdateCellInfoFields(ctx, "zone9", func(*topodatapb.CellInfo) error {
		return fmt.Errorf("nothing to do: %w", topo.NoUpdateNeeded)
	}))
	_, err = ts.GetCellInfo(ctx, "zone9")
	requireCodeT(t, err, topo.NoNode)

	// Any other error is returned as is, and nothing is written.
	boom := errors.New("boom")
	err = ts.UpdateCellInfoFields(ctx, "zone2", func(ci *topodatapb.CellInfo) error {
		ci.Root = "/nope"
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, after, err = global.Get(ctx, topo.CellInfoPath("zone2"))
	require.NoError(t, err)
	require.Equal(t, before.String(), after.String())
}

// TestUpdateCellInfoFieldsRetries makes the first compare-and-set fail by
// writing the record from inside the update function, and checks that the
// update is retried on the fresh record so neither write is lost.
func TestUpdateCellInfoFieldsRetries(t *testing.T) {
	ctx := t.Context()
	ts, _ := newServer(t, "zone1")

	calls := 0
	require.NoError(t, ts.UpdateCellInfoFields(ctx, "zone1", func(ci *topodatapb.CellInfo) error {
		calls++
		if calls == 1 {
			// A concurrent writer changes the record under us.
			require.NoError(t, ts.UpdateCellInfoFields(ctx, "zone1", func(ci *topodatapb.CellInfo) error {
				ci.ServerAddress = "concurrent"
				return nil
			}))
		}
		ci.Root = "/retried"
		return nil
	}))
	require.Equal(t, 2, calls, "the update function runs again after a lost compare-and-set")
	ci, err := ts.GetCellInfo(ctx, "zone1")
	require.NoError(t, err)
	require.Equal(t, "/retried", ci.GetRoot())
	require.Equal(t, "concurrent", ci.GetServerAddress(), "the concurrent write was lost")

	// Racing creators of an absent record: NodeExists is retried as well.
	calls = 0
	require.NoError(t, ts.UpdateCellInfoFields(ctx, "zone5", func(ci *topodatapb.CellInfo) error {
		calls++
		if calls == 1 {
			require.NoError(t, ts.CreateCellInfo(ctx, "zone5", &topodatapb.CellInfo{ServerAddress: "first"}))
		}
		ci.Root = "/zone5"
		return nil
	}))
	require.Equal(t, 2, calls)
	ci, err = ts.GetCellInfo(ctx, "zone5")
	require.NoError(t, err)
	require.Equal(t, "first", ci.GetServerAddress())
	require.Equal(t, "/zone5", ci.GetRoot())
}

func TestUpdateCellInfoFieldsConcurrent(t *testing.T) {
	ctx := t.Context()
	ts, _ := newServer(t, "zone1")
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- ts.UpdateCellInfoFields(ctx, "zone1", func(ci *topodatapb.CellInfo) error {
				ci.ServerAddress += fmt.Sprintf("[%d]", i)
				return nil
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	ci, err := ts.GetCellInfo(ctx, "zone1")
	require.NoError(t, err)
	for i := range n {
		require.Contains(t, ci.GetServerAddress(), fmt.Sprintf("[%d]", i), "an update was lost")
	}
	require.Equal(t, "/zone1", ci.GetRoot())
}

func TestConnForCell(t *testing.T) {
	ctx := t.Context()
	ts, f := newServer(t, "zone1", "zone2")

	g, err := ts.ConnForCell(ctx, topo.GlobalCell)
	require.NoError(t, err)
	require.True(t, g == ts.GlobalCell(), "ConnForCell(global) is the global connection")

	c1, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	again, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	require.True(t, c1 == again, "ConnForCell caches the connection")
	c2, err := ts.ConnForCell(ctx, "zone2")
	require.NoError(t, err)
	require.True(t, c1 != c2)

	// Each cell's connection is rooted at its CellInfo's root.
	_, err = c1.Create(ctx, "f", []byte("in zone1"))
	require.NoError(t, err)
	raw := rawConn(t, f)
	data, _, err := raw.Get(ctx, "zone1/f")
	require.NoError(t, err)
	require.Equal(t, "in zone1", string(data))
	_, _, err = c2.Get(ctx, "f")
	requireCodeT(t, err, topo.NoNode)

	_, err = ts.ConnForCell(ctx, "nowhere")
	requireCodeT(t, err, topo.NoNode)
	_, err = ts.ConnForCell(ctx, "")
	require.Error(t, err)
}

func TestConnForCellConcurrent(t *testing.T) {
	ctx := t.Context()
	ts, _ := newServer(t, "zone1")
	const n = 8
	conns := make([]topo.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { conns[i], errs[i] = ts.ConnForCell(ctx, "zone1") })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.True(t, conns[i] == conns[0], "concurrent ConnForCell calls returned different connections")
	}
	_, _, err := conns[0].Get(ctx, "anything")
	requireCodeT(t, err, topo.NoNode) // usable, not a closed loser of the race
}

// TestConnForCellRedial checks that the cache follows the CellInfo record:
// a change closes the cached connection and the next call dials the new
// address/root; a delete makes the cell unknown.
func TestConnForCellRedial(t *testing.T) {
	ctx := t.Context()
	ts, _ := newServer(t, "zone1")

	old, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	_, err = old.Create(ctx, "f", []byte("old root"))
	require.NoError(t, err)

	// Rewriting identical contents does not drop the cache.
	require.NoError(t, ts.UpdateCellInfoFields(ctx, "zone1", func(*topodatapb.CellInfo) error { return nil }))
	same, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	require.True(t, same == old || sameStore(ctx, t, same), "an unchanged record re-dialled to somewhere else")

	require.NoError(t, ts.UpdateCellInfoFields(ctx, "zone1", func(ci *topodatapb.CellInfo) error {
		ci.Root = "/zone1-moved"
		return nil
	}))
	var fresh topo.Conn
	require.Eventually(t, func() bool {
		c, err := ts.ConnForCell(ctx, "zone1")
		if err != nil || c == old {
			return false
		}
		fresh = c
		return true
	}, waitFor, tick, "ConnForCell kept the connection of a changed CellInfo")
	_, _, err = fresh.Get(ctx, "f")
	requireCodeT(t, err, topo.NoNode) // a different root
	require.Eventually(t, func() bool {
		_, _, err := old.Get(ctx, "f")
		return topo.IsErrType(err, topo.Closed)
	}, waitFor, tick, "the connection of a changed CellInfo is closed")

	// Deleting the record drops the cell.
	require.NoError(t, ts.DeleteCellInfo(ctx, "zone1"))
	require.Eventually(t, func() bool {
		_, err := ts.ConnForCell(ctx, "zone1")
		return topo.IsErrType(err, topo.NoNode)
	}, waitFor, tick, "ConnForCell still serves a deleted cell")
	require.Eventually(t, func() bool {
		_, _, err := fresh.Get(ctx, "f")
		return topo.IsErrType(err, topo.Closed)
	}, waitFor, tick, "the connection of a deleted cell is closed")
}

// sameStore reports whether c still sees the file written through the
// first connection (so it dials the same root).
func sameStore(ctx context.Context, t *testing.T, c topo.Conn) bool {
	data, _, err := c.Get(ctx, "f")
	return err == nil && strings.Contains(string(data), "old root")
}

func TestServerClose(t *testing.T) {
	ctx := t.Context()
	ts, _ := memorytopo.NewServerAndFactory(ctx, "zone1")
	c1, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	global := ts.GlobalCell()

	ts.Close()
	ts.Close() // idempotent

	_, err = ts.ConnForCell(ctx, "zone1")
	requireCodeT(t, err, topo.Closed)
	_, err = ts.ConnForCell(ctx, topo.GlobalCell)
	requireCodeT(t, err, topo.Closed)
	_, _, err = c1.Get(ctx, "x")
	requireCodeT(t, err, topo.Closed)
	_, _, err = global.Get(ctx, "x")
	requireCodeT(t, err, topo.Closed)
}

// TestConnForCellCloseRace closes the Server while ConnForCell calls are in
// flight: every call returns a usable connection or Closed, and nothing
// panics or races.
func TestConnForCellCloseRace(t *testing.T) {
	ctx := t.Context()
	ts, _ := memorytopo.NewServerAndFactory(ctx, "zone1", "zone2")
	var wg sync.WaitGroup
	var other atomic.Value
	for i := range 8 {
		wg.Go(func() {
			_, err := ts.ConnForCell(ctx, fmt.Sprintf("zone%d", i%2+1))
			if err != nil && !topo.IsErrType(err, topo.Closed) {
				other.Store(err)
			}
		})
	}
	ts.Close()
	wg.Wait()
	if err, ok := other.Load().(error); ok {
		require.NoError(t, err, "ConnForCell racing Close")
	}
}

// countingFactory dials cells through a memorytopo Factory, counting dials
// per cell, and fails for addresses starting with "fail".
type countingFactory struct {
	mem   *memorytopo.Factory
	mu    sync.Mutex
	dials map[string]int
}

func (f *countingFactory) Create(cell, addr, root string) (topo.Conn, error) {
	f.mu.Lock()
	f.dials[cell]++
	f.mu.Unlock()
	if strings.HasPrefix(addr, "fail") {
		return nil, topo.NewError(topo.Unavailable, addr)
	}
	return f.mem.Create(cell, addr, root)
}

func (f *countingFactory) count(cell string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dials[cell]
}

func TestConnForCellDialsOncePerRecord(t *testing.T) {
	ctx := t.Context()
	mem := memorytopo.NewFactory()
	global, err := mem.Create(topo.GlobalCell, "", "/global")
	require.NoError(t, err)
	f := &countingFactory{mem: mem, dials: map[string]int{}}
	ts := topo.NewServer(f, global)
	defer ts.Close()
	require.True(t, ts.GlobalCell() == global)

	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{Root: "/zone1"}))
	for range 5 {
		_, err := ts.ConnForCell(ctx, "zone1")
		require.NoError(t, err)
	}
	require.Equal(t, 1, f.count("zone1"), "ConnForCell dials a cell once while its record is unchanged")

	require.NoError(t, ts.UpdateCellInfoFields(ctx, "zone1", func(ci *topodatapb.CellInfo) error {
		ci.Root = "/zone1b"
		return nil
	}))
	require.Eventually(t, func() bool {
		_, err := ts.ConnForCell(ctx, "zone1")
		return err == nil && f.count("zone1") == 2
	}, waitFor, tick, "ConnForCell re-dials once after the record changed")
	for range 3 {
		_, err := ts.ConnForCell(ctx, "zone1")
		require.NoError(t, err)
	}
	require.Equal(t, 2, f.count("zone1"))

	// A factory error is returned and nothing is cached.
	require.NoError(t, ts.CreateCellInfo(ctx, "down", &topodatapb.CellInfo{ServerAddress: "fail:1", Root: "/down"}))
	for i := range 2 {
		_, err := ts.ConnForCell(ctx, "down")
		requireCodeT(t, err, topo.Unavailable)
		require.Equal(t, i+1, f.count("down"), "a failed dial is not cached")
	}
	// Fixing the record makes the cell usable.
	require.NoError(t, ts.UpdateCellInfoFields(ctx, "down", func(ci *topodatapb.CellInfo) error {
		ci.ServerAddress = ""
		return nil
	}))
	_, err = ts.ConnForCell(ctx, "down")
	require.NoError(t, err)
}

func TestConnForCellCorruptRecord(t *testing.T) {
	ctx := t.Context()
	ts, _ := newServer(t)
	_, err := ts.GlobalCell().Create(ctx, topo.CellInfoPath("bad"), []byte{0xff, 0xff, 0xff})
	require.NoError(t, err)
	_, err = ts.ConnForCell(ctx, "bad")
	requireCodeT(t, err, topo.InvalidArgument)
	_, err = ts.GetCellInfo(ctx, "bad")
	requireCodeT(t, err, topo.InvalidArgument)
	require.Contains(t, err.Error(), topo.CellInfoPath("bad"))
	err = ts.UpdateCellInfoFields(ctx, "bad", func(*topodatapb.CellInfo) error { return nil })
	requireCodeT(t, err, topo.InvalidArgument)
	names, err := ts.GetCellInfoNames(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"bad"}, names)
}

func TestDirEntryTypeString(t *testing.T) {
	require.Equal(t, "file", topo.TypeFile.String())
	require.Equal(t, "directory", topo.TypeDirectory.String())
}

// BenchmarkConnForCellCached measures the cached path of ConnForCell (no
// store call), from parallel goroutines.
func BenchmarkConnForCellCached(b *testing.B) {
	ctx := context.Background()
	ts, _ := memorytopo.NewServerAndFactory(ctx, "zone1")
	defer ts.Close()
	if _, err := ts.ConnForCell(ctx, "zone1"); err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := ts.ConnForCell(ctx, "zone1"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestCreateCellInfoIdempotent: creating a record identical to the stored
// one succeeds without a write (a retry after a Timeout whose write landed);
// a different one is NodeExists and leaves the record alone.
func TestCreateCellInfoIdempotent(t *testing.T) {
	ctx := t.Context()
	ts, f := newServer(t)
	raw := rawConn(t, f)
	want := &topodatapb.CellInfo{ServerAddress: "127.0.0.1:2379", Root: "/vitess/zone1"}
	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", want))
	_, v1, err := raw.Get(ctx, "global/"+topo.CellInfoPath("zone1"))
	require.NoError(t, err)

	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", proto.Clone(want).(*topodatapb.CellInfo)))
	_, v2, err := raw.Get(ctx, "global/"+topo.CellInfoPath("zone1"))
	require.NoError(t, err)
	require.Equal(t, v1, v2, "an identical CreateCellInfo wrote the record")

	for _, other := range []*topodatapb.CellInfo{
		{ServerAddress: "127.0.0.1:2379", Root: "/vitess/other"},
		{ServerAddress: "elsewhere:2379", Root: "/vitess/zone1"},
		{},
	} {
		requireCodeT(t, ts.CreateCellInfo(ctx, "zone1", other), topo.NodeExists)
	}
	got, err := ts.GetCellInfo(ctx, "zone1")
	require.NoError(t, err)
	require.True(t, proto.Equal(want, got))

	// A record that does not decode is never taken for an identical one.
	_, err = raw.Create(ctx, "global/"+topo.CellInfoPath("zone2"), []byte{0xff})
	require.NoError(t, err)
	requireCodeT(t, ts.CreateCellInfo(ctx, "zone2", &topodatapb.CellInfo{}), topo.NodeExists)
	requireCodeT(t, ts.CreateCellInfo(ctx, "zone3", nil), topo.InvalidArgument)
}
