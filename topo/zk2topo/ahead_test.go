package zk2topo

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/claims"
)

// TestAheadFindsPredecessors: Ahead, from one children read in the
// server's order (not sorted), returns the two entries just ahead of each
// entry of a queue, oldest first, and none for its head; other children
// (a nested lock's directory) are not entries.
func TestAheadFindsPredecessors(t *testing.T) {
	ctx := context.Background()
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	_, err := c.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	q := claims.Queue{Path: "d"}
	parent := driver{c}.parent(q)
	_, err = raw.Create(parent, nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, err = raw.Create(parent+"/sub", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	var nodes []string
	for range 40 {
		n, err := raw.Create(parent+"/", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
		require.NoError(t, err)
		nodes = append(nodes, n)
	}
	for i, n := range nodes {
		ahead, in, err := driver{c}.Ahead(ctx, q, claims.Entry{Key: n}, 2)
		require.NoError(t, err)
		require.True(t, in)
		var want []claims.Entry
		for _, p := range nodes[max(0, i-2):i] {
			want = append(want, claims.Entry{Key: p})
		}
		require.Equal(t, len(want), len(ahead), "entry %d", i)
		for j := range want {
			require.Equal(t, want[j].Key, ahead[j].Key, "entry %d", i)
		}
	}
}

// TestLookaheadKeepsOrder: a lock waiter W behind P behind X, all behind
// the holder H, reads the queue when X goes (its lookahead); X gave up,
// so that read shows H besides P, and when P gives up too, W does not
// take the lock while H holds it: it waits for H, and locks once H
// unlocks.
func TestLookaheadKeepsOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	cw := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	_, err := c.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	h, err := c.Lock(ctx, "d", "h")
	require.NoError(t, err)
	locksZp := driver{c}.parent(claims.Queue{Path: "d"})
	queued := func(n int) {
		require.Eventually(t, func() bool {
			kids, _, err := raw.Children(locksZp)
			return err == nil && len(kids) == n
		}, time.Minute, time.Millisecond)
	}
	waiter := func(conn *Conn, wctx context.Context, id string) <-chan error {
		out := make(chan error, 1)
		go func() {
			l, err := conn.Lock(wctx, "d", id)
			if err == nil {
				err = l.Unlock(ctx)
			}
			out <- err
		}()
		return out
	}
	xctx, xcancel := context.WithCancel(ctx)
	x := waiter(c, xctx, "x")
	queued(2)
	pctx, pcancel := context.WithCancel(ctx)
	p := waiter(c, pctx, "p")
	queued(3)
	w := waiter(cw, ctx, "w")
	queued(4)
	xcancel()
	require.Error(t, <-x)
	queued(3)
	pcancel()
	require.Error(t, <-p)
	awaitWatchedFirst(ctx, t, cw, entryNode(h), w, "the waiter took the lock while it was held")
	require.NoError(t, h.Unlock(ctx))
	require.NoError(t, <-w)
}
