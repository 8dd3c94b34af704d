package memorytopo_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// watchLog reads a Watch's channel until it closes, checking that its
// changes come in order, each at most once, with Revision equal to
// Version; it returns the contents of every change received and the
// channel's last event's error. Safe to call from any goroutine (it
// reports with Errorf).
func watchLog(t *testing.T, ch <-chan *topo.WatchData) (values []string, end error) {
	t.Helper()
	var last int64
	for ev := range ch {
		if ev.Err != nil {
			if end != nil {
				t.Errorf("a second error event: %v after %v", ev.Err, end)
			}
			end = ev.Err
			continue
		}
		v := int64(ev.Version.(topo.NumericVersion))
		switch {
		case end != nil:
			t.Errorf("a change after the last event %v", end)
		case v <= last:
			t.Errorf("version %d after %d", v, last)
		case v != ev.Revision:
			t.Errorf("version %d, revision %d", v, ev.Revision)
		}
		last = v
		values = append(values, string(ev.Contents))
	}
	return values, end
}

// requireIncreasing checks that values, integers written in increasing
// order, are in increasing order and end with want (any end for "").
func requireIncreasing(t *testing.T, values []string, want string) {
	t.Helper()
	prev := -1
	for _, s := range values {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		require.Greater(t, n, prev)
		prev = n
	}
	require.NotEmpty(t, values)
	if want != "" {
		require.Equal(t, want, values[len(values)-1])
	}
}

// TestWatchFanoutSlowWatchers: many Watches of one file, half of them not
// read at all while the writes run. The writes do not wait for them;
// every watch gets the changes in order, none twice, and ends on the
// latest value; the fast ones read while the writes run.
func TestWatchFanoutSlowWatchers(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	_, err := c.Create(ctx, "f", []byte("0"))
	require.NoError(t, err)
	const watchers, writes = 64, 300
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var fast sync.WaitGroup
	fastLogs := make([][]string, watchers/2)
	fastEnds := make([]error, watchers/2)
	var slow []<-chan *topo.WatchData
	for i := range watchers {
		_, ch, err := c.Watch(wctx, "f")
		require.NoError(t, err)
		if i%2 == 1 {
			slow = append(slow, ch)
			continue
		}
		fast.Go(func() { fastLogs[i/2], fastEnds[i/2] = watchLog(t, ch) })
	}
	for i := 1; i <= writes; i++ {
		_, err := c.Update(ctx, "f", []byte(strconv.Itoa(i)), nil)
		require.NoError(t, err)
	}
	cancel()
	fast.Wait()
	want := strconv.Itoa(writes)
	for i := range fastLogs {
		requireIncreasing(t, fastLogs[i], want)
		requireCode(t, fastEnds[i], topo.Interrupted)
	}
	for _, ch := range slow {
		values, end := watchLog(t, ch)
		requireIncreasing(t, values, want)
		requireCode(t, end, topo.Interrupted)
	}
}

// TestWatchFanoutCancelMovesSlots cancels Watches of a file, some of
// them behind (changes queued), so that others take their places in the
// file's list: every watch left still gets each later change, in order,
// and the cancelled ones end with Interrupted.
func TestWatchFanoutCancelMovesSlots(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	_, err := c.Create(ctx, "f", []byte("0"))
	require.NoError(t, err)
	const watchers = 8
	chs := make([]<-chan *topo.WatchData, watchers)
	cancels := make([]context.CancelFunc, watchers)
	for i := range watchers {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		_, chs[i], err = c.Watch(wctx, "f")
		require.NoError(t, err)
		cancels[i] = cancel
	}
	write := func(v int) {
		_, err := c.Update(ctx, "f", []byte(strconv.Itoa(v)), nil)
		require.NoError(t, err)
	}
	// Nobody reads: the first change fills each one-slot channel, the
	// second is queued behind it.
	write(1)
	write(2)
	// The last watches take the places of the first ones.
	for _, i := range []int{0, 1, 2} {
		cancels[i]()
		values, end := watchLog(t, chs[i])
		requireIncreasing(t, values, "2")
		requireCode(t, end, topo.Interrupted)
	}
	// The rest read what they have, then more changes, one at a time.
	for i := 3; i < watchers; i++ {
		require.Equal(t, "1", string((<-chs[i]).Contents))
		require.Equal(t, "2", string((<-chs[i]).Contents))
	}
	for v := 3; v <= 5; v++ {
		write(v)
		for i := v; i < watchers; i++ {
			ev := <-chs[i]
			require.NoError(t, ev.Err)
			require.Equal(t, strconv.Itoa(v), string(ev.Contents))
		}
		// Cancelling one moves the last into its place again.
		cancels[v]()
		values, end := watchLog(t, chs[v])
		require.Empty(t, values)
		requireCode(t, end, topo.Interrupted)
	}
	for i := 6; i < watchers; i++ {
		cancels[i]()
		values, end := watchLog(t, chs[i])
		require.Empty(t, values)
		requireCode(t, end, topo.Interrupted)
	}
}

// TestWatchOfDeletedFileLeavesNewWatchesAlone: a Watch whose file was
// deleted unregisters once its reader takes the delete, which may be
// after the file was created again and watched anew: that must not end
// or silence the new watches.
func TestWatchOfDeletedFileLeavesNewWatchesAlone(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	_, err := c.Create(ctx, "f", []byte("0"))
	require.NoError(t, err)
	_, old, err := c.Watch(ctx, "f")
	require.NoError(t, err)
	// The change fills old's channel, so the delete waits behind it.
	_, err = c.Update(ctx, "f", []byte("1"), nil)
	require.NoError(t, err)
	require.NoError(t, c.Delete(ctx, "f", nil))
	_, err = c.Create(ctx, "f", []byte("2"))
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	var news []<-chan *topo.WatchData
	for range 2 {
		_, ch, err := c.Watch(wctx, "f")
		require.NoError(t, err)
		news = append(news, ch)
	}
	values, end := watchLog(t, old)
	require.Equal(t, []string{"1"}, values)
	requireCode(t, end, topo.NoNode)
	// old has unregistered (its channel is closed after that).
	_, err = c.Update(ctx, "f", []byte("3"), nil)
	require.NoError(t, err)
	cancel()
	for _, ch := range news {
		values, end := watchLog(t, ch)
		require.Equal(t, []string{"3"}, values)
		requireCode(t, end, topo.Interrupted)
	}
}

// TestWatchEventsAreOwnCopies: each watcher of a change gets contents of
// its own; changing or appending to them changes no other watcher's.
func TestWatchEventsAreOwnCopies(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	_, err := c.Create(ctx, "f", []byte("0"))
	require.NoError(t, err)
	const watchers = 40
	chs := make([]<-chan *topo.WatchData, watchers)
	for i := range chs {
		_, chs[i], err = c.Watch(ctx, "f")
		require.NoError(t, err)
	}
	for _, value := range []string{"abc", string(make([]byte, 100))} {
		_, err = c.Update(ctx, "f", []byte(value), nil)
		require.NoError(t, err)
		evs := make([]*topo.WatchData, watchers)
		for i, ch := range chs {
			evs[i] = <-ch
			require.Equal(t, value, string(evs[i].Contents))
		}
		for i, ev := range evs {
			ev.Contents[0] = 'X'
			_ = append(ev.Contents, "appended"...)
			if i+1 < watchers {
				require.Equal(t, value, string(evs[i+1].Contents), "watcher %d", i+1)
			}
		}
		cur, _, err := c.Get(ctx, "f")
		require.NoError(t, err)
		require.Equal(t, value, string(cur))
	}
}

// TestWatchFanoutRace runs writers of one file against many Watches that
// come and go (cancelled while changes are being sent to them), under
// the race detector in CI: each watch gets changes in order, none twice;
// those cancelled after the writes end on the last value (a cancel sends
// what is queued first), then Interrupted. Then the file's delete ends
// new watches with NoNode.
func TestWatchFanoutRace(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	other := newConn(t, c.Factory())
	_, err := c.Create(ctx, "f", []byte("0"))
	require.NoError(t, err)
	const watchers, writes = 100, 200
	type watch struct {
		cancel    context.CancelFunc
		cancelled bool     // during the writes
		values    []string // the current value, then the changes
		end       error
	}
	ws := make([]*watch, watchers)
	var readers sync.WaitGroup
	start := func(i int) {
		wctx, cancel := context.WithCancel(ctx)
		cur, ch, err := c.Watch(wctx, "f")
		require.NoError(t, err)
		w := &watch{cancel: cancel}
		ws[i] = w
		readers.Go(func() {
			values, end := watchLog(t, ch)
			w.values, w.end = append([]string{string(cur.Contents)}, values...), end
		})
	}
	for i := range watchers / 2 {
		start(i)
	}
	var mu sync.Mutex // orders the two writers' values
	next := 0
	var writers sync.WaitGroup
	for _, wc := range []*memorytopo.Conn{c, other} {
		writers.Go(func() {
			for range writes {
				mu.Lock()
				next++
				_, err := wc.Update(ctx, "f", []byte(strconv.Itoa(next)), nil)
				mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	// Meanwhile, watches start and every third one is cancelled.
	for i := watchers / 2; i < watchers; i++ {
		start(i)
		if i%3 == 0 {
			ws[i-watchers/2].cancelled = true
			ws[i-watchers/2].cancel()
		}
	}
	writers.Wait()
	for _, w := range ws {
		w.cancel()
	}
	readers.Wait()
	want := strconv.Itoa(2 * writes)
	for _, w := range ws {
		requireCode(t, w.end, topo.Interrupted)
		if w.cancelled {
			requireIncreasing(t, w.values, "")
			continue
		}
		requireIncreasing(t, w.values, want)
	}

	var ends []<-chan *topo.WatchData
	for range 10 {
		_, ch, err := c.Watch(ctx, "f")
		require.NoError(t, err)
		ends = append(ends, ch)
	}
	require.NoError(t, other.Delete(ctx, "f", nil))
	for _, ch := range ends {
		values, end := watchLog(t, ch)
		require.Empty(t, values)
		requireCode(t, end, topo.NoNode)
	}
}
