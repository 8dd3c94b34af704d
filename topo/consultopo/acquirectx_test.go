package consultopo

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/claims"
)

// TestAcquireEndedContextSendsNothing: Acquire called with a context
// that has ended (the claim withdrawn, its Lock given up) sends no
// transaction: its transaction is detached from the caller's context, so
// one sent then would take the key for a claim nobody waits for any more.
// The entry heads its queue and the key is free, so an Acquire that sent
// would take it at once. Before, Acquire sent it and returned the key
// granted.
func TestAcquireEndedContextSendsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := testRoot(t)
	c, h := newTestConn(t, root), newTestConn(t, root)
	_, err := h.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	held, err := h.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	d := driver{c}
	q := claims.Queue{Path: "d"}
	e, v, err := d.Create(ctx, q, "waiter", claims.CreateOptions{RequireFiles: true})
	require.NoError(t, err)
	require.False(t, e.Granted, "the waiter's entry was granted at once: nothing tested")
	t.Cleanup(func() { _ = d.Delete(context.Background(), q, v, e) })
	require.NoError(t, held.Unlock(ctx))

	ended, end := context.WithCancel(ctx)
	end()
	_, err = d.Acquire(ended, q, v, e)
	require.ErrorIs(t, err, context.Canceled, "Acquire with an ended context")
	pair, _, err := rawClient(t).KV().Get(d.storeKey(q), &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.Truef(t, pair == nil || pair.Session == "", "Acquire with an ended context took the key: %+v", pair)
	entries, _, err := rawClient(t).KV().Keys(d.queuePrefix(q), "", &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.Contains(t, entries, e.Key, "the waiter's entry left its queue")
}
