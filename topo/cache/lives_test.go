package cache_test

import (
	"context"
	"sync"
	"testing"

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
	return init, out, nil
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
