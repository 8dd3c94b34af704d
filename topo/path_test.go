package topo_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

const bad = "\x00bad" // marks an expected InvalidPath in the tables below

func TestCleanFilePath(t *testing.T) {
	long := strings.Repeat("a", topo.MaxPathLength)
	for _, tc := range []struct{ in, want string }{
		{"a", "a"},
		{"/a", "a"},
		{"a/b", "a/b"},
		{"/a/b/c", "a/b/c"},
		{"a.b/c..d/...", "a.b/c..d/..."},
		{".a/..b", ".a/..b"},
		{"naïve/ключ/鍵", "naïve/ключ/鍵"},
		{"with space/and-dash_and~tilde", "with space/and-dash_and~tilde"},
		{long, long},
		{"/" + long[1:], long[1:]},

		{"", bad},
		{"/", bad},
		{"//", bad},
		{"//a", bad},
		{"a//b", bad},
		{"a/", bad},
		{"/a/b/", bad},
		{".", bad},
		{"..", bad},
		{"/..", bad},
		{"a/.", bad},
		{"a/./b", bad},
		{"a/../b", bad},
		{"../a", bad},
		{"a/..", bad},
		{"a\x00b", bad},
		{"a\x01b", bad},
		{"a\nb", bad},
		{"a\tb", bad},
		{"a\x1fb", bad},
		{"a\x7fb", bad},
		{"a\xffb", bad},
		{"a\xe2\x82", bad},
		{"\xc0\xaf", bad},
		{long + "a", bad},
		// Code points some store cannot store and read back (see
		// docs/semantics.md, "Path rule"), and printable ones close to
		// them that every store keeps.
		{"a/\u0080", bad},
		{"a/\u0085", bad},
		{"a/\u009f", bad},
		{"a/\u00a0", bad},
		{"a/\u00ad", bad},
		{"a/\u2028", bad},
		{"a/\ufeff", bad},
		{"a/\ue000", bad},
		{"a/\uf8ff", bad},
		{"a/\ufff0", bad},
		{"a/\ufffd", bad},
		{"a/\uffff", bad},
		{"a/\U00010000", bad},
		{"a/\U0001f600", bad},
		{"a/\U0010ffff", bad},
		{"a/\u00a1", "a/\u00a1"},
		{"a/\uf900", "a/\uf900"},
		{"a/\uffef", bad},
		{"a/\uffe8", "a/\uffe8"},
	} {
		got, err := topo.CleanFilePath(tc.in)
		if tc.want == bad {
			requireInvalidPath(t, err, tc.in, "CleanFilePath")
			require.Emptyf(t, got, "CleanFilePath(%q) returned a path with its error", tc.in)
			continue
		}
		require.NoErrorf(t, err, "CleanFilePath(%q)", tc.in)
		require.Equalf(t, tc.want, got, "CleanFilePath(%q)", tc.in)
	}
}

func TestCleanDirPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"/", ""},
		{"a", "a"},
		{"/a", "a"},
		{"a/", "a"},
		{"/a/b/", "a/b"},
		{"a/b", "a/b"},

		{"//", bad},
		{"a//", bad},
		{"a//b", bad},
		{".", bad},
		{"./", bad},
		{"..", bad},
		{"a/../", bad},
		{"a/./b", bad},
		{"a\x00", bad},
		{"a\x7f/", bad},
		{"\xff/", bad},
		{strings.Repeat("a", topo.MaxPathLength+1), bad},
	} {
		got, err := topo.CleanDirPath(tc.in)
		if tc.want == bad {
			requireInvalidPath(t, err, tc.in, "CleanDirPath")
			continue
		}
		require.NoErrorf(t, err, "CleanDirPath(%q)", tc.in)
		require.Equalf(t, tc.want, got, "CleanDirPath(%q)", tc.in)
	}
}

func TestCleanPrefix(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"/", ""},
		{"a", "a"},
		{"/a", "a"},
		{"a/", "a/"},
		{"/a/b/", "a/b/"},
		{"a/b", "a/b"},
		{"a/b.", "a/b."},

		{"//", bad},
		{"a//", bad},
		{"a//b", bad},
		{"./", bad},
		{"a/../", bad},
		{"a/..", bad},
		{"a\x00", bad},
		{"a\n", bad},
		{"\xff", bad},
		{strings.Repeat("a", topo.MaxPathLength+1), bad},
	} {
		got, err := topo.CleanPrefix(tc.in)
		if tc.want == bad {
			requireInvalidPath(t, err, tc.in, "CleanPrefix")
			continue
		}
		require.NoErrorf(t, err, "CleanPrefix(%q)", tc.in)
		require.Equalf(t, tc.want, got, "CleanPrefix(%q)", tc.in)
	}
}

// requireInvalidPath fails unless err is an InvalidPath *topo.Error that
// names in (abbreviated when long).
func requireInvalidPath(t *testing.T, err error, in, fn string) {
	t.Helper()
	require.Errorf(t, err, "%s(%.80q) must fail", fn, in)
	require.Truef(t, topo.IsErrType(err, topo.InvalidPath), "%s(%.80q): want InvalidPath, got %.200v", fn, in, err)
	var te *topo.Error
	require.True(t, errors.As(err, &te))
	if in != "" {
		require.NotEmptyf(t, te.Path, "%s(%.80q): an InvalidPath error names the path", fn, in)
		require.Contains(t, err.Error(), te.Path)
	}
}

func TestInvalidPathErrorNamesPath(t *testing.T) {
	_, err := topo.CleanFilePath("a//b")
	require.Contains(t, err.Error(), "a//b")
	_, err = topo.CleanFilePath("x/")
	require.Contains(t, err.Error(), "x/")
	// A too long path is abbreviated in the message, not repeated in full.
	_, err = topo.CleanFilePath(strings.Repeat("z", 10*topo.MaxPathLength))
	require.Less(t, len(err.Error()), 200)
}
