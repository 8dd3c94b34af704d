package tree_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/tree"
)

func newConn(t *testing.T) topo.Conn {
	t.Helper()
	c, err := memorytopo.NewFactory().NewConn("", "/r")
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func put(t *testing.T, c topo.Conn, files ...string) {
	t.Helper()
	for _, f := range files {
		_, err := c.Create(t.Context(), f, []byte("v-"+f))
		require.NoError(t, err)
	}
}

// List returns the files at or under a directory only, sorted, and an
// absent directory as an empty listing.
func TestListUnderDirectory(t *testing.T) {
	c := newConn(t)
	put(t, c, "ks/b/x", "ks/a", "ks2/y", "other")
	l, err := tree.List(t.Context(), c, "ks")
	require.NoError(t, err)
	var paths []string
	for _, f := range l.Files {
		paths = append(paths, f.Path)
	}
	assert.Equal(t, []string{"ks/a", "ks/b/x"}, paths, "ks2 is not under ks")
	assert.Equal(t, "v-ks/a", string(l.Files[0].Value))
	assert.False(t, l.Skipped())

	l, err = tree.List(t.Context(), c, "absent")
	require.NoError(t, err)
	assert.Empty(t, l.Files)

	l, err = tree.List(t.Context(), c, "")
	require.NoError(t, err)
	assert.Len(t, l.Files, 4, "the root holds everything")
}

// Entries reads a directory's entries, their versions and descendants,
// and a file where a directory was asked for is NoNode.
func TestEntries(t *testing.T) {
	c := newConn(t)
	put(t, c, "ks/a", "ks/d/x")
	es, err := tree.Entries(t.Context(), c, "ks", tree.EntriesOptions{Versions: true, Recursive: true})
	require.NoError(t, err)
	require.Len(t, es, 2)
	assert.Equal(t, "ks/a", es[0].Path)
	assert.Equal(t, topo.TypeFile, es[0].Type)
	assert.NotNil(t, es[0].Version)
	assert.Equal(t, topo.TypeDirectory, es[1].Type)
	assert.Nil(t, es[1].Version)
	require.Len(t, es[1].Children, 1)
	assert.Equal(t, "ks/d/x", es[1].Children[0].Path)

	es, err = tree.Entries(t.Context(), c, "ks", tree.EntriesOptions{})
	require.NoError(t, err)
	assert.Nil(t, es[0].Version, "no versions unless asked")
	assert.Nil(t, es[1].Children, "no descendants unless asked")

	_, err = tree.Entries(t.Context(), c, "nothing", tree.EntriesOptions{})
	assert.True(t, topo.IsErrType(err, topo.NoNode), "%v", err)
}

func TestPaths(t *testing.T) {
	assert.Equal(t, []string{"a/b", "a"}, tree.AncestorDirs("a/b/c"))
	assert.Nil(t, tree.AncestorDirs("a"))
	assert.True(t, tree.Under("a/b", "a"))
	assert.True(t, tree.Under("a", "a"))
	assert.False(t, tree.Under("ab", "a"))
	assert.True(t, tree.Under("x", ""))
	assert.True(t, tree.CanonicalFile("a/b"))
	assert.False(t, tree.CanonicalFile("a//b"))
	assert.False(t, tree.CanonicalFile("t/"))

	err := tree.WithPath(&topo.Error{Code: topo.NoNode}, "")
	var te *topo.Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "/", te.Path, "the root is named too")
	err = tree.WithPath(&topo.Error{Code: topo.NoNode, Path: "x"}, "y")
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "x", te.Path, "a path already named is kept")
}
