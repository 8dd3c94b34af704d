package topo_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

var allCodes = []topo.ErrorCode{
	topo.NodeExists, topo.NoNode, topo.NodeNotEmpty, topo.Timeout, topo.Interrupted,
	topo.BadVersion, topo.PartialResult, topo.NoUpdateNeeded, topo.NoImplementation,
	topo.ResourceExhausted, topo.InvalidPath, topo.InvalidArgument, topo.Closed,
	topo.Compacted, topo.LockLost, topo.Unavailable, topo.PermissionDenied, topo.ReadOnly,
}

func TestErrorCodesAreDistinctErrors(t *testing.T) {
	seen := map[string]topo.ErrorCode{}
	for _, c := range allCodes {
		var err error = c // an ErrorCode is an error
		msg := err.Error()
		require.NotEmpty(t, msg)
		require.Equal(t, c.String(), msg)
		require.NotContains(t, msg, "unknown", "code %d has no name", int(c))
		other, dup := seen[msg]
		require.Falsef(t, dup, "codes %d and %d share the name %q", int(c), int(other), msg)
		seen[msg] = c
	}
	require.Contains(t, topo.ErrorCode(0).String(), "unknown")
	require.Contains(t, topo.ErrorCode(9999).String(), "9999")
	require.Contains(t, topo.ErrorCode(-1).String(), "-1")
}

func TestErrorIsAndAs(t *testing.T) {
	for _, code := range allCodes {
		t.Run(code.String(), func(t *testing.T) {
			err := topo.NewError(code, "a/b")
			require.True(t, errors.Is(err, code))
			require.True(t, topo.IsErrType(err, code))
			require.Equal(t, code, topo.CodeOf(err))
			for _, other := range allCodes {
				if other != code {
					require.Falsef(t, errors.Is(err, other), "%v matches %v", err, other)
					require.False(t, topo.IsErrType(err, other))
				}
			}

			// Wrapped by fmt.Errorf, still found.
			wrapped := fmt.Errorf("while doing things: %w", err)
			require.True(t, errors.Is(wrapped, code))
			require.True(t, topo.IsErrType(wrapped, code))
			require.Equal(t, code, topo.CodeOf(wrapped))
			var te *topo.Error
			require.True(t, errors.As(wrapped, &te))
			require.Equal(t, code, te.Code)
			require.Equal(t, "a/b", te.Path)

			// An *Error target matches by code, and by path when it has one.
			require.True(t, errors.Is(err, &topo.Error{Code: code}))
			require.True(t, errors.Is(err, &topo.Error{Code: code, Path: "a/b"}))
			require.False(t, errors.Is(err, &topo.Error{Code: code, Path: "other"}))
		})
	}
}

func TestErrorMessageNamesPathAndCause(t *testing.T) {
	err := topo.NewError(topo.NoNode, "cells/zone1/CellInfo")
	require.Equal(t, "node doesn't exist: cells/zone1/CellInfo", err.Error())

	cause := errors.New("zk: node does not exist")
	err = backendkit.Wrap(topo.NoNode, "a/b", cause)
	require.Contains(t, err.Error(), "a/b")
	require.Contains(t, err.Error(), cause.Error())
	require.Contains(t, err.Error(), topo.NoNode.String())
	require.True(t, errors.Is(err, cause), "Wrap keeps the cause for errors.Is")
	require.Same(t, cause, errors.Unwrap(err))

	// No path: just the code.
	require.Equal(t, topo.Closed.String(), topo.NewError(topo.Closed, "").Error())
}

func TestWrap(t *testing.T) {
	require.NoError(t, backendkit.Wrap(topo.NoNode, "a", nil), "Wrap(nil) is nil")
	err := backendkit.Wrap(topo.Unavailable, "a", io.ErrUnexpectedEOF)
	require.True(t, topo.IsErrType(err, topo.Unavailable))
	require.True(t, errors.Is(err, io.ErrUnexpectedEOF))
	var te *topo.Error
	require.True(t, errors.As(err, &te))
	require.Equal(t, io.ErrUnexpectedEOF, te.Err)
	require.Equal(t, io.ErrUnexpectedEOF, te.Unwrap())
}

func TestIsErrTypeAndCodeOfOnOtherErrors(t *testing.T) {
	require.False(t, topo.IsErrType(nil, topo.NoNode))
	require.False(t, topo.IsErrType(errors.New("no node"), topo.NoNode))
	require.False(t, topo.IsErrType(context.Canceled, topo.Interrupted))
	require.Equal(t, topo.ErrorCode(0), topo.CodeOf(nil))
	require.Equal(t, topo.ErrorCode(0), topo.CodeOf(errors.New("plain")))

	// A bare code (used as a sentinel) is found too.
	require.True(t, topo.IsErrType(topo.BadVersion, topo.BadVersion))
	require.Equal(t, topo.BadVersion, topo.CodeOf(fmt.Errorf("x: %w", topo.BadVersion)))

	// The outermost *Error decides.
	inner := topo.NewError(topo.NoNode, "inner")
	outer := backendkit.Wrap(topo.Unavailable, "outer", inner)
	require.Equal(t, topo.Unavailable, topo.CodeOf(outer))
	require.True(t, topo.IsErrType(outer, topo.Unavailable))
	require.True(t, topo.IsErrType(outer, topo.NoNode), "IsErrType looks through the chain")
}

func TestJoinedErrors(t *testing.T) {
	err := errors.Join(errors.New("first"), topo.NewError(topo.LockLost, "d"))
	assert.True(t, topo.IsErrType(err, topo.LockLost))
	assert.Equal(t, topo.LockLost, topo.CodeOf(err))
}

// An UnreachableError says what its Err says, or names its addresses; the
// codes and sentinels around and under it stay visible.
func TestUnreachableError(t *testing.T) {
	cause := errors.New("dial tcp: i/o timeout")
	err := &topo.Error{Code: topo.Unavailable, Path: "a:1,b:2", Err: &topo.UnreachableError{Addrs: []string{"a:1", "b:2"}, Err: fmt.Errorf("no member answered at a:1,b:2: %w", cause)}}
	assert.Equal(t, "unavailable: a:1,b:2: no member answered at a:1,b:2: dial tcp: i/o timeout", err.Error())
	var ue *topo.UnreachableError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, []string{"a:1", "b:2"}, ue.Addrs)
	assert.ErrorIs(t, err, cause)
	assert.ErrorIs(t, err, topo.Unavailable)
	assert.Equal(t, topo.Unavailable, topo.CodeOf(err))
	assert.Equal(t, "no server answered at a:1,b:2", (&topo.UnreachableError{Addrs: []string{"a:1", "b:2"}}).Error())
}
