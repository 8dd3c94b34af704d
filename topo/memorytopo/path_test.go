package memorytopo

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// checkClean asserts that cleanFilePath gives what topo.CleanFilePath
// gives for p, and that its fast path accepts only paths that
// topo.CleanFilePath accepts unchanged but for a leading "/".
func checkClean(t *testing.T, p string) {
	t.Helper()
	want, wantErr := topo.CleanFilePath(p)
	got, err := cleanFilePath(p)
	require.Equal(t, want, got, "path %q", p)
	require.Equal(t, wantErr, err, "path %q", p)
	if c, ok := backendkit.CleanPlain(p); ok {
		require.NoError(t, wantErr, "fast path accepted %q", p)
		require.Equal(t, want, c, "path %q", p)
	}
}

func TestCleanFilePathMatchesTopo(t *testing.T) {
	for _, p := range []string{
		"", "/", "//", "a", "/a", "//a", "a/", "/a/", "a//b", "a/b", "/a/b/c",
		".", "..", "...", "/.", "/..", "a/.", "a/..", "a/...", "./a", "../a",
		".a", "a.", "..a", "a..", "a/.b/c", "a/b.", "a\x00b", "a\x1fb", "a\x7fb",
		"é", "a/é/b", "\xff", "a b", "~!@#$%^&*()", strings.Repeat("a", topo.MaxPathLength),
		"/" + strings.Repeat("a", topo.MaxPathLength), strings.Repeat("a", topo.MaxPathLength+1),
		"keyspaces/ks/shards/0/Shard", "a/locks/b", "elections/x",
	} {
		checkClean(t, p)
	}
}

func FuzzCleanFilePath(f *testing.F) {
	for _, p := range []string{"a/b", "/a", "a/../b", "a//b", "./", "x/.", "\x01", "é"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) { checkClean(t, p) })
}

// checkWriteSame asserts that checkWrite gives what backendkit.CheckUpdate
// gives, and that backendkit.CleanPlain accepts no reserved path.
func checkWriteSame(t *testing.T, p string, contents []byte, version topo.Version) {
	t.Helper()
	wp, wv, werr := backendkit.CheckUpdate(p, contents, version)
	gp, gv, gerr := checkWrite(false, p, contents, version)
	require.Equal(t, wp, gp, "path %q", p)
	require.Equal(t, wv, gv, "path %q", p)
	require.Equal(t, fmt.Sprint(werr), fmt.Sprint(gerr), "path %q", p)
	require.Equal(t, topo.CodeOf(werr), topo.CodeOf(gerr), "path %q", p)
	if c, ok := backendkit.CleanPlain(p); ok {
		require.False(t, topo.IsReserved(c), "path %q", c)
	}
}

func TestCheckWriteMatchesBackendkit(t *testing.T) {
	big := make([]byte, topo.MaxValueSize+1)
	for _, p := range []string{
		"", "a", "/a", "a//b", "a/b", "locks", "a/locks", "a/locks/b", "Lock", "a/Lock",
		"lock", "a/Locks", "xlocks", "locksx", "elections", "elections/x", "a/elections",
		"electionsx/y", "/elections", "a/b/locks", "keyspaces/ks/shards/0/Shard", "a/..", "é/locks",
	} {
		for _, v := range []topo.Version{nil, topo.NumericVersion(3), topo.NumericVersion(-1), fakeVersion{}} {
			checkWriteSame(t, p, []byte("x"), v)
			checkWriteSame(t, p, big, v)
		}
	}
}

type fakeVersion struct{}

func (fakeVersion) String() string { return "fake" }

func FuzzCheckWrite(f *testing.F) {
	for _, p := range []string{"a/b", "a/locks/b", "elections/x", "x/elections", "Lock", "a//b", "é"} {
		f.Add(p, int64(3))
	}
	f.Fuzz(func(t *testing.T, p string, v int64) {
		checkWriteSame(t, p, []byte("x"), topo.NumericVersion(v))
		checkWriteSame(t, p, nil, nil)
	})
}

// checkDeleteSame asserts that checkWrite for a delete gives what
// backendkit.CheckDelete gives for p.
func checkDeleteSame(t *testing.T, p string, version topo.Version) {
	t.Helper()
	wp, wv, werr := backendkit.CheckDelete(p, version)
	gp, gv, gerr := checkWrite(true, p, nil, version)
	require.Equal(t, wp, gp, "path %q", p)
	require.Equal(t, wv, gv, "path %q", p)
	require.Equal(t, fmt.Sprint(werr), fmt.Sprint(gerr), "path %q", p)
	require.Equal(t, topo.CodeOf(werr), topo.CodeOf(gerr), "path %q", p)
}

func TestCheckDeleteMatchesBackendkit(t *testing.T) {
	for _, p := range []string{
		"", "/", "a", "/a", "a/", "a//b", "a/b", "locks", "a/locks", "a/locks/b", "Lock", "a/Lock",
		"lock", "a/Locks", "xlocks", "locksx", "elections", "elections/x", "a/elections",
		"electionsx/y", "/elections", "a/b/locks", "keyspaces/ks/shards/0/Shard", "a/..", "é/locks",
		strings.Repeat("a", topo.MaxPathLength+1),
	} {
		for _, v := range []topo.Version{nil, topo.NumericVersion(3), topo.NumericVersion(0), topo.NumericVersion(-1), fakeVersion{}} {
			checkDeleteSame(t, p, v)
		}
	}
}

func FuzzCheckDelete(f *testing.F) {
	for _, p := range []string{"a/b", "a/locks/b", "elections/x", "x/elections", "Lock", "a//b", "é"} {
		f.Add(p, int64(3))
	}
	f.Fuzz(func(t *testing.T, p string, v int64) {
		checkDeleteSame(t, p, topo.NumericVersion(v))
		checkDeleteSame(t, p, nil)
	})
}
