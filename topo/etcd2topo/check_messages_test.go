package etcd2topo

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestCheckMessages: LockWithTTL's ttl and GetVersion's version are checked
// by backendkit (CheckLockWithTTL, CheckGetVersion), after the path and
// value and before Closed, with the same messages on every backend.
func TestCheckMessages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := openConn(t, serverAddr, newRoot())
	closed, err := NewConn(testOptions(serverAddr), newRoot())
	require.NoError(t, err)
	closed.Close()
	for _, c := range []topo.Conn{open, closed} {
		_, err := c.LockWithTTL(ctx, "d", "x", 0)
		require.ErrorIs(t, err, topo.InvalidArgument)
		require.ErrorContains(t, err, "lock TTL 0s is not positive")
		_, err = c.LockWithTTL(ctx, "d", strings.Repeat("x", topo.MaxValueSize+1), -time.Second)
		require.ErrorIs(t, err, topo.InvalidArgument)
		require.NotContains(t, err.Error(), "TTL", "the value is checked before the ttl")
		_, err = c.LockWithTTL(ctx, "d/locks", "x", 0)
		require.ErrorIs(t, err, topo.InvalidPath, "the path is checked before the ttl")
		_, err = c.GetVersion(ctx, "d/f", -1)
		require.ErrorIs(t, err, topo.InvalidArgument)
		require.ErrorContains(t, err, "version -1 is negative")
		_, err = c.GetVersion(ctx, "d//f", -1)
		require.ErrorIs(t, err, topo.InvalidPath, "the path is checked before the version")
	}
}

// TestResumeCheckOrder: ResumeLeaderParticipation checks, in backendkit's
// order, the context, then the election name and id, then the resume
// info, and only then whether the Conn is closed.
func TestResumeCheckOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cancelled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	open := openConn(t, serverAddr, newRoot())
	closed, err := NewConn(testOptions(serverAddr), newRoot())
	require.NoError(t, err)
	closed.Close()
	for _, c := range []topo.Conn{open, closed} {
		_, err := c.ResumeLeaderParticipation(cancelled, "e/locks", "id", []byte("not json"))
		require.ErrorIs(t, err, topo.Interrupted, "the context first")
		_, err = c.ResumeLeaderParticipation(ctx, "e/locks", "id", []byte("not json"))
		require.ErrorIs(t, err, topo.InvalidPath, "the name before the info")
		_, err = c.ResumeLeaderParticipation(ctx, "e", "", []byte("not json"))
		require.ErrorIs(t, err, topo.InvalidArgument, "the id before the info")
		_, err = c.ResumeLeaderParticipation(ctx, "e", "id", []byte("not json"))
		require.ErrorIs(t, err, topo.InvalidArgument, "the info before Closed")
	}
}
