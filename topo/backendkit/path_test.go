package backendkit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

func TestJoinPath(t *testing.T) {
	require.Equal(t, "a", backendkit.JoinPath("", "a"))
	require.Equal(t, "a/b", backendkit.JoinPath("a", "b"))
	require.Equal(t, "a/b/c", backendkit.JoinPath("a/b", "c"))
}

func TestCheckValue(t *testing.T) {
	require.NoError(t, backendkit.CheckValue("p", nil))
	require.NoError(t, backendkit.CheckValue("p", make([]byte, topo.MaxValueSize)))
	err := backendkit.CheckValue("p/q", make([]byte, topo.MaxValueSize+1))
	require.True(t, topo.IsErrType(err, topo.InvalidArgument))
	require.Contains(t, err.Error(), "p/q")
	require.Equal(t, 512*1024, topo.MaxValueSize)
}

func TestCheckContext(t *testing.T) {
	require.NoError(t, backendkit.CheckContext(context.Background(), "p"))
	require.NoError(t, backendkit.FromContext(context.Background(), "p"))

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, err := range []error{backendkit.CheckContext(cancelled, "p"), backendkit.FromContext(cancelled, "p")} {
		require.True(t, topo.IsErrType(err, topo.Interrupted), "cancelled: %v", err)
		require.True(t, errors.Is(err, context.Canceled), "the context's error is the cause")
		require.Contains(t, err.Error(), "p")
	}

	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, err := range []error{backendkit.CheckContext(expired, "q"), backendkit.FromContext(expired, "q")} {
		require.True(t, topo.IsErrType(err, topo.Timeout), "expired: %v", err)
		require.True(t, errors.Is(err, context.DeadlineExceeded))
		require.Contains(t, err.Error(), "q")
	}

	// A cause does not change the mapping.
	withCause, cancel3 := context.WithCancelCause(context.Background())
	cancel3(errors.New("shutting down"))
	require.True(t, topo.IsErrType(backendkit.FromContext(withCause, "r"), topo.Interrupted))
}

// TestBeginOrder: Begin checks the context first, the path second and
// closed last, and returns the checked path.
func TestBeginOrder(t *testing.T) {
	open := func() bool { return false }
	shut := func() bool { return true }
	p, err := backendkit.Begin(context.Background(), "/a/b", topo.CleanFilePath, open)
	require.NoError(t, err)
	require.Equal(t, "a/b", p)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = backendkit.Begin(cancelled, "", topo.CleanFilePath, shut)
	require.True(t, topo.IsErrType(err, topo.Interrupted), "the context first: %v", err)
	_, err = backendkit.Begin(context.Background(), "", topo.CleanFilePath, shut)
	require.True(t, topo.IsErrType(err, topo.InvalidPath), "the path before closed: %v", err)
	_, err = backendkit.Begin(context.Background(), "a", topo.CleanFilePath, shut)
	require.True(t, topo.IsErrType(err, topo.Closed), "closed last: %v", err)
}

// TestReady: a finished context first, then Closed, each naming the path.
func TestReady(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	open, closed := func() bool { return false }, func() bool { return true }
	require.NoError(t, backendkit.Ready(ctx, "a", open))
	require.True(t, topo.IsErrType(backendkit.Ready(ctx, "a", closed), topo.Closed))
	cancel()
	require.True(t, topo.IsErrType(backendkit.Ready(ctx, "a", closed), topo.Interrupted))
}

// TestMergeEntries: sorted by name, one entry a name, a directory when any
// is, Ephemeral only when all are.
func TestMergeEntries(t *testing.T) {
	got := backendkit.MergeEntries([]topo.DirEntry{
		{Name: "n", Type: topo.TypeFile, Ephemeral: true},
		{Name: "m", Type: topo.TypeFile},
		{Name: "n", Type: topo.TypeDirectory, Ephemeral: true},
		{Name: "n-b", Type: topo.TypeFile},
		{Name: "n", Type: topo.TypeDirectory},
		{Name: "l", Type: topo.TypeDirectory, Ephemeral: true},
	})
	require.Equal(t, []topo.DirEntry{
		{Name: "l", Type: topo.TypeDirectory, Ephemeral: true},
		{Name: "m", Type: topo.TypeFile},
		{Name: "n", Type: topo.TypeDirectory},
		{Name: "n-b", Type: topo.TypeFile},
	}, got)
}

// TestBeginVersioned: the checked path and version number, or the first
// failing check in Begin's order.
func TestBeginVersioned(t *testing.T) {
	open := func() bool { return false }
	check := func(p string) (string, int64, error) { return backendkit.CheckDelete(p, topo.NumericVersion(7)) }
	p, n, err := backendkit.BeginVersioned(context.Background(), "/a/b", check, open)
	require.NoError(t, err)
	require.Equal(t, "a/b", p)
	require.Equal(t, int64(7), n)
	_, _, err = backendkit.BeginVersioned(context.Background(), "a/../b", check, func() bool { return true })
	require.True(t, topo.IsErrType(err, topo.InvalidPath))
	_, _, err = backendkit.BeginVersioned(context.Background(), "a", check, func() bool { return true })
	require.True(t, topo.IsErrType(err, topo.Closed))
}

// TestNoHistory: the checks first, then NoImplementation naming the path.
func TestNoHistory(t *testing.T) {
	open := func() bool { return false }
	err := backendkit.NoHistory(context.Background(), "/a", 3, open, "no history")
	require.True(t, topo.IsErrType(err, topo.NoImplementation))
	require.ErrorContains(t, err, "no history")
	require.True(t, topo.IsErrType(backendkit.NoHistory(context.Background(), "a", -1, open, ""), topo.InvalidArgument))
	require.True(t, topo.IsErrType(backendkit.NoHistory(context.Background(), "a", 3, func() bool { return true }, ""), topo.Closed))
}
