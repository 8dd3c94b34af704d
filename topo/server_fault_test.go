package topo_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// connForCellWithin calls ConnForCell with a 200 ms deadline and returns
// its result, failing the test if the call has not returned within waitFor
// (a generous bound, not a timing assertion).
func connForCellWithin(t *testing.T, ts *topo.Server, cell string) (topo.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	type result struct {
		conn topo.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		c, err := ts.ConnForCell(ctx, cell)
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.conn, r.err
	case <-time.After(waitFor):
		require.FailNow(t, "ConnForCell did not honour its 200 ms deadline")
		return nil, nil
	}
}

// TestConnForCellHonoursContextOnHungGlobal hangs the store: ConnForCell of
// a cell not yet dialled returns Timeout once its deadline passes, and a
// cell already dialled is still served from the cache.
func TestConnForCellHonoursContextOnHungGlobal(t *testing.T) {
	ctx := t.Context()
	ts, f := newServer(t, "zone1", "zone2")
	cached, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)

	f.Hang()
	defer f.Unhang()
	_, err = connForCellWithin(t, ts, "zone2")
	requireCodeT(t, err, topo.Timeout)

	c, err := connForCellWithin(t, ts, "zone1")
	require.NoError(t, err, "a cached cell needs no store call")
	require.True(t, c == cached)

	// A cancelled context is Interrupted, even for a cached cell.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = ts.ConnForCell(cctx, "zone1")
	requireCodeT(t, err, topo.Interrupted)
}

// TestConnForCellHonoursContextOnSlowDial makes the factory's dial block:
// ConnForCell returns Timeout at its deadline, and the dial, once it
// completes, is not leaked (its Conn is closed or cached, never lost).
func TestConnForCellHonoursContextOnSlowDial(t *testing.T) {
	ctx := t.Context()
	mem := memorytopo.NewFactory()
	global, err := mem.Create(topo.GlobalCell, "", "/global")
	require.NoError(t, err)
	release := make(chan struct{})
	dials := make(chan topo.Conn, 4)
	f := topo.FactoryFunc(func(cell, addr, root string) (topo.Conn, error) {
		<-release
		c, err := mem.Create(cell, addr, root)
		if err == nil {
			dials <- c
		}
		return c, err
	})
	ts := topo.NewServer(f, global)
	defer ts.Close()
	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{Root: "/zone1"}))

	_, err = connForCellWithin(t, ts, "zone1")
	requireCodeT(t, err, topo.Timeout)
	close(release)
	abandoned := <-dials
	// The abandoned dial's Conn is either closed or the one now served.
	c, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	if c != abandoned {
		require.Eventually(t, func() bool {
			_, _, err := abandoned.Get(ctx, "x")
			return topo.IsErrType(err, topo.Closed)
		}, waitFor, tick, "an abandoned dial leaked its Conn")
	}
}

// breakWatches ends the store's watches with err, waiting until at least
// one (the Server's CellInfo watch, which starts in the background) was
// there to end.
func breakWatches(t *testing.T, f *memorytopo.Factory, err error) {
	t.Helper()
	require.Eventually(t, func() bool { return f.BreakWatches(err) >= 1 }, waitFor, tick, "no watch to break")
}

// holdLock creates d/f in c and locks d through c.
func holdLock(t *testing.T, c topo.Conn) topo.LockDescriptor {
	t.Helper()
	ctx := t.Context()
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	lock, err := c.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	return lock
}

// requireConnHealthy checks that c was not closed and its lock still holds.
func requireConnHealthy(t *testing.T, c topo.Conn, lock topo.LockDescriptor) {
	t.Helper()
	ctx := t.Context()
	require.NoError(t, lock.Check(ctx), "the cell's lock was lost")
	data, _, err := c.Get(ctx, "d/f")
	require.NoError(t, err, "the cell connection was closed")
	require.Equal(t, "x", string(data))
}

// rewriteCellInfo writes cell's record directly in the global cell,
// bypassing the Server, so that only its watch can notice.
func rewriteCellInfo(t *testing.T, global topo.Conn, cell string, ci *topodatapb.CellInfo) {
	t.Helper()
	data, err := proto.Marshal(ci)
	require.NoError(t, err)
	_, err = global.Update(t.Context(), topo.CellInfoPath(cell), data, nil)
	require.NoError(t, err)
}

// TestConnForCellSurvivesBrokenWatch breaks the global CellInfo watch
// (a transient store-side failure) repeatedly: the cached cell connection
// is neither closed nor replaced, a lock held through it stays held, the
// watch is re-established, and a later change of the record still re-dials.
func TestConnForCellSurvivesBrokenWatch(t *testing.T) {
	ctx := t.Context()
	ts, f := newServer(t, "zone1")
	c1, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	lock := holdLock(t, c1)

	for range 3 {
		before := f.CallCount(memorytopo.OpWatch)
		breakWatches(t, f, topo.Unavailable)
		require.Eventually(t, func() bool { return f.CallCount(memorytopo.OpWatch) > before },
			waitFor, tick, "the CellInfo watch was not re-established")
		requireConnHealthy(t, c1, lock)
		c, err := ts.ConnForCell(ctx, "zone1")
		require.NoError(t, err)
		require.True(t, c == c1, "a broken watch re-dialled an unchanged cell")
	}

	// The record changes behind the Server's back: the re-established
	// watch sees it, and the cell is re-dialled at the new root.
	rewriteCellInfo(t, ts.GlobalCell(), "zone1", &topodatapb.CellInfo{Root: "/zone1-moved"})
	require.Eventually(t, func() bool {
		c, err := ts.ConnForCell(ctx, "zone1")
		return err == nil && c != c1
	}, waitFor, tick, "a changed record was not re-dialled after the watch broke")
	c2, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	_, _, err = c2.Get(ctx, "d/f")
	requireCodeT(t, err, topo.NoNode)
	require.Eventually(t, func() bool {
		_, _, err := c1.Get(ctx, "d/f")
		return topo.IsErrType(err, topo.Closed)
	}, waitFor, tick, "the connection of a changed record is closed")
}

// TestConnForCellSurvivesFailingRewatch keeps the re-watch failing with a
// transient error for a while: the cell connection stays cached and
// healthy throughout, and the watch resumes once the store answers.
func TestConnForCellSurvivesFailingRewatch(t *testing.T) {
	ctx := t.Context()
	ts, f := newServer(t, "zone1")
	c1, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	lock := holdLock(t, c1)

	const failures = 4
	before := f.CallCount(memorytopo.OpWatch)
	f.AddFault(memorytopo.Fault{Op: memorytopo.OpWatch, Err: topo.Unavailable, Times: failures})
	breakWatches(t, f, topo.Unavailable)
	require.Eventually(t, func() bool { return f.CallCount(memorytopo.OpWatch) > before+failures },
		waitFor, tick, "the re-watch was not retried after transient failures")
	requireConnHealthy(t, c1, lock)
	c, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	require.True(t, c == c1)

	rewriteCellInfo(t, ts.GlobalCell(), "zone1", &topodatapb.CellInfo{Root: "/zone1-moved"})
	require.Eventually(t, func() bool {
		c, err := ts.ConnForCell(ctx, "zone1")
		return err == nil && c != c1
	}, waitFor, tick, "a changed record was not re-dialled")
}

// TestConnForCellWatchPermissionDenied ends the CellInfo watch with
// PermissionDenied: the Server stops re-watching (the error is permanent)
// without closing the healthy cell connection, and from then on each
// ConnForCell opens the watch itself under its own context, returning the
// store's error instead of a connection it cannot vouch for. Once the
// permission is back, the record is followed again.
func TestConnForCellWatchPermissionDenied(t *testing.T) {
	ctx := t.Context()
	ts, f := newServer(t, "zone1")
	c1, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	lock := holdLock(t, c1)

	breakWatches(t, f, topo.PermissionDenied)
	// Later watches are denied too.
	removeWatch := f.AddFault(memorytopo.Fault{Op: memorytopo.OpWatch, Err: topo.PermissionDenied})
	before := f.CallCount(memorytopo.OpWatch)
	require.Eventually(t, func() bool {
		_, err := ts.ConnForCell(ctx, "zone1")
		return topo.IsErrType(err, topo.PermissionDenied)
	}, waitFor, tick, "ConnForCell kept trusting a record it can no longer watch")
	requireConnHealthy(t, c1, lock)
	// Each call tries once; nothing retries in the background.
	n := f.CallCount(memorytopo.OpWatch)
	require.Greater(t, n, before)
	_, err = ts.ConnForCell(ctx, "zone1")
	requireCodeT(t, err, topo.PermissionDenied)
	require.Equal(t, n+1, f.CallCount(memorytopo.OpWatch))
	requireConnHealthy(t, c1, lock)

	// With the permission back, the next call watches the record again
	// and is served from the cache after that.
	removeWatch()
	c, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	require.True(t, c == c1)
	n = f.CallCount(memorytopo.OpWatch)
	c, err = ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	require.True(t, c == c1)
	require.Equal(t, n, f.CallCount(memorytopo.OpWatch), "a followed cell made a store call")
	rewriteCellInfo(t, ts.GlobalCell(), "zone1", &topodatapb.CellInfo{Root: "/zone1-moved"})
	require.Eventually(t, func() bool {
		c, err := ts.ConnForCell(ctx, "zone1")
		return err == nil && c != c1
	}, waitFor, tick, "the record is not followed again")
}

// TestConnForCellDeletedWhileUnwatched deletes the record while the
// Server does not watch it (the watch was denied): the next ConnForCell
// returns NoNode and closes the stale connection.
func TestConnForCellDeletedWhileUnwatched(t *testing.T) {
	ctx := t.Context()
	ts, f := newServer(t, "zone1")
	c1, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	breakWatches(t, f, topo.PermissionDenied)
	require.NoError(t, ts.GlobalCell().Delete(ctx, topo.CellInfoPath("zone1"), nil))
	require.Eventually(t, func() bool {
		_, err := ts.ConnForCell(ctx, "zone1")
		return topo.IsErrType(err, topo.NoNode)
	}, waitFor, tick)
	_, _, err = c1.Get(ctx, "x")
	requireCodeT(t, err, topo.Closed)
}

// TestUpdateCellInfoFieldsPermissionDenied: a refused write or read ends
// UpdateCellInfoFields at once with PermissionDenied, after one attempt.
func TestUpdateCellInfoFieldsPermissionDenied(t *testing.T) {
	ctx := t.Context()
	ts, f := newServer(t, "zone1")
	set := func(ci *topodatapb.CellInfo) error { ci.ServerAddress = "new"; return nil }

	for _, op := range []memorytopo.Operation{memorytopo.OpUpdate, memorytopo.OpGet} {
		remove := f.AddFault(memorytopo.Fault{Op: op, Err: topo.PermissionDenied})
		f.ResetCallCounts()
		requireCodeT(t, ts.UpdateCellInfoFields(ctx, "zone1", set), topo.PermissionDenied)
		require.EqualValues(t, 1, f.CallCount(op), "%v was retried after PermissionDenied", op)
		remove()
	}
	// Creating an absent record.
	remove := f.AddFault(memorytopo.Fault{Op: memorytopo.OpCreate, Err: topo.PermissionDenied})
	f.ResetCallCounts()
	requireCodeT(t, ts.UpdateCellInfoFields(ctx, "zone2", set), topo.PermissionDenied)
	require.EqualValues(t, 1, f.CallCount(memorytopo.OpCreate))
	remove()

	ci, err := ts.GetCellInfo(ctx, "zone1")
	require.NoError(t, err)
	require.Empty(t, ci.GetServerAddress(), "a refused update wrote the record")
}

// TestUpdateCellInfoFieldsDoesNotSpin makes every compare-and-set fail
// (a store that reports refusals as lost races): UpdateCellInfoFields
// backs off between attempts and returns Timeout at its deadline, instead
// of spinning. The bound on attempts is loose: a spinning loop makes
// thousands in the same time, and a slower machine makes fewer, not more.
func TestUpdateCellInfoFieldsDoesNotSpin(t *testing.T) {
	ts, f := newServer(t, "zone1")
	f.AddFault(memorytopo.Fault{Op: memorytopo.OpUpdate, Err: topo.BadVersion})
	f.ResetCallCounts()
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	err := ts.UpdateCellInfoFields(ctx, "zone1", func(ci *topodatapb.CellInfo) error {
		ci.ServerAddress = "new"
		return nil
	})
	requireCodeT(t, err, topo.Timeout)
	require.Less(t, f.CallCount(memorytopo.OpUpdate), int64(50), "UpdateCellInfoFields spins on compare-and-set failures")
}

// TestIsPermanent pins which codes every retry loop gives up on.
func TestIsPermanent(t *testing.T) {
	for _, c := range []topo.ErrorCode{topo.PermissionDenied, topo.InvalidPath, topo.InvalidArgument, topo.NoImplementation, topo.Closed} {
		require.True(t, topo.IsPermanent(topo.NewError(c, "p")), "%v", c)
		require.True(t, topo.IsPermanent(c), "%v", c)
	}
	for _, c := range []topo.ErrorCode{topo.Unavailable, topo.Timeout, topo.Interrupted, topo.ResourceExhausted,
		topo.Compacted, topo.LockLost, topo.NodeExists, topo.NoNode, topo.BadVersion, topo.NodeNotEmpty, topo.PartialResult} {
		require.False(t, topo.IsPermanent(topo.NewError(c, "p")), "%v", c)
	}
	require.False(t, topo.IsPermanent(nil))
	require.False(t, topo.IsPermanent(context.Canceled))
}

// TestConnForCellChurn races ConnForCell callers against record changes,
// broken watches and DeleteCellInfo/CreateCellInfo: every connection handed
// out is either the one finally cached or closed (none leaks), and once the
// churn stops ConnForCell serves the final record's root.
func TestConnForCellChurn(t *testing.T) {
	ctx := t.Context()
	ts, f := newServer(t, "zone1")
	raw := rawConn(t, f)
	const rounds = 30
	for i := range rounds + 1 {
		_, err := raw.Create(ctx, fmt.Sprintf("root%d/marker", i), []byte(strconv.Itoa(i)))
		require.NoError(t, err)
	}

	var mu sync.Mutex
	seen := map[topo.Conn]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := ts.ConnForCell(ctx, "zone1")
				if err != nil {
					require.Truef(t, topo.IsErrType(err, topo.NoNode), "ConnForCell: %v", err)
					continue
				}
				mu.Lock()
				seen[c] = true
				mu.Unlock()
			}
		})
	}
	for i := range rounds {
		switch i % 3 {
		case 0:
			require.NoError(t, ts.UpdateCellInfoFields(ctx, "zone1", func(ci *topodatapb.CellInfo) error {
				ci.Root = fmt.Sprintf("/root%d", i)
				return nil
			}))
		case 1:
			rewriteCellInfo(t, ts.GlobalCell(), "zone1", &topodatapb.CellInfo{Root: fmt.Sprintf("/root%d", i)})
			f.BreakWatches(topo.Unavailable)
		case 2:
			require.NoError(t, ts.DeleteCellInfo(ctx, "zone1"))
			require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{Root: fmt.Sprintf("/root%d", i)}))
		}
	}
	rewriteCellInfo(t, ts.GlobalCell(), "zone1", &topodatapb.CellInfo{Root: fmt.Sprintf("/root%d", rounds)})
	close(stop)
	wg.Wait()

	var final topo.Conn
	require.Eventually(t, func() bool {
		c, err := ts.ConnForCell(ctx, "zone1")
		if err != nil {
			return false
		}
		data, _, err := c.Get(ctx, "marker")
		if err != nil || string(data) != strconv.Itoa(rounds) {
			return false
		}
		final = c
		return true
	}, waitFor, tick, "ConnForCell does not serve the final record")
	for c := range seen {
		if c == final {
			continue
		}
		require.Eventually(t, func() bool {
			_, _, err := c.Get(ctx, "marker")
			return topo.IsErrType(err, topo.Closed)
		}, waitFor, tick, "a superseded cell connection was never closed")
	}
}

// TestCellInfoWritesRetireCachedConn: when UpdateCellInfoFields changes a
// cell's address or root, or DeleteCellInfo deletes its record, the cached
// connection is closed before the call returns, so the caller's next
// ConnForCell already sees the new record.
func TestCellInfoWritesRetireCachedConn(t *testing.T) {
	ctx := t.Context()
	ts, _ := newServer(t, "zone1")
	c1, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)

	// Unchanged dial parameters keep the connection.
	require.NoError(t, ts.UpdateCellInfoFields(ctx, "zone1", func(*topodatapb.CellInfo) error { return nil }))
	c, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	require.True(t, c == c1)

	require.NoError(t, ts.UpdateCellInfoFields(ctx, "zone1", func(ci *topodatapb.CellInfo) error {
		ci.Root = "/zone1-moved"
		return nil
	}))
	_, _, err = c1.Get(ctx, "x")
	requireCodeT(t, err, topo.Closed)
	c2, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	require.True(t, c2 != c1)

	require.NoError(t, ts.DeleteCellInfo(ctx, "zone1"))
	_, _, err = c2.Get(ctx, "x")
	requireCodeT(t, err, topo.Closed)
	_, err = ts.ConnForCell(ctx, "zone1")
	requireCodeT(t, err, topo.NoNode)
}
