package backendkit_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

func TestCheckCreate(t *testing.T) {
	p, err := backendkit.CheckCreate("/a/b", []byte("x"))
	require.NoError(t, err)
	require.Equal(t, "a/b", p, "the path comes back canonical")

	p, err = backendkit.CheckCreate("a", bytes.Repeat([]byte{1}, topo.MaxValueSize))
	require.NoError(t, err, "a value of exactly MaxValueSize is accepted")
	require.Equal(t, "a", p)

	_, err = backendkit.CheckCreate("a//b", []byte("x"))
	require.ErrorIs(t, err, topo.InvalidPath)

	_, err = backendkit.CheckCreate("a", make([]byte, topo.MaxValueSize+1))
	require.ErrorIs(t, err, topo.InvalidArgument)
	require.ErrorIs(t, err, &topo.Error{Code: topo.InvalidArgument, Path: "a"}, "the error names the canonical path")

	_, err = backendkit.CheckCreate("a/", make([]byte, topo.MaxValueSize+1))
	require.ErrorIs(t, err, topo.InvalidPath, "a bad path is reported before a bad value")
}

func TestCheckUpdate(t *testing.T) {
	p, want, err := backendkit.CheckUpdate("/a/b", []byte("x"), nil)
	require.NoError(t, err)
	require.Equal(t, "a/b", p)
	require.Equal(t, backendkit.AnyVersion, want, "a nil version is AnyVersion")

	for _, v := range []int64{0, 1, 1 << 40} {
		p, want, err = backendkit.CheckUpdate("a", nil, topo.NumericVersion(v))
		require.NoError(t, err)
		require.Equal(t, "a", p)
		require.Equal(t, v, want)
	}

	_, _, err = backendkit.CheckUpdate("a", nil, topo.NumericVersion(-1))
	require.ErrorIs(t, err, &topo.Error{Code: topo.InvalidArgument, Path: "a"}, "a negative version")
	_, _, err = backendkit.CheckUpdate("/a", nil, otherVersion("3"))
	require.ErrorIs(t, err, &topo.Error{Code: topo.InvalidArgument, Path: "a"}, "a foreign version")

	// The order of the checks: path, then value, then version.
	big := make([]byte, topo.MaxValueSize+1)
	_, _, err = backendkit.CheckUpdate("", big, otherVersion("3"))
	require.ErrorIs(t, err, topo.InvalidPath)
	_, _, err = backendkit.CheckUpdate("a", big, otherVersion("3"))
	require.ErrorIs(t, err, topo.InvalidArgument)
	require.Contains(t, err.Error(), "MaxValueSize", "the value is checked before the version")
}

func TestCheckDelete(t *testing.T) {
	p, want, err := backendkit.CheckDelete("/a/b", nil)
	require.NoError(t, err)
	require.Equal(t, "a/b", p)
	require.Equal(t, backendkit.AnyVersion, want)

	p, want, err = backendkit.CheckDelete("a", topo.NumericVersion(7))
	require.NoError(t, err)
	require.Equal(t, "a", p)
	require.Equal(t, int64(7), want)

	_, _, err = backendkit.CheckDelete("a", otherVersion("7"))
	require.ErrorIs(t, err, &topo.Error{Code: topo.InvalidArgument, Path: "a"})
	_, _, err = backendkit.CheckDelete("a/../b", otherVersion("7"))
	require.ErrorIs(t, err, topo.InvalidPath, "a bad path is reported before a bad version")
}

func TestCheckElection(t *testing.T) {
	n, err := backendkit.CheckElection("/elec/x", "id")
	require.NoError(t, err)
	require.Equal(t, "elec/x", n)

	n, err = backendkit.CheckElection("e", strings.Repeat("i", topo.MaxValueSize+1))
	require.NoError(t, err, "CheckElection puts no limit on the id's size")
	require.Equal(t, "e", n)

	_, err = backendkit.CheckElection("", "id")
	require.ErrorIs(t, err, topo.InvalidArgument, "an empty name")
	_, err = backendkit.CheckElection("/x/", "")
	require.ErrorIs(t, err, &topo.Error{Code: topo.InvalidArgument, Path: "/x/"}, "an empty id is reported first, for the name as given")
	_, err = backendkit.CheckElection("a//b", "id")
	require.ErrorIs(t, err, topo.InvalidPath)
	_, err = backendkit.CheckElection("/", "id")
	require.ErrorIs(t, err, topo.InvalidPath)
}

func TestCheckGetVersion(t *testing.T) {
	p, err := backendkit.CheckGetVersion("/a/b", 0)
	require.NoError(t, err)
	require.Equal(t, "a/b", p)
	p, err = backendkit.CheckGetVersion("d/locks/x", 7)
	require.NoError(t, err, "reads are not refused at reserved paths")
	require.Equal(t, "d/locks/x", p)

	_, err = backendkit.CheckGetVersion("a", -1)
	require.ErrorIs(t, err, &topo.Error{Code: topo.InvalidArgument, Path: "a"})
	require.ErrorContains(t, err, "version -1 is negative")
	_, err = backendkit.CheckGetVersion("a//b", -1)
	require.ErrorIs(t, err, topo.InvalidPath, "a bad path is reported before a bad version")
}

func TestCheckLock(t *testing.T) {
	d, err := backendkit.CheckLock("/", "x")
	require.NoError(t, err)
	require.Equal(t, "", d, "the cell root may be locked")
	d, err = backendkit.CheckLock("/a/b/", "x")
	require.NoError(t, err)
	require.Equal(t, "a/b", d)

	big := strings.Repeat("x", topo.MaxValueSize+1)
	_, err = backendkit.CheckLock("a", big)
	require.ErrorIs(t, err, &topo.Error{Code: topo.InvalidArgument, Path: "a"})
	_, err = backendkit.CheckLock("a/locks", big)
	require.ErrorIs(t, err, topo.InvalidPath, "a reserved path is reported before a bad value")
	_, err = backendkit.CheckLock("a//b", "x")
	require.ErrorIs(t, err, topo.InvalidPath)
}

func TestCheckLockWithTTL(t *testing.T) {
	d, err := backendkit.CheckLockWithTTL("/a", "x", time.Nanosecond)
	require.NoError(t, err)
	require.Equal(t, "a", d)

	for _, ttl := range []time.Duration{0, -time.Second} {
		_, err = backendkit.CheckLockWithTTL("/a", "x", ttl)
		require.ErrorIs(t, err, &topo.Error{Code: topo.InvalidArgument, Path: "a"})
		require.ErrorContains(t, err, "lock TTL "+ttl.String()+" is not positive")
	}
	_, err = backendkit.CheckLockWithTTL("a/Lock", "x", 0)
	require.ErrorIs(t, err, topo.InvalidPath, "a reserved path is reported before a bad ttl")
	_, err = backendkit.CheckLockWithTTL("a", strings.Repeat("x", topo.MaxValueSize+1), 0)
	require.ErrorIs(t, err, topo.InvalidArgument)
	require.NotContains(t, err.Error(), "TTL", "a bad value is reported before a bad ttl")
}
