package backendkit_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// otherVersion is a Version of a foreign backend.
type otherVersion string

func (v otherVersion) String() string { return string(v) }

func TestVersionNumber(t *testing.T) {
	n, err := backendkit.VersionNumber("a/b", topo.NumericVersion(12))
	require.NoError(t, err)
	require.Equal(t, int64(12), n)
	n, err = backendkit.VersionNumber("a/b", topo.NumericVersion(0))
	require.NoError(t, err)
	require.Zero(t, n)

	for _, v := range []topo.Version{topo.NumericVersion(-1), topo.NumericVersion(math.MinInt64), otherVersion("12"), nil} {
		_, err := backendkit.VersionNumber("a/b", v)
		require.Truef(t, topo.IsErrType(err, topo.InvalidArgument), "VersionNumber(%v): want InvalidArgument, got %v", v, err)
		require.Contains(t, err.Error(), "a/b", "the error names the path")
	}
}
