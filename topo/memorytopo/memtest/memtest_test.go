package memtest_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/memorytopo/memtest"
)

// waitLimit bounds waits for things that must happen; it is not a timing
// assertion.
const waitLimit = 10 * time.Second

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

func requireCode(t *testing.T, err error, code topo.ErrorCode) {
	t.Helper()
	require.Error(t, err)
	require.Truef(t, topo.IsErrType(err, code), "want %v, got %v", code, err)
}

// opaque is a middleware whose Conns hide what they wrap (no Unwrap
// method), the hardest case for finding the *memorytopo.Conn behind them.
func opaque(_ topo.ConnInfo, next topo.Conn) topo.Conn { return opaqueConn{next} }

type opaqueConn struct{ topo.Conn }

// requireClosedSoon waits for ch to close.
func requireClosedSoon(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatal("channel not closed")
	}
}

// TestClientsHaveOwnSessions: each client holds its own session, and its
// controls reach the Conns behind a middleware that has no Unwrap.
func TestClientsHaveOwnSessions(t *testing.T) {
	ctx := testCtx(t)
	s := memtest.New(t, memtest.Options{Cells: []string{"zone1"}, Middleware: []topo.Middleware{opaque}})
	a, b := s.Client, s.NewClient()
	require.Same(t, s.Server, a.Server)
	require.IsType(t, opaqueConn{}, a.Global())

	_, err := a.Global().Create(ctx, "d/f", nil)
	require.NoError(t, err)
	la, err := a.Global().Lock(ctx, "d", "a")
	require.NoError(t, err)
	za, err := a.Server.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	_, err = za.Create(ctx, "e/f", nil)
	require.NoError(t, err)
	lz, err := za.Lock(ctx, "e", "a")
	require.NoError(t, err)

	// b sees a's lock and waits for it.
	_, err = b.Global().TryLock(ctx, "d", "b")
	requireCode(t, err, topo.NodeExists)
	got := make(chan topo.LockDescriptor, 1)
	go func() {
		lb, err := b.Global().Lock(ctx, "d", "b")
		if err == nil {
			got <- lb
		}
		close(got)
	}()

	// a's sessions end, on every cell it opened; b's do not.
	a.ExpireSession()
	requireClosedSoon(t, la.Done())
	requireClosedSoon(t, lz.Done())
	requireCode(t, la.Check(ctx), topo.LockLost)
	lb, ok := <-got
	require.True(t, ok, "b did not get the lock")
	require.NoError(t, lb.Check(ctx))
	require.Greater(t, lb.Token(), la.Token())

	// The Conns behind the clients are memorytopo's, one per cell.
	ga, ok := a.Conn(topo.GlobalCell)
	require.True(t, ok)
	gb, ok := b.Conn(topo.GlobalCell)
	require.True(t, ok)
	require.NotSame(t, ga, gb)
	_, ok = b.Conn("zone1")
	require.False(t, ok, "b has not opened zone1")
}

// TestPartitionReachesConnsOpenedLater: a partitioned client's calls
// block, also on a cell it opens while partitioned, until Heal.
func TestPartitionReachesConnsOpenedLater(t *testing.T) {
	ctx := testCtx(t)
	s := memtest.New(t, memtest.Options{Cells: []string{"zone1"}, Middleware: []topo.Middleware{opaque}})
	c := s.NewClient()
	c.Partition()
	// The Server reads the cell's record through its (partitioned) global
	// cell, so open the cell from an ended context first: it must time
	// out, not fail otherwise.
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	_, err := c.Server.ConnForCell(short, "zone1")
	cancel()
	requireCode(t, err, topo.Timeout)
	c.Heal()
	zone1, err := c.Server.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	c.Partition()
	short, cancel = context.WithTimeout(ctx, 10*time.Millisecond)
	_, err = zone1.Create(short, "f", nil)
	cancel()
	requireCode(t, err, topo.Timeout)
	_, _, err = s.Client.Global().Get(ctx, topo.CellInfoPath("zone1"))
	require.NoError(t, err, "other clients are not partitioned")
	c.Heal()
	_, err = zone1.Create(ctx, "f", nil)
	require.NoError(t, err)
}

// TestOptionsReachEveryClient: History, SessionTTL and the cells reach the
// first client, later clients and every cell; counters start at zero.
func TestOptionsReachEveryClient(t *testing.T) {
	ctx := testCtx(t)
	s := memtest.New(t, memtest.Options{Cells: []string{"zone1", "zone2", "zone1"}, History: 1, SessionTTL: 100 * time.Millisecond})
	require.Zero(t, s.Factory.CallCount(memorytopo.OpAny))
	for _, c := range []*memtest.Client{s.Client, s.NewClient()} {
		for _, cell := range []string{topo.GlobalCell, "zone1", "zone2"} {
			conn, err := c.Server.ConnForCell(ctx, cell)
			require.NoError(t, err)
			v, err := conn.Update(ctx, "f", []byte("1"), nil)
			require.NoError(t, err)
			_, err = conn.Update(ctx, "f", []byte("2"), nil)
			require.NoError(t, err)
			_, err = conn.GetVersion(ctx, "f", int64(v.(topo.NumericVersion)))
			requireCode(t, err, topo.Compacted)
		}
	}
	c := s.NewClient()
	_, err := c.Global().Create(ctx, "d/f", nil)
	require.NoError(t, err)
	lock, err := c.Global().Lock(ctx, "d", "c")
	require.NoError(t, err)
	c.PauseKeepAlive()
	requireClosedSoon(t, lock.Done()) // after SessionTTL
	requireCode(t, lock.Check(ctx), topo.LockLost)
}

// TestCleanupClosesClients: when the test ends every client is closed
// and the faults are removed.
func TestCleanupClosesClients(t *testing.T) {
	var s *memtest.Store
	var other *memtest.Client
	t.Run("inner", func(t *testing.T) {
		s = memtest.New(t, memtest.Options{})
		other = s.NewClient()
		s.Factory.SetError(topo.Unavailable)
	})
	ctx := testCtx(t)
	for _, c := range []*memtest.Client{s.Client, other} {
		_, _, err := c.Global().Get(ctx, "f")
		requireCode(t, err, topo.Closed)
	}
	conn, err := s.Factory.NewConn("", "/global")
	require.NoError(t, err)
	defer conn.Close()
	_, _, err = conn.Get(ctx, "f")
	requireCode(t, err, topo.NoNode)
}

// fatalTB records a Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestNewFailsOnBadCell: an invalid cell name fails the test, naming it.
func TestNewFailsOnBadCell(t *testing.T) {
	for _, cell := range []string{"", "a/b", topo.GlobalCell} {
		tb := &fatalTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			memtest.New(tb, memtest.Options{Cells: []string{"zone1", cell}})
		}()
		<-done
		require.Contains(t, tb.msg, fmt.Sprintf("cell %q", cell))
	}
}
