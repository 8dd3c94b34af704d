package test

import (
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testListDir: entries sorted by name, intermediate directories as
// directories, Type and Ephemeral when full, NoNode for a missing directory.
func testListDir(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	_, err := c.ListDir(ctx, "", false)
	requireCode(t, err, topo.NoNode, "ListDir of the root of an empty store")

	for _, p := range []string{"top/b/c", "top/d", "top/e/f/g", "top/B", "top/aa", "top/a", "z"} {
		mustCreate(t, ctx, c, p, p)
	}

	for _, dir := range []string{"", "/"} {
		entries, err := c.ListDir(ctx, dir, false)
		require.NoError(t, err)
		requireSortedNames(t, entries, []string{"top", "z"}, "ListDir of the root")
	}

	want := []string{"B", "a", "aa", "b", "d", "e"}
	for _, dir := range []string{"top", "/top", "top/", "/top/"} {
		entries, err := c.ListDir(ctx, dir, false)
		require.NoErrorf(t, err, "ListDir(%q)", dir)
		requireSortedNames(t, entries, want, "ListDir("+dir+")")
	}

	entries, err := c.ListDir(ctx, "top", true)
	require.NoError(t, err)
	requireSortedNames(t, entries, want, "full ListDir(top)")
	types := map[string]topo.DirEntryType{"B": topo.TypeFile, "a": topo.TypeFile, "aa": topo.TypeFile,
		"b": topo.TypeDirectory, "d": topo.TypeFile, "e": topo.TypeDirectory}
	for _, e := range entries {
		require.Equalf(t, types[e.Name], e.Type, "type of top/%s", e.Name)
		require.Falsef(t, e.Ephemeral, "top/%s is not ephemeral", e.Name)
	}

	entries, err = c.ListDir(ctx, "top/e", true)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"f"}, "full ListDir(top/e)")
	require.Equal(t, topo.TypeDirectory, entries[0].Type)
	entries, err = c.ListDir(ctx, "top/e/f", true)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"g"}, "full ListDir(top/e/f)")
	require.Equal(t, topo.TypeFile, entries[0].Type)

	for _, dir := range []string{"nope", "top/nope", "top/e/nope", "to"} {
		_, err := c.ListDir(ctx, dir, false)
		requireCode(t, err, topo.NoNode, "ListDir of a missing directory "+dir)
		_, err = c.ListDir(ctx, dir, true)
		requireCode(t, err, topo.NoNode, "full ListDir of a missing directory "+dir)
	}

	// Another connection sees the same tree.
	entries, err = s.conn().ListDir(ctx, "top", false)
	require.NoError(t, err)
	requireSortedNames(t, entries, want, "ListDir(top) from another connection")
}

// testEmptyDirsDisappear: deleting a directory's last file removes it, and
// every parent left empty, from the parent's listing.
func testEmptyDirsDisappear(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	mustCreate(t, ctx, c, "p/q/r/s/f", "deep")
	mustCreate(t, ctx, c, "p/keep", "keep")
	mustCreate(t, ctx, c, "p/q/two/f", "two")

	require.NoError(t, c.Delete(ctx, "p/q/r/s/f", nil))
	entries, err := c.ListDir(ctx, "p/q", false)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"two"}, "ListDir(p/q) after deleting the only file under p/q/r")
	for _, dir := range []string{"p/q/r", "p/q/r/s"} {
		_, err := c.ListDir(ctx, dir, false)
		requireCode(t, err, topo.NoNode, "ListDir of an emptied directory "+dir)
	}

	require.NoError(t, c.Delete(ctx, "p/q/two/f", nil))
	entries, err = c.ListDir(ctx, "p", true)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"keep"}, "ListDir(p) after emptying p/q")
	_, err = c.ListDir(ctx, "p/q", false)
	requireCode(t, err, topo.NoNode, "ListDir of an emptied directory p/q")

	require.NoError(t, c.Delete(ctx, "p/keep", nil))
	_, err = c.ListDir(ctx, "p", false)
	requireCode(t, err, topo.NoNode, "ListDir of an emptied directory p")
	_, err = c.ListDir(ctx, "", false)
	requireCode(t, err, topo.NoNode, "ListDir of the root of an emptied store")
}

// testEmptyDirAfterLock: a directory that was locked and unlocked still
// disappears once its last file is deleted (no lock leftovers keep it).
func testEmptyDirAfterLock(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	mustCreate(t, ctx, c, "p/d/f", "f")
	mustCreate(t, ctx, c, "p/d/sub/g", "g")
	mustCreate(t, ctx, c, "p/keep", "keep")

	for _, dir := range []string{"p/d", "p/d/sub"} {
		l, err := c.Lock(ctx, dir, "holder")
		require.NoErrorf(t, err, "Lock(%q)", dir)
		require.NoErrorf(t, l.Unlock(ctx), "Unlock(%q)", dir)
	}
	// Also via TryLock from another connection.
	l, err := s.conn().TryLock(ctx, "p/d", "holder")
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))

	require.NoError(t, c.Delete(ctx, "p/d/sub/g", nil))
	require.NoError(t, c.Delete(ctx, "p/d/f", nil))
	entries, err := c.ListDir(ctx, "p", false)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"keep"}, "ListDir(p) after locking, unlocking and emptying p/d")
	_, err = c.ListDir(ctx, "p/d", false)
	requireCode(t, err, topo.NoNode, "ListDir of a locked, unlocked and emptied directory")
	_, err = c.List(ctx, "p/d")
	requireCode(t, err, topo.NoNode, "List of a locked, unlocked and emptied directory")

	require.NoError(t, c.Delete(ctx, "p/keep", nil))
	_, err = c.ListDir(ctx, "", false)
	requireCode(t, err, topo.NoNode, "ListDir of the root of an emptied store")
}
