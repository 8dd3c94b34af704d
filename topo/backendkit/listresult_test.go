package backendkit_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

func TestListResult(t *testing.T) {
	files := []topo.KVInfo{{Path: "a/b", Value: []byte("x"), Version: topo.NumericVersion(1)}}

	_, err := backendkit.ListResult("a/", nil, nil)
	require.True(t, topo.IsErrType(err, topo.NoNode), "nothing found: %v", err)

	got, err := backendkit.ListResult("a/", files, nil)
	require.NoError(t, err)
	require.Equal(t, files, got)

	got, err = backendkit.ListResult("a/", files, []string{"a/locks/x"})
	require.True(t, topo.IsErrType(err, topo.PartialResult), "reserved files: %v", err)
	require.Equal(t, files, got)
	var rf *topo.ReservedFilesError
	require.True(t, errors.As(err, &rf))
	require.Equal(t, []string{"a/locks/x"}, rf.Paths)

	// Only reserved files: still a partial result, not NoNode.
	got, err = backendkit.ListResult("a/", nil, []string{"a/locks/x"})
	require.True(t, topo.IsErrType(err, topo.PartialResult), "only reserved files: %v", err)
	require.Empty(t, got)
}
