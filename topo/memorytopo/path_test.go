package memorytopo

import (
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
