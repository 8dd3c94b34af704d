package test

import (
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// collector receives everything a channel sends, as fast as it comes (a
// Cache drops a local watcher that falls behind), for a test to look at
// later.
type collector[T any] struct {
	mu     sync.Mutex
	got    []T
	closed bool
	more   chan struct{} // capacity 1: something new
}

func collect[T any](ch <-chan T) *collector[T] {
	c := &collector[T]{more: make(chan struct{}, 1)}
	go func() {
		for v := range ch {
			c.mu.Lock()
			c.got = append(c.got, v)
			c.mu.Unlock()
			c.poke()
		}
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.poke()
	}()
	return c
}

func (c *collector[T]) poke() {
	select {
	case c.more <- struct{}{}:
	default:
	}
}

// next returns the i-th value received, waiting up to longWait for it;
// ok is false when the channel closed before sending it.
func (c *collector[T]) next(t require.TestingT, i int, what string) (v T, ok bool) {
	timeout := time.After(longWait)
	for {
		c.mu.Lock()
		n, closed := len(c.got), c.closed
		if i < n {
			v = c.got[i]
		}
		c.mu.Unlock()
		switch {
		case i < n:
			return v, true
		case closed:
			return v, false
		}
		select {
		case <-c.more:
		case <-timeout:
			require.FailNowf(t, "timed out", "%s: nothing received within %v", what, longWait)
		}
	}
}

// churnWrite is one write of testWatchRecursiveChurn's writer: its place
// in the writer's order and the version it returned.
type churnWrite struct {
	seq     int
	version string
}

// churnView follows one WatchRecursive of testWatchRecursiveChurn: the
// last write seen per path (by seq), and the files it shows.
type churnView struct {
	last  map[string]int
	files map[string]string
}

// churnLife is the life of a file that testWatchRecursiveChurn's value
// shows: the round that created it ("again-3-u": 3), but for c/f, never
// deleted.
func churnLife(p, value string) string {
	if p == "c/f" {
		return ""
	}
	return strings.Split(value, "-")[1]
}

// apply checks wd against the writes (a value comes with the version its
// write returned, and no value of a path comes after a later one of that
// path) and applies it.
func (v *churnView) apply(t require.TestingT, wd *topo.WatchDataRecursive, writes func(string) (churnWrite, bool), what string) {
	if wd.Err != nil {
		require.Truef(t, topo.IsErrType(wd.Err, topo.NoNode), "%s: event %q ends with %v", what, wd.Path, wd.Err)
		delete(v.files, wd.Path)
		return
	}
	w, ok := writes(string(wd.Contents))
	require.Truef(t, ok, "%s: %q reported with %q, which nobody wrote", what, wd.Path, wd.Contents)
	require.Equalf(t, w.version, wd.Version.String(), "%s: version of %q's value %q", what, wd.Path, wd.Contents)
	if last, ok := v.last[wd.Path]; ok {
		require.Greaterf(t, w.seq, last, "%s: %q reported with %q after a later value of it", what, wd.Path, wd.Contents)
	}
	if shown, ok := v.files[wd.Path]; ok {
		require.Equalf(t, churnLife(wd.Path, shown), churnLife(wd.Path, string(wd.Contents)),
			"%s: %q reported with %q, of another life than the %q shown, without its deletion", what, wd.Path, wd.Contents, shown)
	}
	v.last[wd.Path] = w.seq
	v.files[wd.Path] = string(wd.Contents)
}

// testWatchRecursiveChurn: one writer creates, updates and deletes files
// under a prefix as fast as it can, among them a file re-created again and
// again (its version starting over on ZooKeeper), a directory emptied and
// filled again, and a file with files below it, while WatchRecursive
// calls start one after the other on another Conn. Every watch's initial
// values and events come each with the version its write returned, never
// a value of a path older than one it already showed (the initial values
// included), never a re-created file's value without its deletion before
// it, and every watch converges on the store's final state.
func testWatchRecursiveChurn(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	w, c := s.conn(), s.conn()

	var mu sync.Mutex
	written := map[string]churnWrite{} // value -> its write
	seq := 0
	writes := func(value string) (churnWrite, bool) {
		mu.Lock()
		defer mu.Unlock()
		cw, ok := written[value]
		return cw, ok
	}
	const rounds = 40
	done := make(chan error, 1)
	startWatch := make(chan struct{}) // the writer goes on as a watch starts
	go func() {
		done <- func() error {
			for i := range rounds {
				for _, op := range []struct {
					path, value string
					del         bool
				}{
					{"c/again", fmt.Sprintf("again-%d", i), false},
					{"c/again", fmt.Sprintf("again-%d-u", i), false},
					{"c/d/x", fmt.Sprintf("x-%d", i), false},
					{"c/f", fmt.Sprintf("f-%d", i), false},
					{"c/f/below", fmt.Sprintf("below-%d", i), false},
					{"c/again", "", true},
					{"c/d/x", "", true}, // the directory empties
					{"c/f/below", "", true},
				} {
					if op.del {
						if err := w.Delete(ctx, op.path, nil); err != nil {
							return fmt.Errorf("Delete(%s): %w", op.path, err)
						}
						continue
					}
					// Recorded before the write: a watch may show it
					// before the writer hears back.
					mu.Lock()
					seq++
					mine := seq
					mu.Unlock()
					v, err := w.Update(ctx, op.path, []byte(op.value), nil)
					if err != nil {
						return fmt.Errorf("Update(%s): %w", op.path, err)
					}
					mu.Lock()
					written[op.value] = churnWrite{seq: mine, version: v.String()}
					mu.Unlock()
				}
				startWatch <- struct{}{}
			}
			return nil
		}()
		close(startWatch)
	}()

	// Watches start one after another while the writer runs; their
	// values are checked once the writer is done (a value can come before
	// its write returned), the events meanwhile waiting in their channels.
	type started struct {
		init []*topo.WatchDataRecursive
		got  *collector[*topo.WatchDataRecursive]
	}
	var watches []started
	for range startWatch {
		if len(watches) >= 5 {
			continue
		}
		init, ch := mustWatchRecursive(t, ctx, c, "c/", "WatchRecursive(c/) during the churn")
		watches = append(watches, started{init, collect(ch)})
	}
	require.NoError(t, <-done, "the writer")

	want := map[string]string{"c/f": fmt.Sprintf("f-%d", rounds-1)}
	for i, st := range watches {
		what := fmt.Sprintf("watch %d", i)
		view := &churnView{last: map[string]int{}, files: map[string]string{}}
		for _, wd := range st.init {
			view.apply(t, wd, writes, what+" (initial values)")
		}
		for n := 0; !maps.Equal(view.files, want); n++ {
			wd, ok := st.got.next(t, n, what+" converging on the final state")
			require.Truef(t, ok, "%s closed; files %v", what, view.files)
			view.apply(t, wd, writes, what)
		}
	}
}

// testWatchChurn: Watch calls of one file start one after the other on a
// Conn while another updates the file as fast as it can, then deletes it
// and creates it again. Every watch's first value and events come each
// with the version its write returned, in the order of the writes, and
// every watch ends with NoNode, never showing the re-created file.
func testWatchChurn(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	w, c := s.conn(), s.conn()

	const updates = 60
	versions := make([]string, updates) // of value i
	v0 := mustCreate(t, ctx, w, "c/f", "0")
	versions[0] = v0.String()
	var mu sync.Mutex
	started := make(chan struct{}) // the writer goes on as a Watch starts
	done := make(chan error, 1)
	go func() {
		defer close(started)
		done <- func() error {
			for i := 1; i < updates; i++ {
				v, err := w.Update(ctx, "c/f", fmt.Append(nil, i), nil)
				if err != nil {
					return err
				}
				mu.Lock()
				versions[i] = v.String()
				mu.Unlock()
				if i%10 == 0 {
					started <- struct{}{}
				}
			}
			if err := w.Delete(ctx, "c/f", nil); err != nil {
				return err
			}
			_, err := w.Create(ctx, "c/f", []byte("re-created"))
			return err
		}()
	}()
	type watch struct {
		first *topo.WatchData
		got   *collector[*topo.WatchData]
	}
	var watches []watch
	for range started {
		first, ch, err := c.Watch(ctx, "c/f")
		if topo.IsErrType(err, topo.NoNode) {
			continue // deleted already
		}
		require.NoError(t, err)
		drainOnCleanup(t, ch, "Watch(c/f)")
		if string(first.Contents) == "re-created" {
			continue // a watch of the new file
		}
		watches = append(watches, watch{first, collect(ch)})
	}
	require.NoError(t, <-done, "the writer")
	require.NotEmpty(t, watches)
	for i, wt := range watches {
		what := fmt.Sprintf("watch %d", i)
		last := -1
		i := 0 // of the next event
		for wd := wt.first; wd.Err == nil; i++ {
			var v int
			_, err := fmt.Sscan(string(wd.Contents), &v)
			require.NoErrorf(t, err, "%s: value %q (the re-created file's?)", what, wd.Contents)
			require.Greaterf(t, v, last, "%s: value %d after %d", what, v, last)
			require.Equalf(t, versions[v], wd.Version.String(), "%s: version of value %d", what, v)
			last = v
			var ok bool
			wd, ok = wt.got.next(t, i, what)
			require.Truef(t, ok, "%s closed without an error", what)
			if wd.Err != nil {
				requireCode(t, wd.Err, topo.NoNode, what+"'s end after the file's deletion")
			}
		}
		_, ok := wt.got.next(t, i, what+" after NoNode")
		require.Falsef(t, ok, "%s sent more after NoNode", what)
	}
}
