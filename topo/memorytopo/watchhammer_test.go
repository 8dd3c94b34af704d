package memorytopo_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// The hammer tests below run writers of one file through every path that
// tells its Watches about a change (Update in place under the store's
// lock for reading and the file's node lock, from two Conns with
// different roots; Txn, Create and Delete under the lock for writing)
// while Watches start, read at different speeds, get cancelled, broken
// (BreakWatches) and closed (Conn.Close). Every value written is recorded
// by version; each watch's log is then checked against that record: the
// values in version order, none twice, each the one written at its
// version, Revision equal to Version, nothing after the last event, the
// delete that ends a watch the one of the file it watched, and a watch
// ended only after the writes ends on the file's final value. No sleeps,
// no timing: the interleavings are the scheduler's.

// hammerWatch is one Watch of a hammer test and what it received.
type hammerWatch struct {
	cancel context.CancelFunc
	// early is set when the watch was cancelled, or its Conn closed,
	// while the writes ran.
	early bool
	first *topo.WatchData   // the current value Watch returned
	evs   []*topo.WatchData // every event, the last one included
}

// hammerRecord is the values written to one file, by version.
type hammerRecord struct {
	mu     sync.Mutex
	values map[int64]string
}

func (r *hammerRecord) add(t *testing.T, v topo.Version, contents string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := int64(v.(topo.NumericVersion))
	if old, ok := r.values[n]; ok {
		t.Errorf("version %d written twice: %q and %q", n, old, contents)
	}
	r.values[n] = contents
}

// gen returns the generation of contents written as "gen:rest".
func gen(t *testing.T, contents string) int {
	t.Helper()
	g, _, ok := strings.Cut(contents, ":")
	n, err := strconv.Atoi(g)
	if !ok || err != nil {
		t.Errorf("contents %q: no generation", contents)
	}
	return n
}

// check checks w's log against the record r: order, no duplicate, each
// value the one written at its version, one generation of the file (the
// one w started on), the right delete, and, when final is not nil (w
// was ended after the writes, not by a delete nor a fault), the final
// value last. genEnd maps a generation to the revision of its delete
// bounds: above every version written in it, below the next one's
// Create (0: not deleted).
func (w *hammerWatch) check(t *testing.T, r *hammerRecord, lastOfGen, firstOfGen map[int]int64, final *topo.WatchData) {
	t.Helper()
	last := int64(w.first.Version.(topo.NumericVersion))
	// The initial value's Revision is the store's at the Watch: every
	// change after it comes later.
	require.GreaterOrEqual(t, w.first.Revision, last, "initial value's revision")
	rev := w.first.Revision
	g := gen(t, string(w.first.Contents))
	require.Equal(t, r.values[last], string(w.first.Contents), "initial value at version %d", last)
	require.NotEmpty(t, w.evs, "no last event")
	for i, ev := range w.evs {
		if ev.Err != nil {
			require.Equal(t, len(w.evs)-1, i, "events after the last one (%v)", ev.Err)
			break
		}
		v := int64(ev.Version.(topo.NumericVersion))
		require.Greater(t, v, last, "version %d after %d (event %d)", v, last, i)
		require.Equal(t, v, ev.Revision, "revision of version %d", v)
		require.Greater(t, v, rev, "version %d at or before the revision reached (%d)", v, rev)
		rev = v
		require.Equal(t, r.values[v], string(ev.Contents), "contents of version %d", v)
		require.Equal(t, g, gen(t, string(ev.Contents)), "version %d of another generation", v)
		last = v
	}
	end := w.evs[len(w.evs)-1]
	require.Error(t, end.Err)
	switch {
	case topo.IsErrType(end.Err, topo.NoNode):
		// The delete of generation g: after its last write, before the
		// next generation's Create.
		require.Greater(t, end.Revision, rev, "delete's revision")
		require.Greater(t, end.Revision, lastOfGen[g], "delete's revision after generation %d's writes", g)
		if next, ok := firstOfGen[g+1]; ok {
			require.Less(t, end.Revision, next, "delete's revision before generation %d", g+1)
		}
	case topo.IsErrType(end.Err, topo.Interrupted):
		require.Zero(t, end.Revision)
		if final != nil && !w.early {
			require.Equal(t, int64(final.Version.(topo.NumericVersion)), last, "a watch ended after the writes misses the final value")
			require.Equal(t, string(final.Contents), r.values[last])
		}
	case topo.IsErrType(end.Err, topo.Unavailable):
		require.Zero(t, end.Revision)
	default:
		t.Fatalf("unexpected end %v", end.Err)
	}
}

// hammerRead reads ch into w until it closes.
func hammerRead(w *hammerWatch, ch <-chan *topo.WatchData) {
	for ev := range ch {
		w.evs = append(w.evs, ev)
	}
}

// checkRecursive reads a WatchRecursive's channel until it closes,
// checking that each file's values come in version order with revisions
// that never decrease.
func checkRecursive(t *testing.T, ch <-chan *topo.WatchDataRecursive) {
	last := map[string]int64{}
	var rev int64
	for ev := range ch {
		if ev.Revision != 0 {
			if ev.Revision < rev {
				t.Errorf("recursive: revision %d after %d", ev.Revision, rev)
			}
			rev = ev.Revision
		}
		if ev.Err != nil {
			continue
		}
		v := int64(ev.Version.(topo.NumericVersion))
		if v <= last[ev.Path] {
			t.Errorf("recursive: %s version %d after %d", ev.Path, v, last[ev.Path])
		}
		last[ev.Path] = v
	}
}

// TestWatchFanoutHammer: writers of one file on every write path,
// deletes and re-creates of it, faults, and Watches that come and go at
// every speed; every watch's log is checked against what was written.
func TestWatchFanoutHammer(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	// The same file through another root: updateInPlace through another
	// root index, the same node and the same watches.
	top, err := f.NewConn("mem", "")
	require.NoError(t, err)
	t.Cleanup(top.Close)
	victim := newConn(t, f) // closed while the writes run
	paths := map[*memorytopo.Conn]string{c: "f", top: "root/f", victim: "f"}

	rec := &hammerRecord{values: map[int64]string{}}
	var genMu sync.Mutex
	lastOfGen, firstOfGen := map[int]int64{}, map[int]int64{}
	noteWrite := func(v topo.Version, contents string) {
		rec.add(t, v, contents)
		g, n := gen(t, contents), int64(v.(topo.NumericVersion))
		genMu.Lock()
		lastOfGen[g] = max(lastOfGen[g], n)
		genMu.Unlock()
	}
	v, err := c.Create(ctx, "f", []byte("0:create"))
	require.NoError(t, err)
	noteWrite(v, "0:create")
	firstOfGen[0] = int64(v.(topo.NumericVersion))

	const (
		updaters      = 4
		writes        = 300 // per updater, at least: they write until the watches are started
		recreateEvery = 60  // updater 0's iterations between two re-creates
		watches       = 240
		chains        = 6
	)
	var writers sync.WaitGroup
	var starting atomic.Bool
	starting.Store(true)
	// recreate deletes the file, then creates it as generation g, by
	// Conn.Delete and Create or by Txns.
	recreate := func(g int) error {
		contents := fmt.Sprintf("%d:create", g)
		var v topo.Version
		var err error
		if g%2 == 0 {
			if err = c.Delete(ctx, "f", nil); err == nil {
				v, err = top.Create(ctx, "root/f", []byte(contents))
			}
		} else {
			var vs []topo.Version
			if _, err = c.Txn(ctx, topo.DeleteOp("f", nil)); err == nil {
				vs, err = c.Txn(ctx, topo.CreateOp("f", []byte(contents)))
			}
			if err == nil {
				v = vs[0]
			}
		}
		if err != nil {
			return err
		}
		genMu.Lock()
		firstOfGen[g] = int64(v.(topo.NumericVersion))
		genMu.Unlock()
		noteWrite(v, contents)
		return nil
	}
	// Updaters: compare-and-set Updates (in place) through both roots,
	// and Txns of one or two files (under the write lock); a delete or a
	// re-create between the read and the write makes them fail, which is
	// fine. Updater 0 also re-creates the file now and then.
	for u := range updaters {
		writers.Go(func() {
			g := 0
			for i := 0; i < writes || starting.Load() && i < 50*writes; i++ {
				if u == 0 && i%recreateEvery == recreateEvery-1 {
					g++
					if err := recreate(g); err != nil {
						t.Error(err)
						return
					}
				}
				wc := c
				if i%2 == 1 {
					wc = top
				}
				p := paths[wc]
				cur, ver, err := wc.Get(ctx, p)
				if topo.IsErrType(err, topo.NoNode) {
					runtime.Gosched()
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				contents := fmt.Sprintf("%d:u%d-%d", gen(t, string(cur)), u, i)
				var nv topo.Version
				if i%5 == 4 {
					var vs []topo.Version
					vs, err = wc.Txn(ctx, topo.UpdateOp(p, []byte(contents), ver), topo.UpdateOp(strings.TrimSuffix(p, "f")+"g", []byte(contents), nil))
					if err == nil {
						nv = vs[0]
					}
				} else {
					nv, err = wc.Update(ctx, p, []byte(contents), ver)
				}
				switch {
				case err == nil:
					noteWrite(nv, contents)
				case topo.IsErrType(err, topo.BadVersion), topo.IsErrType(err, topo.NoNode):
				default:
					t.Error(err)
					return
				}
			}
		})
	}

	// Watches: started while the writes run, each read fast, read a few
	// events then cancelled, not read until the end, or cancelled at once;
	// on three Conns, one partitioned (its watches go on) then closed
	// (they end) half way; BreakWatches twice; a session expired; a
	// WatchRecursive for a while (every write takes the write lock
	// meanwhile).
	var mu sync.Mutex
	var all []*hammerWatch
	var readers sync.WaitGroup
	var slow []func()
	rctx, recCancel := context.WithCancel(ctx)
	defer recCancel()
	// Chains: readers that watch again each time their watch ends (a
	// delete, BreakWatches), as programs do, until the end.
	chainCtx, endChains := context.WithCancel(ctx)
	defer endChains()
	for k := range chains {
		readers.Go(func() {
			wc := []*memorytopo.Conn{c, top}[k%2]
			for chainCtx.Err() == nil {
				cur, ch, err := wc.Watch(chainCtx, paths[wc])
				switch {
				case topo.IsErrType(err, topo.NoNode):
					runtime.Gosched()
					continue
				case chainCtx.Err() != nil:
					return
				case err != nil:
					t.Error(err)
					return
				}
				w := &hammerWatch{cancel: func() {}, first: cur}
				hammerRead(w, ch)
				mu.Lock()
				all = append(all, w)
				mu.Unlock()
			}
		})
	}
	for i := range watches {
		switch i {
		case watches / 5:
			c.ExpireSession()
		case watches / 4:
			victim.Partition()
		case watches / 2:
			victim.Close()
		case watches / 3:
			f.BreakWatches(nil)
			_, rch, err := top.WatchRecursive(rctx, "root/")
			require.NoError(t, err)
			readers.Go(func() { checkRecursive(t, rch) })
		case 2 * watches / 3:
			recCancel()
			f.BreakWatches(nil)
		}
		wc := []*memorytopo.Conn{c, top, victim}[i%3]
		if wc == victim && i >= watches/4 && i < watches/2 {
			continue // partitioned: a Watch would wait for the Close
		}
		wctx, cancel := context.WithCancel(ctx)
		cur, ch, err := wc.Watch(wctx, paths[wc])
		switch {
		case topo.IsErrType(err, topo.NoNode), topo.IsErrType(err, topo.Closed):
			cancel()
			continue
		case err != nil:
			cancel()
			t.Fatal(err)
		}
		w := &hammerWatch{cancel: cancel, first: cur, early: wc == victim}
		mu.Lock()
		all = append(all, w)
		mu.Unlock()
		switch i % 4 {
		case 0:
			readers.Go(func() { hammerRead(w, ch) })
		case 1:
			readers.Go(func() {
				for range i % 7 {
					ev, ok := <-ch
					if !ok {
						return
					}
					w.evs = append(w.evs, ev)
				}
				w.early = true
				cancel()
				hammerRead(w, ch)
			})
		case 2:
			slow = append(slow, func() { readers.Go(func() { hammerRead(w, ch) }) })
		case 3:
			w.early = true
			cancel()
			readers.Go(func() { hammerRead(w, ch) })
		}
		runtime.Gosched()
	}
	starting.Store(false)
	writers.Wait()
	final, ver, err := c.Get(ctx, "f")
	require.NoError(t, err)
	for _, start := range slow {
		start()
	}
	mu.Lock()
	for _, w := range all {
		w.cancel()
	}
	mu.Unlock()
	endChains()
	readers.Wait()
	finalData := &topo.WatchData{Contents: final, Version: ver}
	ends := map[string]int{}
	evs := 0
	for _, w := range all {
		evs += len(w.evs) - 1
		e := w.evs[len(w.evs)-1].Err
		for _, code := range []topo.ErrorCode{topo.NoNode, topo.Interrupted, topo.Unavailable} {
			if topo.IsErrType(e, code) {
				ends[code.String()]++
			}
		}
	}
	t.Logf("%d writes, %d watches, %d changes received, ends %v", len(rec.values), len(all), evs, ends)
	for i, w := range all {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			w.check(t, rec, lastOfGen, firstOfGen, finalData)
		})
		if t.Failed() {
			break
		}
	}
}

// TestWatchFanoutHammerInPlace: many writers of one existing file, all
// in place (the store's lock for reading and the file's node lock,
// through two roots), against Watches that come and go, read fast, stall
// half way (their changes queued while others around them are sent
// straight into their channels, and cancels move the slots), or are not
// read until the end: every watch gets the values in version order, none
// twice, each the one written at its version, and those ended after the
// writes end on the final value.
func TestWatchFanoutHammerInPlace(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	top, err := f.NewConn("mem", "")
	require.NoError(t, err)
	t.Cleanup(top.Close)
	paths := map[*memorytopo.Conn]string{c: "f", top: "root/f"}
	rec := &hammerRecord{values: map[int64]string{}}
	v, err := c.Create(ctx, "f", []byte("0:create"))
	require.NoError(t, err)
	rec.add(t, v, "0:create")

	const (
		updaters = 6
		writes   = 200 // per updater, at least: they write until the watches are started
		watches  = 160
	)
	var writers sync.WaitGroup
	var starting atomic.Bool
	starting.Store(true)
	written := make(chan struct{}) // closed when the writes are done
	for u := range updaters {
		writers.Go(func() {
			for i := 0; i < writes || starting.Load() && i < 50*writes; i++ {
				wc := c
				if (u+i)%2 == 1 {
					wc = top
				}
				contents := fmt.Sprintf("0:u%d-%d", u, i)
				nv, err := wc.Update(ctx, paths[wc], []byte(contents), nil)
				if err != nil {
					t.Error(err)
					return
				}
				rec.add(t, nv, contents)
			}
		})
	}

	var all []*hammerWatch
	var readers sync.WaitGroup
	var slow []func()
	var late []context.CancelFunc
	for i := range watches {
		wc := []*memorytopo.Conn{c, top}[i%2]
		wctx, cancel := context.WithCancel(ctx)
		cur, ch, err := wc.Watch(wctx, paths[wc])
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		w := &hammerWatch{cancel: cancel, first: cur}
		all = append(all, w)
		switch i % 5 {
		case 0: // fast
			readers.Go(func() { hammerRead(w, ch) })
		case 1: // a few changes, then cancelled
			readers.Go(func() {
				for range i % 7 {
					ev, ok := <-ch
					if !ok {
						return
					}
					w.evs = append(w.evs, ev)
				}
				w.early = true
				cancel()
				hammerRead(w, ch)
			})
		case 2: // a few changes, then stalled until the writes are done
			readers.Go(func() {
				for range i % 4 {
					ev, ok := <-ch
					if !ok {
						return
					}
					w.evs = append(w.evs, ev)
				}
				<-written
				hammerRead(w, ch)
			})
		case 3: // not read until the end
			slow = append(slow, func() { readers.Go(func() { hammerRead(w, ch) }) })
		case 4: // cancelled at once, or once the watches are started
			w.early = true
			if i%10 == 4 {
				cancel()
			} else {
				late = append(late, cancel)
			}
			readers.Go(func() { hammerRead(w, ch) })
		}
		runtime.Gosched()
	}
	// Cancel the late ones while the writes still run (they write until
	// starting is cleared), in reverse order of their starts.
	for _, cancel := range slices.Backward(late) {
		cancel()
	}
	starting.Store(false)
	writers.Wait()
	close(written)
	final, ver, err := c.Get(ctx, "f")
	require.NoError(t, err)
	for _, start := range slow {
		start()
	}
	for _, w := range all {
		w.cancel()
	}
	readers.Wait()
	evs := 0
	for _, w := range all {
		evs += len(w.evs) - 1
	}
	t.Logf("%d writes, %d watches, %d changes received", len(rec.values), len(all), evs)
	finalData := &topo.WatchData{Contents: final, Version: ver}
	for i, w := range all {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			w.check(t, rec, nil, nil, finalData)
		})
		if t.Failed() {
			break
		}
	}
}
