package cache_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// steppedConn passes its WatchRecursive events one at a time while
// stepping: each event is taken from the store's channel at once (pulled
// counts them) and then waits for a step.
type steppedConn struct {
	topo.Conn
	mu       sync.Mutex
	stepping bool
	pulled   int
	changed  chan struct{} // closed and replaced when pulled or stepping change
	steps    chan struct{}
}

func newStepped(c topo.Conn) *steppedConn {
	return &steppedConn{Conn: c, changed: make(chan struct{}), steps: make(chan struct{})}
}

func (s *steppedConn) Unwrap() topo.Conn { return s.Conn }

// setStepping turns stepping on or off (off lets every held event go).
func (s *steppedConn) setStepping(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stepping = on
	close(s.changed)
	s.changed = make(chan struct{})
}

// pulledCount returns the number of events taken from the store so far.
func (s *steppedConn) pulledCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pulled
}

// waitPulled waits until more than n events were taken from the store.
func (s *steppedConn) waitPulled(t testing.TB, ctx context.Context, n int) {
	t.Helper()
	for {
		s.mu.Lock()
		got, changed := s.pulled, s.changed
		s.mu.Unlock()
		if got > n {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("the store watch sent no event beyond %d", n)
		}
	}
}

// step lets one held event go.
func (s *steppedConn) step(ctx context.Context) {
	select {
	case s.steps <- struct{}{}:
	case <-ctx.Done():
	}
}

func (s *steppedConn) WatchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, error) {
	init, in, err := s.Conn.WatchRecursive(ctx, prefix)
	if err != nil {
		return nil, nil, err
	}
	return init, s.forward(ctx, in), nil
}

// forward relays in's events, stepped.
func (s *steppedConn) forward(ctx context.Context, in <-chan *topo.WatchDataRecursive) <-chan *topo.WatchDataRecursive {
	out := make(chan *topo.WatchDataRecursive)
	go func() {
		defer close(out)
		for ev := range in {
			s.mu.Lock()
			s.pulled++
			close(s.changed)
			s.changed = make(chan struct{})
			s.mu.Unlock()
			for {
				s.mu.Lock()
				stepping, changed := s.stepping, s.changed
				s.mu.Unlock()
				if !stepping {
					break
				}
				select {
				case <-s.steps:
				case <-changed:
					continue
				case <-ctx.Done():
				}
				break
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				for range in {
				}
				return
			}
		}
	}()
	return out
}

// steppedSyncConn is a steppedConn over a cache.RevisionSyncWatcher that
// is one too (its events stepped the same way), and tells when a sync is
// asked for.
type steppedSyncConn struct {
	*steppedConn
	synced chan struct{} // receives one value per sync call, if there is room
}

func newSteppedSync(c topo.Conn) *steppedSyncConn {
	return &steppedSyncConn{steppedConn: newStepped(c), synced: make(chan struct{}, 1)}
}

func (s *steppedSyncConn) WatchRecursiveSync(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, func(context.Context) (uint64, error), error) {
	init, ch, sync, err := s.WatchRecursiveSyncRevision(ctx, prefix)
	if err != nil {
		return nil, nil, nil, err
	}
	return init, ch, func(ctx context.Context) (uint64, error) { n, _, err := sync(ctx); return n, err }, nil
}

func (s *steppedSyncConn) WatchRecursiveSyncRevision(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, func(context.Context) (uint64, int64, error), error) {
	init, in, sync, err := s.Conn.(cache.RevisionSyncWatcher).WatchRecursiveSyncRevision(ctx, prefix)
	if err != nil {
		return nil, nil, nil, err
	}
	return init, s.forward(ctx, in), func(ctx context.Context) (uint64, int64, error) {
		select {
		case s.synced <- struct{}{}:
		default:
		}
		return sync(ctx)
	}, nil
}

// heldDelete holds the Deletes of its Conn until gate closes, after
// closing sent.
type heldDelete struct {
	*steppedSyncConn
	gate, sent chan struct{}
}

func (h *heldDelete) Delete(ctx context.Context, p string, v topo.Version) error {
	close(h.sent)
	<-h.gate
	return h.Conn.Delete(ctx, p, v)
}

// TestOwnDeleteNotSettledByAnotherDelete: while the Cache deletes f,
// another Conn deletes f and creates it again, so the Cache's delete
// removes that new file; the other Conn's deletion event, delivered while
// the Cache's delete was in flight, does not show it: a read once the
// delete returned must not answer the re-created value from memory (the
// creation's event arriving after the delete returned). On memorytopo and
// etcd, where the Cache then waits for a revision barrier before its
// Delete returns. (Not on ZooKeeper and Consul, with no barrier: see
// docs/cache.md.)
func TestOwnDeleteNotSettledByAnotherDelete(t *testing.T) {
	run := func(t *testing.T, open func() topo.Conn) {
		ctx := testCtx(t)
		h := &heldDelete{steppedSyncConn: newSteppedSync(open()), gate: make(chan struct{}), sent: make(chan struct{})}
		s := h.steppedConn
		c := wrap(t, h, cache.Options{})
		defer c.Close()
		other := open()
		defer other.Close()
		_, err := other.Create(ctx, "f", []byte("one"))
		require.NoError(t, err)
		waitHolds(t, ctx, c, "f", "one")
		_, events, err := c.WatchRecursive(ctx, "f")
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- c.Delete(ctx, "f", nil) }()
		<-h.sent
		require.NoError(t, other.Delete(ctx, "f", nil))
		ev := <-events
		require.True(t, topo.IsErrType(ev.Err, topo.NoNode), "the other Conn's deletion: %v", ev.Err)
		s.setStepping(true)
		n := s.pulledCount()
		_, err = other.Create(ctx, "f", []byte("two"))
		require.NoError(t, err)
		s.waitPulled(t, ctx, n) // the creation's event is held
		close(h.gate)           // the Cache's Delete removes "two"
		returned := false
		select {
		case err := <-done:
			require.NoError(t, err)
			returned = true
		case <-h.synced: // waiting for the events held
		}
		s.step(ctx) // the creation's event reaches memory
		ev = <-events
		require.Equal(t, "two", string(ev.Contents))
		if returned {
			b, _, info, err := c.GetWithInfo(ctx, "f")
			require.Truef(t, topo.IsErrType(err, topo.NoNode), "read %q (from memory: %v) after the Cache's Delete of it returned", b, info.FromMemory)
		}
		s.setStepping(false)
		if !returned {
			require.NoError(t, <-done)
		}
		_, _, err = c.Get(ctx, "f")
		require.True(t, topo.IsErrType(err, topo.NoNode), "read after the Cache's Delete: %v", err)
	}
	t.Run("memory", func(t *testing.T) { _, open := memoryStore(t); run(t, open) })
	t.Run("etcd", func(t *testing.T) { run(t, etcdOpen(t, etcdtest.Start(t), newRoot())) })
}

// heldPlainDelete is heldDelete over a steppedConn: no
// cache.SyncWatcher, so the Cache has no barrier.
type heldPlainDelete struct {
	*steppedConn
	gate, sent chan struct{}
}

func (h *heldPlainDelete) Delete(ctx context.Context, p string, v topo.Version) error {
	close(h.sent)
	<-h.gate
	return h.Conn.Delete(ctx, p, v)
}

// TestOwnDeleteNotSettledByAnotherDeleteWithoutBarrier is
// TestOwnDeleteNotSettledByAnotherDelete on a Conn with no barrier (as
// ZooKeeper and Consul are; memorytopo and etcd behind a wrapper that
// hides theirs): the other Conn's deletion event, delivered while the
// Cache's delete was in flight, took the place of the Cache's own, and a
// read once the creation's event reached memory answered the re-created
// value the Cache had deleted. Now the path is read from the store until a
// later deletion event of it or a relist (which the probe asks for: the
// creation's event may then never reach memory, the new watch's listing
// replacing it).
func TestOwnDeleteNotSettledByAnotherDeleteWithoutBarrier(t *testing.T) {
	run := func(t *testing.T, open func() topo.Conn) {
		ctx := testCtx(t)
		h := &heldPlainDelete{steppedConn: newStepped(open()), gate: make(chan struct{}), sent: make(chan struct{})}
		s := h.steppedConn
		resynced := make(chan struct{})
		var once sync.Once
		c := wrap(t, h, cache.Options{ProbeInterval: 50 * time.Millisecond,
			Hooks: cache.Hooks{OnResync: func(error) { once.Do(func() { close(resynced) }) }}})
		defer c.Close()
		other := open()
		defer other.Close()
		_, err := other.Create(ctx, "f", []byte("one"))
		require.NoError(t, err)
		waitHolds(t, ctx, c, "f", "one")
		_, events, err := c.WatchRecursive(ctx, "f")
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- c.Delete(ctx, "f", nil) }()
		<-h.sent
		require.NoError(t, other.Delete(ctx, "f", nil))
		ev := <-events
		require.True(t, topo.IsErrType(ev.Err, topo.NoNode), "the other Conn's deletion: %v", ev.Err)
		s.setStepping(true)
		n := s.pulledCount()
		_, err = other.Create(ctx, "f", []byte("two"))
		require.NoError(t, err)
		s.waitPulled(t, ctx, n) // the creation's event is held
		close(h.gate)           // the Cache's Delete removes "two"
		require.NoError(t, <-done)
		select {
		case s.steps <- struct{}{}: // the creation's event reaches memory
			select {
			case ev = <-events:
				require.Equal(t, "two", string(ev.Contents))
			case <-resynced:
			}
		case <-resynced: // a relist replaced the watch and its held event
		}
		b, _, info, err := c.GetWithInfo(ctx, "f")
		require.Truef(t, topo.IsErrType(err, topo.NoNode), "read %q (from memory: %v) after the Cache's Delete of it returned", b, info.FromMemory)
		s.setStepping(false)
		_, _, err = c.Get(ctx, "f")
		require.True(t, topo.IsErrType(err, topo.NoNode), "read after the Cache's Delete: %v", err)
		require.Eventually(t, func() bool { return cache.PendingWrites(c) == 0 }, 30*time.Second, time.Millisecond,
			"the Cache's deletion is never settled")
		_, _, info, err = c.GetWithInfo(ctx, "f")
		require.True(t, topo.IsErrType(err, topo.NoNode) && info.FromMemory, "read from memory once settled: %v", err)
	}
	t.Run("memory", func(t *testing.T) { _, open := memoryStore(t); run(t, open) })
	t.Run("etcd", func(t *testing.T) { run(t, etcdOpen(t, etcdtest.Start(t), newRoot())) })
	t.Run("zk", func(t *testing.T) { run(t, zkOpen(t, zktest.Start(t), newRoot(), false)) })
	t.Run("consul", func(t *testing.T) { run(t, consulOpen(t, consultest.Start(t), newRoot())) })
}

// TestOwnWriteNotSettledByAnEarlierLife: a Cache updates a file, deletes
// it and creates it again while its watch lags; the update's event, when
// it arrives, must not count as the re-creation's (on ZooKeeper the
// re-created file starts again at version 0, below the update's): a read
// between that event and the re-creation's returns the re-created value,
// never the update's. On every backend.
func TestOwnWriteNotSettledByAnEarlierLife(t *testing.T) {
	run := func(t *testing.T, open func() topo.Conn) {
		ctx := testCtx(t)
		s := newStepped(open())
		c := wrap(t, s, cache.Options{})
		defer c.Close()
		_, err := c.Create(ctx, "f", []byte("one"))
		require.NoError(t, err)
		waitHolds(t, ctx, c, "f", "one")
		_, events, err := c.WatchRecursive(ctx, "f")
		require.NoError(t, err)

		s.setStepping(true)
		n := s.pulledCount()
		_, err = c.Update(ctx, "f", []byte("two"), nil)
		require.NoError(t, err)
		s.waitPulled(t, ctx, n) // the update's event is held
		require.NoError(t, c.Delete(ctx, "f", nil))
		_, err = c.Create(ctx, "f", []byte("three"))
		require.NoError(t, err)

		s.step(ctx) // the update's event reaches memory
		select {
		case ev := <-events:
			require.NoError(t, ev.Err)
			require.Equal(t, "two", string(ev.Contents))
		case <-ctx.Done():
			t.Fatal("the update's event never reached the local watcher")
		}
		b, _, info, err := c.GetWithInfo(ctx, "f")
		require.NoError(t, err)
		require.Equal(t, "three", string(b), "a read after the Cache re-created f (from memory: %v)", info.FromMemory)

		s.setStepping(false)
		waitHolds(t, ctx, c, "f", "three")
	}
	t.Run("memory", func(t *testing.T) { _, open := memoryStore(t); run(t, open) })
	t.Run("etcd", func(t *testing.T) { run(t, etcdOpen(t, etcdtest.Start(t), newRoot())) })
	t.Run("zk", func(t *testing.T) { run(t, zkOpen(t, zktest.Start(t), newRoot(), false)) })
	t.Run("consul", func(t *testing.T) { run(t, consulOpen(t, consultest.Start(t), newRoot())) })
}

// TestOwnWriteNotSettledByAnEarlierOwn: an event of one of the Cache's
// own earlier writes of a path, arriving while the watch lags, does not
// settle a later write of the path (see ownDeleteAfterEarlierDelete and
// ownCreateAfterEarlierLife), on memorytopo, etcd, ZooKeeper and Consul:
// one store per backend, a root of its own per case.
func TestOwnWriteNotSettledByAnEarlierOwn(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, open func() topo.Conn)
	}{
		{"DeleteAfterDelete", ownDeleteAfterEarlierDelete},
		{"CreateAfterLife", ownCreateAfterEarlierLife},
	}
	backends := []struct {
		name  string
		start func(t *testing.T) func() func() topo.Conn // a store, then a Conn opener on a new root
	}{
		{"memory", func(t *testing.T) func() func() topo.Conn {
			return func() func() topo.Conn { _, open := memoryStore(t); return open }
		}},
		{"etcd", func(t *testing.T) func() func() topo.Conn {
			addr := etcdtest.Start(t)
			return func() func() topo.Conn { return etcdOpen(t, addr, newRoot()) }
		}},
		{"zk", func(t *testing.T) func() func() topo.Conn {
			addr := zktest.Start(t)
			return func() func() topo.Conn { return zkOpen(t, addr, newRoot(), false) }
		}},
		{"consul", func(t *testing.T) func() func() topo.Conn {
			addr := consultest.Start(t)
			return func() func() topo.Conn { return consulOpen(t, addr, newRoot()) }
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			opener := b.start(t)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, opener()) })
			}
		})
	}
}

// ownDeleteAfterEarlierDelete: a Cache deletes a file,
// creates it and deletes it again while its watch lags; the first
// deletion's event, when it arrives, must not count as the second's (a
// deletion event carries no version): once the creation's event has
// reached memory, a read still answers NoNode, never the re-created value
// the Cache itself deleted. On every backend; etcd and Consul deliver the
// creation's event, memorytopo and ZooKeeper may coalesce the short-lived
// file away (then there is no moment to check, and the file g, created
// last, ends the stepping).
func ownDeleteAfterEarlierDelete(t *testing.T, open func() topo.Conn) {
	ctx := testCtx(t)
	s := newStepped(open())
	c := wrap(t, s, cache.Options{})
	defer c.Close()
	_, err := c.Create(ctx, "f", []byte("one"))
	require.NoError(t, err)
	waitHolds(t, ctx, c, "f", "one")
	_, events, err := c.WatchRecursive(ctx, "")
	require.NoError(t, err)

	s.setStepping(true)
	n := s.pulledCount()
	require.NoError(t, c.Delete(ctx, "f", nil))
	s.waitPulled(t, ctx, n) // the first deletion's event is held
	_, err = c.Create(ctx, "f", []byte("two"))
	require.NoError(t, err)
	require.NoError(t, c.Delete(ctx, "f", nil))
	_, err = c.Create(ctx, "g", []byte("last"))
	require.NoError(t, err)

	s.step(ctx) // the first deletion's event reaches memory
	ev := <-events
	require.True(t, topo.IsErrType(ev.Err, topo.NoNode), "the first deletion: %v", ev.Err)
	for ev.Path != "g" {
		_, _, err = c.Get(ctx, "f")
		require.True(t, topo.IsErrType(err, topo.NoNode), "read after the Cache's second Delete: %v", err)
		s.step(ctx) // the next event reaches memory
		ev = <-events
		if ev.Path == "f" && ev.Err == nil {
			require.Equal(t, "two", string(ev.Contents))
			b, _, info, err := c.GetWithInfo(ctx, "f")
			require.Truef(t, topo.IsErrType(err, topo.NoNode), "read %q (from memory: %v) after the Cache's second Delete of it returned: %v", b, info.FromMemory, err)
		}
	}
	s.setStepping(false)
	_, _, err = c.Get(ctx, "f")
	require.True(t, topo.IsErrType(err, topo.NoNode), "read after the Cache's Deletes: %v", err)
}

// ownCreateAfterEarlierLife: a Cache creates a file, deletes
// it and creates it again with other contents while its watch lags; the
// first creation's event, when it arrives, must not count as the second's
// (on ZooKeeper both lives start at version 0): a read then answers the
// second creation's value, never the first's. On every backend.
func ownCreateAfterEarlierLife(t *testing.T, open func() topo.Conn) {
	ctx := testCtx(t)
	s := newStepped(open())
	c := wrap(t, s, cache.Options{})
	defer c.Close()
	_, events, err := c.WatchRecursive(ctx, "")
	require.NoError(t, err)

	s.setStepping(true)
	n := s.pulledCount()
	_, err = c.Create(ctx, "f", []byte("one"))
	require.NoError(t, err)
	s.waitPulled(t, ctx, n) // the first creation's event is held
	require.NoError(t, c.Delete(ctx, "f", nil))
	_, err = c.Create(ctx, "f", []byte("three"))
	require.NoError(t, err)

	s.step(ctx) // the first creation's event reaches memory
	ev := <-events
	require.NoError(t, ev.Err)
	require.Equal(t, "one", string(ev.Contents))
	b, _, info, err := c.GetWithInfo(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "three", string(b), "a read after the Cache re-created f (from memory: %v)", info.FromMemory)

	s.setStepping(false)
	waitHolds(t, ctx, c, "f", "three")
}
