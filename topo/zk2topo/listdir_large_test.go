package zk2topo

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestListDirLargeNamesOnly: a names-only ListDir of a directory large
// enough for the listCache (listCacheMin children or more) lists every file
// and subdirectory sorted, with names that sort next to "locks"; its
// "locks" child only while the directory is locked (before and after, the
// empty locks znode is hidden), and the same names as a full listing.
func TestListDirLargeNamesOnly(t *testing.T) {
	ctx := t.Context()
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	var want []string
	for i := range 100 {
		want = append(want, fmt.Sprintf("f%03d", i))
	}
	want = append(want, "lock", "locksmith", "lockt", "l", "m", "-80", "80-", "sub")
	for _, n := range want {
		p := "d/" + n
		if n == "sub" {
			p = "d/sub/g"
		}
		_, err := c.Create(ctx, p, []byte("x"))
		require.NoError(t, err)
	}
	slices.Sort(want)
	names := func(es []topo.DirEntry) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.Name
		}
		return out
	}
	check := func(want []string) {
		t.Helper()
		plain, err := c.ListDir(ctx, "d", false)
		require.NoError(t, err)
		require.Equal(t, want, names(plain))
		full, err := c.ListDir(ctx, "d", true)
		require.NoError(t, err)
		require.Equal(t, want, names(full))
	}
	check(want)

	ld, err := c.Lock(ctx, "d", "held")
	require.NoError(t, err)
	withLocks := slices.Clone(want)
	withLocks = append(withLocks, "locks")
	slices.Sort(withLocks)
	check(withLocks)
	require.NoError(t, ld.Unlock(ctx))

	// The locks znode outlives the lock, empty, until the server's
	// container reaper (every 100 ms under zktest) deletes it: hidden
	// either way. An empty container that never had a child is never
	// reaped, so the hidden-while-empty case is checked for sure below.
	check(want)
	raw := openRaw(t)
	exists, _, err := raw.Exists(root + "/d/locks")
	require.NoError(t, err)
	if !exists {
		_, err := raw.CreateContainer(root+"/d/locks", nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
		if !errors.Is(err, zk.ErrNodeExists) {
			require.NoError(t, err)
		}
	}
	check(want)
}

// openRaw opens a raw client on the test server, closed when t ends.
func openRaw(t *testing.T) *zk.Conn {
	t.Helper()
	raw, _, err := zk.Connect([]string{testServer}, testSessionTimeout, zk.WithLogInfo(false))
	require.NoError(t, err)
	t.Cleanup(raw.Close)
	return raw
}

// TestListDirCacheFollowsChanges: a names-only ListDir of a large
// directory shows every change another client made since the last
// listing, although it takes an unchanged directory's sorted names from
// its listCache: a child created, a child deleted, one replaced by
// another (the same NumChildren, another Cversion), and the directory
// deleted and created again with as many children under other names (the
// same Cversion and NumChildren, another Czxid).
func TestListDirCacheFollowsChanges(t *testing.T) {
	ctx := t.Context()
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := openRaw(t)
	mk := func(prefix string, n int) []string {
		var names []string
		for i := range n {
			names = append(names, fmt.Sprintf("%s%03d", prefix, i))
		}
		return names
	}
	dir := root + "/d"
	create := func(names []string) {
		for _, n := range names {
			_, err := raw.Create(dir+"/"+n, nil, 0, zk.WorldACL(zk.PermAll))
			require.NoError(t, err)
		}
	}
	want := mk("a", 80)
	_, err := c.Create(ctx, "d/"+want[0], nil) // and the directories above
	require.NoError(t, err)
	create(want[1:])
	check := func(want []string) {
		t.Helper()
		for range 2 { // the second listing is the cache's
			es, err := c.ListDir(ctx, "d", false)
			require.NoError(t, err)
			got := make([]string, len(es))
			for i, e := range es {
				got[i] = e.Name
			}
			require.Equal(t, want, got)
		}
	}
	check(want)

	create([]string{"a500"})
	want = append(want, "a500")
	check(want)

	require.NoError(t, raw.Delete(dir+"/a007", -1))
	want = slices.DeleteFunc(want, func(n string) bool { return n == "a007" })
	check(want)

	// As many children as before, one of them another.
	require.NoError(t, raw.Delete(dir+"/a010", -1))
	create([]string{"a600"})
	want = append(slices.DeleteFunc(want, func(n string) bool { return n == "a010" }), "a600")
	check(want)

	// Gone and back with other names: Cversion counts this incarnation's
	// child changes only, so it and NumChildren are what they were.
	_, st, err := raw.Children(dir)
	require.NoError(t, err)
	for _, n := range want {
		require.NoError(t, raw.Delete(dir+"/"+n, -1))
	}
	require.NoError(t, raw.Delete(dir, -1))
	_, err = raw.Create(dir, nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	other := mk("b", len(want)-1)
	create(other)
	// Bring Cversion to the old incarnation's: one more create and
	// delete per change the old one had beyond its creates.
	for i := int32(len(other)); i+2 <= st.Cversion; i += 2 {
		create([]string{"tmp"})
		require.NoError(t, raw.Delete(dir+"/tmp", -1))
	}
	create([]string{"b999"})
	other = append(other, "b999")
	_, st2, err := raw.Children(dir)
	require.NoError(t, err)
	require.Equal(t, st.Cversion, st2.Cversion, "the test needs the old Cversion")
	require.Equal(t, st.NumChildren, st2.NumChildren)
	check(other)
}
