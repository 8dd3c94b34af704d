package etcd2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// TestWatchFromRevisionEndedByClose: Close ends a running history watch
// with Interrupted, as it ends Watch, and a history watch on a closed
// Conn fails with Closed: neither is Unavailable, which a caller (topoctl
// watch --rev) retries for ever.
func TestWatchFromRevisionEndedByClose(t *testing.T) {
	addr := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := openConn(t, addr, "/hist")
	v, err := c.Create(ctx, "d/f", []byte("1"))
	require.NoError(t, err)
	rev := int64(v.(topo.NumericVersion))

	seen := make(chan struct{})
	ended := make(chan error, 1)
	go func() {
		_, err := c.WatchFromRevision(ctx, "d/f", false, rev, func(backendkit.RevisionEvent) error {
			close(seen)
			return nil
		})
		ended <- err
	}()
	select {
	case <-seen: // the watch runs: it replayed the create
	case err := <-ended:
		t.Fatalf("the watch ended before its first event: %v", err)
	}
	c.Close()
	select {
	case err := <-ended:
		require.ErrorIs(t, err, topo.Interrupted)
	case <-ctx.Done():
		t.Fatal("Close did not end the history watch")
	}
	_, err = c.WatchFromRevision(ctx, "d/f", false, rev, func(backendkit.RevisionEvent) error { return nil })
	require.ErrorIs(t, err, topo.Closed)
}
