package consultopo

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestWaiterHonoursLockDelay: when the holder's session is invalidated,
// Consul deletes the lock key and refuses to lock it again for the
// session's lock-delay; a Lock waiting on another Conn sees the key gone,
// is refused, retries and takes the lock once the delay is over, with its
// own session.
func TestWaiterHonoursLockDelay(t *testing.T) {
	root := testRoot(t)
	holder, waiter := newTestConn(t, root), newTestConn(t, root)
	raw := rawClient(t)
	ctx := t.Context()
	_, err := holder.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l, err := holder.Lock(ctx, "d", "holder")
	require.NoError(t, err)

	type result struct {
		sess string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		l2, err := waiter.Lock(ctx, "d", "waiter")
		if err != nil {
			done <- result{err: err}
			return
		}
		done <- result{sess: fenceSession(t, l2).id}
	}()
	require.Eventually(t, func() bool { return len(waiter.sessionIDs()) > 0 }, waitFor, tick)
	for _, id := range holder.sessionIDs() {
		_, err := raw.Session().Destroy(id, nil)
		require.NoError(t, err)
	}
	var got result
	select {
	case got = <-done:
	case <-time.After(waitFor):
		t.Fatal("the waiter did not get the lock after the holder's session was destroyed")
	}
	require.NoError(t, got.err)
	pair, _, err := raw.KV().Get(root+"/d/Lock", nil)
	require.NoError(t, err)
	require.NotNil(t, pair)
	require.Equal(t, "waiter", string(pair.Value))
	require.Equal(t, got.sess, pair.Session)
	requireCode(t, l.Check(ctx), topo.LockLost)
}
