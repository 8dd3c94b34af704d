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

func TestMapError(t *testing.T) {
	storeErr := errors.New("store said no")
	classified := 0
	classify := func(err error) topo.ErrorCode {
		classified++
		require.Same(t, storeErr, err, "classify sees the store's error")
		return topo.NoNode
	}
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	expired, cancel2 := context.WithDeadline(live, time.Now().Add(-time.Second))
	defer cancel2()

	require.NoError(t, backendkit.MapError(live, nil, "a", true, classify), "nil stays nil")

	typed := topo.NewError(topo.BadVersion, "x")
	wrapped := errors.Join(errors.New("context"), typed)
	require.Same(t, typed, backendkit.MapError(cancelled, typed, "a", true, classify), "an *Error passes through")
	require.Equal(t, wrapped, backendkit.MapError(cancelled, wrapped, "a", true, classify), "so does an error wrapping one")

	for _, tc := range []struct {
		name   string
		ctx    context.Context
		closed bool
		want   topo.ErrorCode
	}{
		{"live", live, false, topo.NoNode},
		{"nil ctx", nil, false, topo.NoNode},
		{"closed", live, true, topo.Closed},
		{"nil ctx, closed", nil, true, topo.Closed},
		{"cancelled wins over closed", cancelled, true, topo.Interrupted},
		{"deadline wins over closed", expired, true, topo.Timeout},
		{"cancelled", cancelled, false, topo.Interrupted},
		{"deadline", expired, false, topo.Timeout},
	} {
		err := backendkit.MapError(tc.ctx, storeErr, "a/b", tc.closed, classify)
		var te *topo.Error
		require.ErrorAs(t, err, &te, tc.name)
		require.Equal(t, tc.want, te.Code, tc.name)
		require.Equal(t, "a/b", te.Path, tc.name)
		require.ErrorIs(t, err, storeErr, "%s: the store's error is wrapped", tc.name)
	}
	require.Equal(t, 2, classified, "classify runs only when neither ctx nor closed decides")
}
