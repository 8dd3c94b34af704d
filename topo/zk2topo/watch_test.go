package zk2topo

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestWatchRecursiveLossless creates and updates files under the prefix
// from other connections while WatchRecursive starts and runs: every file
// ends up reported (in the initial list or as an event) with its final
// value, and deletes are reported.
func TestWatchRecursiveLossless(t *testing.T) {
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range 20 {
		_, err := c.Create(ctx, fmt.Sprintf("p/pre/%d", i), []byte("0"))
		require.NoError(t, err)
	}

	const writers, perWriter = 4, 25
	final := map[string]string{}
	var mu sync.Mutex
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wc := openConn(t, []string{testServer}, root)
		wg.Go(func() {
			<-start
			for i := range perWriter {
				p := fmt.Sprintf("p/w%d/d%d/f", w, i%5)
				v := fmt.Sprintf("%d-%d", w, i)
				_, err := wc.Update(ctx, p, []byte(v), nil)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				final[p] = v
				mu.Unlock()
			}
			p := fmt.Sprintf("p/pre/%d", w)
			if assert.NoError(t, wc.Delete(ctx, p, nil)) {
				mu.Lock()
				final[p] = ""
				mu.Unlock()
			}
		})
	}

	close(start) // writers race with the watch's start
	initial, ch, err := c.WatchRecursive(ctx, "p/")
	require.NoError(t, err)
	seen := map[string]string{}
	for _, wd := range initial {
		seen[wd.Path] = string(wd.Contents)
	}
	wg.Wait()
	for i := range 20 {
		if _, ok := final[fmt.Sprintf("p/pre/%d", i)]; !ok {
			final[fmt.Sprintf("p/pre/%d", i)] = "0"
		}
	}
	want := map[string]string{}
	for p, v := range final {
		if v != "" {
			want[p] = v
		}
	}
	timeout := time.After(time.Minute)
	for {
		current := map[string]string{}
		for p, v := range seen {
			if v != "" {
				current[p] = v
			}
		}
		if fmt.Sprint(current) == fmt.Sprint(want) {
			break
		}
		select {
		case wd := <-ch:
			require.NotNil(t, wd)
			switch {
			case wd.Err == nil:
				seen[wd.Path] = string(wd.Contents)
			case topo.IsErrType(wd.Err, topo.NoNode):
				seen[wd.Path] = ""
			default:
				t.Fatalf("unexpected watch error %v", wd.Err)
			}
		case <-timeout:
			t.Fatalf("the watch did not converge:\n got %v\nwant %v", current, want)
		}
	}
	cancel()
	for wd := range ch {
		if wd.Err != nil && !topo.IsErrType(wd.Err, topo.NoNode) {
			require.ErrorIs(t, wd.Err, topo.Interrupted)
		}
	}
}

// TestWatchWhileChanging: Watch's first value and its later events, with
// the file changing from another Conn as soon as (and while) the watch
// starts, under the race detector: the watch's goroutine re-reads the file
// on each change while Watch builds its return value from its own read,
// and the two must share nothing (they once shared the read's variables).
// Every value comes in order and the last one written arrives.
func TestWatchWhileChanging(t *testing.T) {
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	writer := openConn(t, []string{testServer}, root)
	ctx := t.Context()
	_, err := c.Create(ctx, "f", []byte("0"))
	require.NoError(t, err)
	for round := range 20 {
		wctx, cancel := context.WithCancel(ctx)
		start := make(chan struct{})
		var wg sync.WaitGroup
		const writes = 5
		wg.Go(func() {
			<-start
			for i := 1; i <= writes; i++ {
				_, err := writer.Update(ctx, "f", fmt.Appendf(nil, "%d-%d", round, i), nil)
				assert.NoError(t, err)
			}
		})
		close(start)
		first, ch, err := c.Watch(wctx, "f")
		require.NoError(t, err)
		last := int64(first.Version.(topo.NumericVersion))
		value := string(first.Contents)
		wg.Wait()
		want := fmt.Sprintf("%d-%d", round, writes)
		for value != want {
			select {
			case wd := <-ch:
				require.NoError(t, wd.Err)
				v := int64(wd.Version.(topo.NumericVersion))
				require.Greater(t, v, last, "versions go forward")
				last, value = v, string(wd.Contents)
			case <-time.After(time.Minute):
				t.Fatalf("round %d: the watch stopped at %q, want %q", round, value, want)
			}
		}
		cancel()
		for wd := range ch {
			require.ErrorIs(t, wd.Err, topo.Interrupted)
		}
	}
}

// TestWatchRecursiveOnAConnAtTheZooKeeperRoot: on a Conn whose root is
// ZooKeeper's own "/", a prefix without a directory watches "/" itself:
// the files below the matching top-level znodes are listed, and a file
// created under them later is reported with its topo path.
func TestWatchRecursiveOnAConnAtTheZooKeeperRoot(t *testing.T) {
	top := freshRoot(t) + "-w" // no other test's root starts with it
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := openConn(t, []string{testServer}, "/")
	name := top[1:]
	_, err := c.Create(ctx, name+"/a/x", []byte("x"))
	require.NoError(t, err)
	_, err = c.Create(ctx, name+"/y", []byte("y"))
	require.NoError(t, err)

	initial, events, err := c.WatchRecursive(ctx, name)
	require.NoError(t, err)
	var got []string
	for _, w := range initial {
		got = append(got, w.Path)
	}
	assert.ElementsMatch(t, []string{name + "/a/x", name + "/y"}, got)

	_, err = c.Create(ctx, name+"/a/b/z", []byte("z"))
	require.NoError(t, err)
	select {
	case ev := <-events:
		require.NoError(t, ev.Err)
		assert.Equal(t, name+"/a/b/z", ev.Path)
		assert.Equal(t, "z", string(ev.Contents))
	case <-ctx.Done():
		t.Fatal("the create below the prefix was not reported")
	}
}
