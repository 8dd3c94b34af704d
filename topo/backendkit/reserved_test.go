package backendkit_test

import (
	"errors"
	"strings"
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

// checkLockPathSame asserts that CheckLockPath gives for p what its full
// checks (topo.CleanDirPath, then CheckReserved) give, and that CleanPlain
// accepts only paths that both topo.CleanFilePath and topo.CleanDirPath
// return unchanged but for a leading "/", and that are not reserved.
func checkLockPathSame(t *testing.T, p string) {
	t.Helper()
	want, wantErr := topo.CleanDirPath(p)
	if wantErr == nil {
		if err := backendkit.CheckReserved(want); err != nil {
			want, wantErr = "", err
		}
	}
	got, err := backendkit.CheckLockPath(p)
	require.Equal(t, want, got, "path %q", p)
	require.Equal(t, wantErr, err, "path %q", p)
	if c, ok := backendkit.CleanPlain(p); ok {
		require.NoError(t, wantErr, "plain path %q", p)
		require.Equal(t, want, c, "path %q", p)
		f, err := topo.CleanFilePath(p)
		require.NoError(t, err, "plain path %q", p)
		require.Equal(t, f, c, "path %q", p)
	}
}

func TestCheckLockPathMatchesFullChecks(t *testing.T) {
	for _, p := range []string{
		"", "/", "//", "a", "/a", "//a", "a/", "/a/", "a//", "a//b", "a/b", "/a/b/c", "a/b/",
		".", "..", "...", "/.", "/..", "a/.", "a/..", "./a", "../a", ".a", "a..",
		"a\x00b", "a\x1fb", "a\x7fb", "é", "a/é/b", "\xff", "a b",
		strings.Repeat("a", topo.MaxPathLength), strings.Repeat("a", topo.MaxPathLength+1),
		"locks", "a/locks", "a/locks/b", "Lock", "a/Lock", "lock", "a/Locks", "xlocks",
		"elections", "elections/x", "/elections", "a/elections", "electionsx/y",
		"keyspaces/ks/shards/0", "keyspaces/ks/shards/0/",
	} {
		checkLockPathSame(t, p)
	}
}

func FuzzCheckLockPath(f *testing.F) {
	for _, p := range []string{"a/b", "/a", "a/", "a/../b", "a//b", "./", "x/locks", "elections/e", "\x01", "é"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) { checkLockPathSame(t, p) })
}

// checkWritePathSame asserts that CheckCreate and CheckDelete, whose
// plain paths take CleanPlain's one pass, give for p what the full checks
// of a write (topo.CleanFilePath, then CheckReserved) give.
func checkWritePathSame(t *testing.T, p string) {
	t.Helper()
	want, wantErr := topo.CleanFilePath(p)
	if wantErr == nil {
		if err := backendkit.CheckReserved(want); err != nil {
			want, wantErr = "", err
		}
	}
	got, err := backendkit.CheckCreate(p, []byte("x"))
	require.Equal(t, want, got, "path %q", p)
	require.Equal(t, wantErr, err, "path %q", p)
	got, _, err = backendkit.CheckDelete(p, nil)
	require.Equal(t, want, got, "path %q", p)
	require.Equal(t, wantErr, err, "path %q", p)
}

func TestCheckWritePathMatchesFullChecks(t *testing.T) {
	for _, p := range []string{
		"", "/", "//", "a", "/a", "//a", "a/", "/a/", "a//b", "a/b", "/a/b/c",
		".", "..", "...", "/.", "/..", "a/.", "a/..", "a/...", "./a", "../a", ".a", "a..",
		"a\x00b", "a\x1fb", "a\x7fb", "é", "a/é/b", "\xff", "a b", "é/locks",
		strings.Repeat("a", topo.MaxPathLength), strings.Repeat("a", topo.MaxPathLength+1),
		"locks", "a/locks", "a/locks/b", "Lock", "a/Lock", "lock", "a/Locks", "xlocks", "locksx",
		"elections", "elections/x", "/elections", "a/elections", "electionsx/y", "a/b/locks",
		"keyspaces/ks/shards/0/Shard",
	} {
		checkWritePathSame(t, p)
	}
}

func FuzzCheckWritePath(f *testing.F) {
	for _, p := range []string{"a/b", "/a", "a/", "a/../b", "a//b", "./", "x/locks", "elections/e", "\x01", "é"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) { checkWritePathSame(t, p) })
}
