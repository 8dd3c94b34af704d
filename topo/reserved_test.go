package topo_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
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
		err := topo.CheckReserved(p)
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
		_, err := topo.CheckCreate(p, nil)
		require.ErrorIs(t, err, topo.InvalidPath, "CheckCreate(%q)", p)
		_, _, err = topo.CheckUpdate(p, nil, nil)
		require.ErrorIs(t, err, topo.InvalidPath, "CheckUpdate(%q)", p)
		_, _, err = topo.CheckDelete(p, nil)
		require.ErrorIs(t, err, topo.InvalidPath, "CheckDelete(%q)", p)
		_, err = topo.CheckLockPath(p)
		require.ErrorIs(t, err, topo.InvalidPath, "CheckLockPath(%q)", p)
	}
	d, err := topo.CheckLockPath("/")
	require.NoError(t, err)
	require.Equal(t, "", d)
	_, err = topo.CheckLockPath("a//b")
	require.ErrorIs(t, err, topo.InvalidPath)
}

func TestElectionNamesRefuseLockSegments(t *testing.T) {
	for _, name := range []string{"svc/locks", "locks", "a/Lock"} {
		_, err := topo.CheckElection(name, "id")
		require.ErrorIs(t, err, topo.InvalidPath, name)
	}
	for _, name := range []string{"svc", "svc/a", "elections"} {
		n, err := topo.CheckElection(name, "id")
		require.NoError(t, err, name)
		require.Equal(t, name, n)
	}
}

func TestReservedFilesError(t *testing.T) {
	require.NoError(t, topo.ReservedFiles("p", nil))
	err := topo.ReservedFiles("p", []string{"d/locks/a", "d/locks/b"})
	require.ErrorIs(t, err, topo.PartialResult)
	var rf *topo.ReservedFilesError
	require.True(t, errors.As(err, &rf))
	require.Equal(t, []string{"d/locks/a", "d/locks/b"}, rf.Paths)
	require.Contains(t, err.Error(), "2 files at reserved paths")
}
