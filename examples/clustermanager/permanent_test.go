package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestRunStopsOnPermissionDenied: a store that refuses the manager's
// writes for lack of permission ends Run with PermissionDenied instead of
// retrying every few milliseconds forever.
func TestRunStopsOnPermissionDenied(t *testing.T) {
	f := memorytopo.NewFactory()
	conn, err := f.Create(topo.GlobalCell, "denied", "/global")
	require.NoError(t, err)
	defer conn.Close()
	f.AddFault(memorytopo.Fault{Op: memorytopo.OpUpdate, Err: topo.PermissionDenied})
	f.AddFault(memorytopo.Fault{Op: memorytopo.OpCreate, Err: topo.PermissionDenied})

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	m, err := NewManager(ctx, conn, Config{ID: "m1", Addr: "127.0.0.1:1", Resync: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, topo.PermissionDenied)
	case <-time.After(10 * time.Second):
		cancel()
		<-done
		require.FailNow(t, "Run kept retrying refused writes")
	}
}

// TestLeaderStopsOnPermissionDenied: a leader whose reconciliation is
// refused for lack of permission (here the lock on clustermanager) ends
// its term and Run with PermissionDenied instead of retrying every Resync.
func TestLeaderStopsOnPermissionDenied(t *testing.T) {
	f := memorytopo.NewFactory()
	conn, err := f.Create(topo.GlobalCell, "denied-leader", "/global")
	require.NoError(t, err)
	defer conn.Close()
	f.AddFault(memorytopo.Fault{Op: memorytopo.OpLock, Path: baseDir, Err: topo.PermissionDenied})

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	m, err := NewManager(ctx, conn, Config{ID: "m1", Addr: "127.0.0.1:1", Resync: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, topo.PermissionDenied)
		// The refusal is the reconciliation's: only the lock on baseDir
		// is refused. (Counting Lock calls raced: Run may end before the
		// concurrent registration reaches its own Lock.)
		var te *topo.Error
		require.ErrorAs(t, err, &te)
		require.Equal(t, baseDir, te.Path, "the leader never tried to reconcile")
	case <-time.After(10 * time.Second):
		cancel()
		<-done
		require.FailNow(t, "the leader kept retrying a refused reconciliation")
	}
}

// TestLeaderSkipsAStrayMemberEntry: a file another tool wrote among the
// members' directories (clustermanager/members/stray) is no member: the
// leader's liveness probe of it fails InvalidArgument ("is a file"),
// which is that entry's problem, not the store's. The leader skips it and
// reconciles the live members, instead of ending its term and Run.
func TestLeaderSkipsAStrayMemberEntry(t *testing.T) {
	f := memorytopo.NewFactory()
	conn, err := f.Create(topo.GlobalCell, "stray", "/global")
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err = conn.Create(ctx, memberDir("stray"), []byte("not a member"))
	require.NoError(t, err)

	m, err := NewManager(ctx, conn, Config{ID: "m1", Addr: "127.0.0.1:1", Resync: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			require.FailNow(t, "Run ended", "%v", err)
		default:
		}
		_, _, err := conn.Get(ctx, assignmentPath("m1"))
		return err == nil
	}, 20*time.Second, 10*time.Millisecond, "the leader never assigned m1")
	_, _, err = conn.Get(ctx, memberDir("stray"))
	require.NoError(t, err, "the stray file is left alone")
	cancel()
	<-done
}
