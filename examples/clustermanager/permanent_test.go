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
