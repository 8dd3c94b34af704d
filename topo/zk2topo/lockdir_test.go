package zk2topo

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// TestLockOfADirectoryBeingRemoved: Lock and TryLock of a directory whose
// last file just went, caught before its empty znode is removed (between
// a Delete and its removal of the parents it left empty, or within a
// released lock's clean-up), fail with NoNode ("holds no file"), as they
// do once it is gone; not with InvalidArgument ("is a file"), although an
// empty znode without children reads as an empty file: this one had
// children, which an empty file never has. An empty file is still
// refused as a file. (Seen in CI: the clustermanager example's leader
// probed a member's directory while the member deregistered, took the
// InvalidArgument for a permanent error, and stopped leading.)
func TestLockOfADirectoryBeingRemoved(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := openConn(t, []string{testServer}, freshRoot(t))
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	zr, _, err := zk.Connect([]string{testServer}, testSessionTimeout, zk.WithLogInfo(false))
	require.NoError(t, err)
	t.Cleanup(zr.Close)
	// The state a removal passes through: d empty, without children.
	require.NoError(t, zr.Delete(c.zkPath("d/f"), -1))

	var nf *backendkit.LockNeedsFilesError
	_, err = c.TryLock(ctx, "d", "probe")
	require.True(t, topo.IsErrType(err, topo.NoNode), "TryLock: %v", err)
	require.True(t, errors.As(err, &nf) && !nf.IsFile, "TryLock: %v", err)
	_, err = c.Lock(ctx, "d", "probe")
	require.True(t, topo.IsErrType(err, topo.NoNode), "Lock: %v", err)

	_, err = c.Create(ctx, "e", nil)
	require.NoError(t, err)
	_, err = c.TryLock(ctx, "e", "probe")
	require.True(t, topo.IsErrType(err, topo.InvalidArgument), "TryLock of an empty file: %v", err)
	require.True(t, errors.As(err, &nf) && nf.IsFile, "TryLock of an empty file: %v", err)
}
