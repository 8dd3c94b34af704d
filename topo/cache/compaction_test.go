package cache_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// compactor compacts an etcd to its current revision, on demand or in a
// loop.
type compactor struct {
	t     testing.TB
	cli   *clientv3.Client
	times atomic.Int64
}

func newCompactor(t testing.TB, endpoints string) *compactor {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoints}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return &compactor{t: t, cli: cli}
}

// compact compacts the store to its current revision. An error (the
// revision was compacted already by a concurrent call) is ignored unless
// the store cannot be read.
func (c *compactor) compact(ctx context.Context) {
	resp, err := c.cli.Get(ctx, "compactor-probe")
	if err != nil {
		if ctx.Err() == nil {
			c.t.Errorf("reading the revision: %v", err)
		}
		return
	}
	if _, err := c.cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err == nil {
		c.times.Add(1)
	}
}

// run compacts in a loop until the returned stop is called (stop waits
// for the loop to end).
func (c *compactor) run(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			c.compact(ctx)
		}
	})
	return func() { cancel(); wg.Wait() }
}

// count is the number of compactions that succeeded.
func (c *compactor) count() int64 { return c.times.Load() }

// TestCompactionDuringRelistEtcd: on a real etcd, while another Conn
// writes, the Cache's watch is cut again and again, and etcd is compacted
// to its current revision at the moment the Cache asks for its new
// WatchRecursive and continuously in between, so that the revisions the
// relists start from are compacted away; a local recursive watcher sees
// every file's last value and never a version twice, and memory ends
// equal to the store.
func TestCompactionDuringRelistEtcd(t *testing.T) {
	ctx := testCtx(t)
	addr := etcdtest.Start(t)
	open := etcdOpen(t, addr, newRoot())
	comp := newCompactor(t, addr)
	var resyncs atomic.Int64
	g := newGated(open())
	g.setBeforeWatch(func() { comp.compact(ctx) })
	c := wrap(t, g, cache.Options{WatcherBuffer: 100000, Hooks: cache.Hooks{OnResync: func(error) { resyncs.Add(1) }}})
	defer c.Close()
	_, ch, err := c.WatchRecursive(ctx, "r/")
	require.NoError(t, err)
	w := open()
	defer w.Close()
	stop := comp.run(ctx)
	const files, rounds = 5, 40
	for i := range rounds {
		for j := range files {
			_, err := w.Update(ctx, fmt.Sprintf("r/f%d", j), fmt.Appendf(nil, "v%d", i), nil)
			require.NoError(t, err)
		}
		if i%2 == 1 {
			require.NoError(t, w.Delete(ctx, "r/f0", nil))
		}
		if i%5 == 0 {
			g.breakWatches()
		}
	}
	stop()
	want, err := w.List(ctx, "r/")
	require.NoError(t, err)
	requireWatcherConverges(t, ctx, ch, want)
	require.Positive(t, resyncs.Load())
	require.Positive(t, comp.count())
	got, err := c.List(ctx, "r/")
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, cache.Healthy, c.State().Health)
}

// requireWatcherConverges reads a local recursive watcher until its files
// and versions are want's, failing on a version delivered twice and on an
// error other than a deletion's NoNode.
func requireWatcherConverges(t *testing.T, ctx context.Context, ch <-chan *topo.WatchDataRecursive, want []topo.KVInfo) {
	t.Helper()
	last := map[string]string{}
	seen := map[string]bool{}
	for {
		match := len(last) == len(want)
		for _, kv := range want {
			match = match && last[kv.Path] == kv.Version.String()
		}
		if match {
			return
		}
		select {
		case ev := <-ch:
			require.NotNil(t, ev)
			if ev.Err != nil {
				require.True(t, topo.IsErrType(ev.Err, topo.NoNode), "only deletions end no watch: %v", ev.Err)
				delete(last, ev.Path)
				continue
			}
			key := ev.Path + "@" + ev.Version.String()
			require.Falsef(t, seen[key], "%s delivered twice", key)
			seen[key] = true
			last[ev.Path] = ev.Version.String()
		case <-ctx.Done():
			t.Fatalf("the local watcher never converged: have %v, store %v", last, want)
		}
	}
}
