package cache_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// revisionOf is the store revision a write committed at, as its Version
// says on etcd (ModRevision), Consul (ModifyIndex) and memorytopo (the
// store's revision).
func revisionOf(v topo.Version) int64 { return int64(v.(topo.NumericVersion)) }

// TestInfoRevision: once a Cache shows a write another Conn committed at
// revision R, its answers from memory (Get, List), its State and its
// local watcher's event reflect at least R, on memorytopo, etcd and
// Consul; on ZooKeeper, whose
// WatchRecursive reports no revision, they say 0; an answer read from the
// store says 0.
func TestInfoRevision(t *testing.T) {
	run := func(t *testing.T, open func() topo.Conn, revisions bool) {
		ctx := testCtx(t)
		direct := open()
		defer direct.Close()
		c := wrap(t, open(), cache.Options{})
		defer c.Close()
		_, local, err := c.WatchRecursive(ctx, "r/")
		require.NoError(t, err)
		var last int64
		for i, p := range []string{"r/a", "r/b", "r/a"} {
			want := fmt.Sprint(i)
			v, err := direct.Create(ctx, p, []byte(want))
			if topo.IsErrType(err, topo.NodeExists) {
				v, err = direct.Update(ctx, p, []byte(want), nil)
			}
			require.NoError(t, err)
			waitHolds(t, ctx, c, p, want)
			ev := <-local
			for ev.Path != p || string(ev.Contents) != want {
				ev = <-local
			}
			info := requireGet(t, ctx, c, p, want, true)
			_, linfo, err := c.ListWithInfo(ctx, "r/")
			require.NoError(t, err)
			require.True(t, linfo.FromMemory)
			st := c.State()
			if !revisions {
				require.Zero(t, ev.Revision)
				require.Zero(t, info.Revision)
				require.Zero(t, linfo.Revision)
				require.Zero(t, st.Revision)
				continue
			}
			require.GreaterOrEqual(t, ev.Revision, revisionOf(v), "the local watcher's event of %s", p)
			require.GreaterOrEqual(t, info.Revision, ev.Revision, "Get after the event of %s", p)
			require.GreaterOrEqual(t, linfo.Revision, info.Revision, "List after Get")
			require.GreaterOrEqual(t, st.Revision, linfo.Revision, "State after List")
			require.GreaterOrEqual(t, info.Revision, last, "never decreases")
			last = st.Revision
		}
		require.NoError(t, direct.Delete(ctx, "r/b", nil))
		require.Eventually(t, func() bool {
			_, _, err := c.Get(ctx, "r/b")
			return topo.IsErrType(err, topo.NoNode)
		}, 30*time.Second, time.Millisecond)
		if revisions {
			_, _, info, _ := c.GetWithInfo(ctx, "r/b")
			require.Greater(t, info.Revision, last, "the delete moved the revision")
		}
		_, _, info, err := c.GetWithInfo(cache.WithMode(ctx, cache.Bypass), "r/a")
		require.NoError(t, err)
		require.False(t, info.FromMemory)
		require.Zero(t, info.Revision, "a read of the store says nothing about a revision")
	}
	t.Run("memory", func(t *testing.T) { _, open := memoryStore(t); run(t, open, true) })
	t.Run("etcd", func(t *testing.T) { run(t, etcdOpen(t, etcdtest.Start(t), newRoot()), true) })
	t.Run("zk", func(t *testing.T) { run(t, zkOpen(t, zktest.Start(t), newRoot(), false), false) })
	t.Run("consul", func(t *testing.T) { run(t, consulOpen(t, consultest.Start(t), newRoot()), true) })
}

// TestRevisionNeverDecreasesAcrossRelist: the Cache's watch is cut again
// and again (the events held back lost with it) while another Conn
// writes; across every relist the revision the Cache reports never goes
// back, and ends at least at the last write's, on memorytopo and etcd. A
// local watcher's events never go back either, and when one carries
// Revision R, every write up to R has reached the watcher (a relist's
// differences carry the revision from before it until all are sent).
func TestRevisionNeverDecreasesAcrossRelist(t *testing.T) {
	run := func(t *testing.T, open func() topo.Conn) {
		ctx := testCtx(t)
		direct := open()
		defer direct.Close()
		var resyncs atomic.Int64
		g := newGated(open())
		c := wrap(t, g, cache.Options{Hooks: cache.Hooks{OnResync: func(error) { resyncs.Add(1) }}})
		defer c.Close()
		_, local, err := c.WatchRecursive(ctx, "r/")
		require.NoError(t, err)
		type write struct {
			path string
			rev  int64
		}
		var writes []write
		held := map[string]int64{} // the version of each file the local watcher has
		var seen, localSeen int64
		check := func() {
			t.Helper()
			for drained := false; !drained; {
				select {
				case ev := <-local:
					require.NoError(t, ev.Err)
					held[ev.Path] = revisionOf(ev.Version)
					require.GreaterOrEqual(t, ev.Revision, localSeen, "a local event went back")
					localSeen = ev.Revision
					for _, w := range writes {
						if w.rev <= ev.Revision {
							require.GreaterOrEqualf(t, held[w.path], w.rev, "event of %s at Revision %d: the write of %s at %d has not arrived", ev.Path, ev.Revision, w.path, w.rev)
						}
					}
				default:
					drained = true
				}
			}
			// The Get before State: memory may move in between.
			_, _, info, err := c.GetWithInfo(ctx, "r/f0")
			if err == nil && info.FromMemory {
				require.GreaterOrEqual(t, info.Revision, seen, "Get went back")
				seen = info.Revision
			}
			st := c.State()
			require.GreaterOrEqual(t, st.Revision, seen, "State went back")
			seen = st.Revision
		}
		var v topo.Version
		for i := range 12 {
			check()
			var err error
			if i%3 == 2 {
				g.hold()
			}
			for j := range 3 {
				p := fmt.Sprintf("r/f%d", j)
				v, err = direct.Create(ctx, p, []byte(fmt.Sprint(i)))
				if topo.IsErrType(err, topo.NodeExists) {
					v, err = direct.Update(ctx, p, []byte(fmt.Sprint(i)), nil)
				}
				require.NoError(t, err)
				writes = append(writes, write{p, revisionOf(v)})
				check()
			}
			if i%3 == 2 {
				g.breakWatches() // the writes' events are lost with the watch
				g.release()
				require.Eventually(t, g.watching, 30*time.Second, time.Millisecond)
			}
		}
		waitHolds(t, ctx, c, "r/f2", "11")
		check()
		require.GreaterOrEqual(t, seen, revisionOf(v))
		require.Equal(t, revisionOf(v), held["r/f2"], "the local watcher has the last write")
		require.GreaterOrEqual(t, resyncs.Load(), int64(4))
	}
	t.Run("memory", func(t *testing.T) { _, open := memoryStore(t); run(t, open) })
	t.Run("etcd", func(t *testing.T) { run(t, etcdOpen(t, etcdtest.Start(t), newRoot())) })
}

// TestConsistentGetRevision: a Consistent Get answered from memory after
// its barrier reports at least the store's revision when it began, writes
// outside the Cache's prefix included (which no event of its watch
// carries), on memorytopo and etcd (RevisionSyncWatcher).
func TestConsistentGetRevision(t *testing.T) {
	run := func(t *testing.T, open func() topo.Conn) {
		ctx := testCtx(t)
		other := open()
		defer other.Close()
		in, err := other.Create(ctx, "in/f", []byte("one"))
		require.NoError(t, err)
		c, err := cache.New(open(), "in/", cache.Options{})
		require.NoError(t, err)
		defer c.Close()
		require.GreaterOrEqual(t, requireGet(t, ctx, c, "in/f", "one", true).Revision, revisionOf(in))
		for i := range 3 {
			v, err := other.Update(ctx, "out/g", []byte{byte(i)}, nil)
			require.NoError(t, err)
			// A barrier not passed within its bound (a loaded machine)
			// gives way to the store, whose answer says no revision.
			var info cache.Info
			for !info.FromMemory {
				b, _, i, err := c.GetWithInfo(cache.WithMode(ctx, cache.Consistent), "in/f")
				require.NoError(t, err)
				require.Equal(t, "one", string(b))
				info = i
			}
			require.GreaterOrEqual(t, info.Revision, revisionOf(v), "the barrier passed the write elsewhere")
			require.GreaterOrEqual(t, c.State().Revision, info.Revision)
		}
	}
	t.Run("memory", func(t *testing.T) { _, open := memoryStore(t); run(t, open) })
	t.Run("etcd", func(t *testing.T) { run(t, etcdOpen(t, etcdtest.Start(t), newRoot())) })
}
