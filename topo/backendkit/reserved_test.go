package backendkit_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

func TestReservedRule(t *testing.T) {
	for p, want := range map[string]bool{
		"":                    false,
		"a":                   false,
		"a/b":                 false,
		"locks":               true,
		"d/locks":             true,
		"d/locks/x":           true,
		"a/b/locks/c/d":       true,
		"Lock":                true,
		"d/Lock":              true,
		"d/Lock/x":            true,
		"elections":           true,
		"elections/e":         true,
		"a/elections":         false,
		"a/elections/x":       false,
		"lock":                false,
		"d/Locks":             false,
		"d/locksmith":         false,
		"electionsx/y":        false,
		"keyspaces/ks/shards": false,
	} {
		require.Equal(t, want, topo.IsReserved(p), "IsReserved(%q)", p)
		err := backendkit.CheckReserved(p)
		if want {
			require.ErrorIs(t, err, topo.InvalidPath, p)
			require.Contains(t, err.Error(), "reserved name", p)
		} else {
			require.NoError(t, err, p)
		}
	}
}

func TestWriteChecksRefuseReservedPaths(t *testing.T) {
	for _, p := range []string{"d/locks/cfg", "/d/Lock", "elections/e/x"} {
		_, err := backendkit.CheckCreate(p, nil)
		require.ErrorIs(t, err, topo.InvalidPath, "CheckCreate(%q)", p)
		_, _, err = backendkit.CheckUpdate(p, nil, nil)
		require.ErrorIs(t, err, topo.InvalidPath, "CheckUpdate(%q)", p)
		_, _, err = backendkit.CheckDelete(p, nil)
		require.ErrorIs(t, err, topo.InvalidPath, "CheckDelete(%q)", p)
		_, err = backendkit.CheckLockPath(p)
		require.ErrorIs(t, err, topo.InvalidPath, "CheckLockPath(%q)", p)
	}
	d, err := backendkit.CheckLockPath("/")
	require.NoError(t, err)
	require.Equal(t, "", d)
	_, err = backendkit.CheckLockPath("a//b")
	require.ErrorIs(t, err, topo.InvalidPath)
}

func TestElectionNamesRefuseLockSegments(t *testing.T) {
	for _, name := range []string{"svc/locks", "locks", "a/Lock"} {
		_, err := backendkit.CheckElection(name, "id")
		require.ErrorIs(t, err, topo.InvalidPath, name)
	}
	for _, name := range []string{"svc", "svc/a", "elections"} {
		n, err := backendkit.CheckElection(name, "id")
		require.NoError(t, err, name)
		require.Equal(t, name, n)
	}
}

func TestReservedFilesError(t *testing.T) {
	require.NoError(t, backendkit.ReservedFiles("p", nil))
	err := backendkit.ReservedFiles("p", []string{"d/locks/a", "d/locks/b"})
	require.ErrorIs(t, err, topo.PartialResult)
	var rf *topo.ReservedFilesError
	require.True(t, errors.As(err, &rf))
	require.Equal(t, []string{"d/locks/a", "d/locks/b"}, rf.Paths)
	require.Contains(t, err.Error(), "2 files at reserved paths")
}
