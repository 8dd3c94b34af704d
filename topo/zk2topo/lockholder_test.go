package zk2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// TestLockHolderWithEmptyContents: the holder is the lowest entry even
// when it holds empty contents; a waiter's description is never named
// as the holder's.
func TestLockHolderWithEmptyContents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "")
	require.NoError(t, err)
	w := openConn(t, []string{testServer}, root)
	got := make(chan error, 1)
	go func() {
		wl, err := w.Lock(ctx, "d", "waiter")
		if err == nil {
			err = wl.Unlock(ctx)
		}
		got <- err
	}()
	require.Eventually(t, func() bool {
		es, err := driver{c}.Describe(ctx, claims.Queue{Path: "d"})
		return err == nil && len(es) == 2
	}, time.Minute, 5*time.Millisecond)
	h, err := c.LockHolder(ctx, "d")
	require.NoError(t, err)
	require.Empty(t, h, "the waiter was named as the holder")
	require.NoError(t, l.Unlock(ctx))
	require.NoError(t, <-got)
	_, err = c.LockHolder(ctx, "d")
	require.True(t, topo.IsErrType(err, topo.NoNode), "%v", err)
}
