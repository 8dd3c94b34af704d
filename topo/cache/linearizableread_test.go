package cache_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// TestConsistentReadsOnLaggingFollowerZooKeeper: on a 3-node ensemble, a
// Cache over a Conn with default options (no LinearizableReads) on a
// follower that is paused while another Conn, on the leader, updates a
// file 100 times answers a Consistent Get and List started after the last
// update returned with that update, although the follower resumes with
// the updates still to apply.
func TestConsistentReadsOnLaggingFollowerZooKeeper(t *testing.T) {
	e := zktest.StartEnsemble(t, 3)
	leader := e.WaitLeader(time.Minute)
	follower := (leader + 1) % 3
	root := newRoot()
	open := func(i int) topo.Conn {
		c, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{e.Addr(i)}, SessionTimeout: 20 * time.Second, DialTimeout: time.Minute}, root)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	writer, reader := open(leader), open(follower)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := writer.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	c, err := cache.New(reader, "d/", cache.Options{Mode: cache.Consistent})
	require.NoError(t, err)
	defer c.Close()

	stale := 0
	want := ""
	for i := 1; i <= 6; i++ {
		require.NoError(t, e.Pause(follower))
		for j := range 100 {
			want = fmt.Sprint(i, "-", j)
			if _, err := writer.Update(ctx, "d/f", []byte(want), nil); err != nil {
				_ = e.Resume(follower)
				require.NoError(t, err)
			}
		}
		type answer struct {
			got string
			err error
		}
		answers := make(chan answer, 1)
		go func() {
			if i%2 == 0 {
				kvs, err := c.List(ctx, "d/")
				if err == nil {
					answers <- answer{got: string(kvs[0].Value)}
					return
				}
				answers <- answer{err: err}
				return
			}
			got, _, err := c.Get(ctx, "d/f")
			answers <- answer{got: string(got), err: err}
		}()
		require.NoError(t, e.Resume(follower))
		a := <-answers
		require.NoError(t, a.err)
		if a.got != want {
			stale++
		}
	}
	require.Zero(t, stale, "Consistent reads that missed an acknowledged update, out of 6")
}

// markerConn records, per read method, whether its calls were under
// topo.WithLinearizableRead (but for the Cache's probes, which run on
// their own clock).
type markerConn struct {
	topo.Conn
	mu     sync.Mutex
	marked map[string][]bool
}

func (m *markerConn) note(ctx context.Context, method, p string) {
	if strings.Contains(p, "~topokit-cache-probe") {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.marked[method] = append(m.marked[method], topo.LinearizableRead(ctx))
}

// take returns what was recorded since the last take.
func (m *markerConn) take() map[string][]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	got := m.marked
	m.marked = map[string][]bool{}
	return got
}

func (m *markerConn) Get(ctx context.Context, p string) ([]byte, topo.Version, error) {
	m.note(ctx, "Get", p)
	return m.Conn.Get(ctx, p)
}

func (m *markerConn) List(ctx context.Context, p string) ([]topo.KVInfo, error) {
	m.note(ctx, "List", p)
	return m.Conn.List(ctx, p)
}

func (m *markerConn) ListDir(ctx context.Context, p string, full bool) ([]topo.DirEntry, error) {
	m.note(ctx, "ListDir", p)
	return m.Conn.ListDir(ctx, p, full)
}

// TestConsistentReadsAskForLinearizableReads: the reads a Cache sends to
// its Conn in Consistent mode carry topo.WithLinearizableRead (so that
// they are linearizable whatever the Conn's options), also outside the
// prefix; those in Bypass mode and in Cached mode do not.
func TestConsistentReadsAskForLinearizableReads(t *testing.T) {
	ctx := testCtx(t)
	_, open := memoryStore(t)
	raw := open()
	defer raw.Close()
	for _, p := range []string{"c/a", "other"} {
		_, err := raw.Create(ctx, p, []byte(p))
		require.NoError(t, err)
	}
	m := &markerConn{Conn: open(), marked: map[string][]bool{}}
	c, err := cache.New(m, "c/", cache.Options{})
	require.NoError(t, err)
	defer c.Close()
	reads := func(ctx context.Context, p string) {
		_, _, err := c.Get(ctx, p+"a")
		require.NoError(t, err)
		_, err = c.List(ctx, p)
		require.NoError(t, err)
		_, err = c.ListDir(ctx, p, false)
		require.NoError(t, err)
	}
	reads(cache.WithMode(ctx, cache.Consistent), "c/")
	require.Equal(t, map[string][]bool{"Get": {true}, "List": {true}, "ListDir": {true}}, m.take(), "Consistent (markerConn is no SyncWatcher: Get reads through)")
	reads(cache.WithMode(ctx, cache.Bypass), "c/")
	require.Equal(t, map[string][]bool{"Get": {false}, "List": {false}, "ListDir": {false}}, m.take(), "Bypass")
	reads(ctx, "c/")
	require.Equal(t, map[string][]bool{"ListDir": {false}}, m.take(), "Cached")

	_, _, err = c.Get(ctx, "other")
	require.NoError(t, err)
	require.Equal(t, map[string][]bool{"Get": {false}}, m.take(), "Cached, outside the prefix")
	_, _, err = c.Get(cache.WithMode(ctx, cache.Consistent), "other")
	require.NoError(t, err)
	require.Equal(t, map[string][]bool{"Get": {true}}, m.take(), "Consistent, outside the prefix")
}
