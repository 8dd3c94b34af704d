package backendkit_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

type testFence struct{ token int64 }

func (f *testFence) Token() int64                    { return f.token }
func (f *testFence) Done() <-chan struct{}           { return nil }
func (f *testFence) Check(ctx context.Context) error { return nil }

type wrapFence struct{ topo.Fence }

func (w wrapFence) Unwrap() topo.Fence { return w.Fence }

func TestCheckTxn(t *testing.T) {
	ctx := context.Background()
	f := &testFence{token: 7}
	ops, err := backendkit.CheckTxn(ctx, []topo.TxnOp{
		topo.IfHeld(f),
		topo.IfVersion("/a/b", topo.NumericVersion(3)),
		topo.IfAbsent("c"),
		topo.IfPresent("/d"),
		topo.CreateOp("e", []byte("x")),
		topo.UpdateOp("a/b", []byte("y"), nil),
		topo.DeleteOp("d", topo.NumericVersion(0)),
	})
	require.NoError(t, err)
	require.Len(t, ops, 7)
	require.Equal(t, topo.Fence(f), ops[0].Fence)
	require.Equal(t, "a/b", ops[1].Path)
	require.Equal(t, int64(3), ops[1].Version)
	require.Equal(t, "d", ops[3].Path)
	require.Equal(t, backendkit.AnyVersion, ops[5].Version)
	require.Equal(t, int64(0), ops[6].Version)
	for i, op := range ops {
		require.Equal(t, i, op.Index)
	}

	_, err = backendkit.CheckTxn(ctx, nil)
	require.ErrorIs(t, err, topo.InvalidArgument)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = backendkit.CheckTxn(cctx, []topo.TxnOp{topo.IfAbsent("a")})
	require.ErrorIs(t, err, topo.Interrupted)

	bad := []struct {
		name string
		ops  []topo.TxnOp
		idx  int
		code topo.ErrorCode
	}{
		{"nil fence", []topo.TxnOp{topo.IfAbsent("a"), topo.IfHeld(nil)}, 1, topo.InvalidArgument},
		{"if-version without version", []topo.TxnOp{topo.IfVersion("a", nil)}, 0, topo.InvalidArgument},
		{"negative version", []topo.TxnOp{topo.UpdateOp("a", nil, topo.NumericVersion(-2))}, 0, topo.InvalidArgument},
		{"dotdot", []topo.TxnOp{topo.IfAbsent("a"), topo.CreateOp("a/../b", nil)}, 1, topo.InvalidPath},
		{"empty path", []topo.TxnOp{topo.DeleteOp("", nil)}, 0, topo.InvalidPath},
		{"nul", []topo.TxnOp{topo.IfPresent("a\x00b")}, 0, topo.InvalidPath},
		{"reserved write", []topo.TxnOp{topo.CreateOp("d/locks/x", nil)}, 0, topo.InvalidPath},
		{"reserved condition", []topo.TxnOp{topo.IfAbsent("elections/x")}, 0, topo.InvalidPath},
		{"oversized", []topo.TxnOp{topo.UpdateOp("a", make([]byte, topo.MaxValueSize+1), nil)}, 0, topo.InvalidArgument},
		{"duplicate write", []topo.TxnOp{topo.CreateOp("a", nil), topo.IfAbsent("b"), topo.DeleteOp("/a", nil)}, 2, topo.InvalidArgument},
		{"unknown kind", []topo.TxnOp{{Kind: 99, Path: "a"}}, 0, topo.InvalidArgument},
	}
	for _, tc := range bad {
		_, err := backendkit.CheckTxn(ctx, tc.ops)
		var te *topo.TxnError
		require.Truef(t, errors.As(err, &te), "%s: want *TxnError, got %v", tc.name, err)
		require.Equal(t, tc.idx, te.Index, tc.name)
		require.ErrorIs(t, err, tc.code, tc.name)
		require.True(t, strings.HasPrefix(err.Error(), "transaction op "), tc.name)
	}

	// A condition and a write on one path are fine.
	_, err = backendkit.CheckTxn(ctx, []topo.TxnOp{topo.IfVersion("a", topo.NumericVersion(1)), topo.DeleteOp("a", nil)})
	require.NoError(t, err)
}

func TestFenceAs(t *testing.T) {
	f := &testFence{token: 1}
	got, ok := backendkit.FenceAs[*testFence](wrapFence{wrapFence{f}})
	require.True(t, ok)
	require.Same(t, f, got)
	_, ok = backendkit.FenceAs[*testFence](wrapFence{nil})
	require.False(t, ok)
	_, ok = backendkit.FenceAs[*testFence](nil)
	require.False(t, ok)
}

func TestTxnOpError(t *testing.T) {
	require.NoError(t, backendkit.TxnOpError(backendkit.TxnOp{Index: 2}, nil))
	cause := backendkit.Wrap(topo.InvalidArgument, "", errors.New("the Fence was issued by another store"))
	err := backendkit.TxnOpError(backendkit.TxnOp{Index: 2, Kind: topo.TxnIfHeld}, cause)
	var te *topo.TxnError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 2, te.Index)
	require.Equal(t, topo.TxnIfHeld, te.Kind)
	require.ErrorIs(t, err, topo.InvalidArgument)
	require.ErrorIs(t, err, cause)

	err = backendkit.TxnFailed(backendkit.TxnOp{Index: 1, Kind: topo.TxnUpdate, Path: "a"}, topo.BadVersion)
	require.ErrorAs(t, err, &te)
	require.Equal(t, 1, te.Index)
	require.ErrorIs(t, err, &topo.Error{Code: topo.BadVersion, Path: "a"})
}

// TestConditionsFirst: the conditions in op order, then the writes in op
// order, without the skipped ops.
func TestConditionsFirst(t *testing.T) {
	ops := []backendkit.TxnOp{
		{Kind: topo.TxnCreate}, {Kind: topo.TxnIfVersion}, {Kind: topo.TxnDelete},
		{Kind: topo.TxnIfHeld}, {Kind: topo.TxnUpdate}, {Kind: topo.TxnIfAbsent},
	}
	require.Equal(t, []int{1, 3, 5, 0, 2, 4}, backendkit.ConditionsFirst(ops, nil))
	require.Equal(t, []int{1, 5, 0, 4}, backendkit.ConditionsFirst(ops, func(i int) bool { return i == 2 || i == 3 }))
}
