package etcd2topo

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// TestGivenUpLeaseSaysSo: a Lock whose enqueue is in flight when the Conn
// gives its shared lease up (cut off from etcd, no renewal acknowledged
// within the lease's TTL) fails with LockLost saying that this Conn gave
// the lease up, not with etcd's "requested lease not found", which etcd
// never sent.
func TestGivenUpLeaseSaysSo(t *testing.T) {
	ctx := testCtx(t)
	px, err := faultproxy.New(serverAddr)
	require.NoError(t, err)
	t.Cleanup(func() {
		px.Heal()
		_ = px.Close()
	})
	opts := testOptions(px.Addr())
	opts.LockTTL = 3 * time.Second
	c, err := NewConn(opts, newRoot())
	require.NoError(t, err)
	t.Cleanup(c.Close)
	for _, f := range []string{"a/f", "b/f"} {
		_, err = c.Create(ctx, f, []byte("x"))
		require.NoError(t, err)
	}
	// The first lock grants the shared lease the second one's enqueue uses.
	_, err = c.Lock(ctx, "a", "first")
	require.NoError(t, err)
	px.Blackhole()
	_, err = c.Lock(ctx, "b", "second")
	require.ErrorIs(t, err, topo.LockLost)
	require.NotContains(t, err.Error(), "requested lease not found")
	require.Contains(t, err.Error(), "gave its lease up")
}
