package test

import (
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// testCreate: Create stores contents and returns the version Get reports;
// "/a" and "a" name the same file; a second Create is NodeExists and leaves
// the file alone; empty and binary values round-trip; other connections see
// the file.
func testCreate(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	v := mustCreate(t, ctx, c, "a/b", "one")
	requireFile(t, ctx, c, "a/b", "one", v)
	requireFile(t, ctx, c, "/a/b", "one", v)

	_, err := c.Create(ctx, "a/b", []byte("two"))
	requireCode(t, err, topo.NodeExists, "Create of an existing file")
	_, err = c.Create(ctx, "/a/b", []byte("two"))
	requireCode(t, err, topo.NodeExists, "Create of an existing file with a leading /")
	requireFile(t, ctx, c, "a/b", "one", v)

	c2 := s.conn()
	requireFile(t, ctx, c2, "a/b", "one", v)
	_, err = c2.Create(ctx, "a/b", []byte("three"))
	requireCode(t, err, topo.NodeExists, "Create of an existing file from another connection")

	// Missing parents are created; deep paths work.
	mustCreate(t, ctx, c, "x/y/z/deep", "deep")
	requireFile(t, ctx, c2, "x/y/z/deep", "deep", nil)

	// Empty value.
	ve := mustCreate(t, ctx, c, "empty", "")
	got, gv, err := c.Get(ctx, "empty")
	require.NoError(t, err)
	require.Empty(t, got)
	require.Equal(t, ve.String(), gv.String())

	// Every byte value round-trips.
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	_, err = c.Create(ctx, "bin", bin)
	require.NoError(t, err)
	got, _, err = c.Get(ctx, "bin")
	require.NoError(t, err)
	require.Equal(t, bin, got)

	// Non-ASCII names are fine.
	mustCreate(t, ctx, c, "dir/naïve-ключ-鍵", "utf8")
	requireFile(t, ctx, c2, "dir/naïve-ключ-鍵", "utf8", nil)
}

// testUpdate: a nil version writes unconditionally and creates; a current
// version succeeds; a stale one is BadVersion and changes nothing; every
// write changes the version.
func testUpdate(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	// nil version creates an absent file.
	v0 := mustUpdate(t, ctx, c, "u/f", "zero", nil)
	requireFile(t, ctx, c, "u/f", "zero", v0)

	v1 := mustUpdate(t, ctx, c, "u/f", "one", v0)
	require.NotEqual(t, v0.String(), v1.String(), "the version must change on every write")
	requireFile(t, ctx, c, "u/f", "one", v1)

	_, err := c.Update(ctx, "u/f", []byte("stale"), v0)
	requireCode(t, err, topo.BadVersion, "Update with a stale version")
	requireFile(t, ctx, c, "u/f", "one", v1)

	// Writing the same contents still changes the version.
	v2 := mustUpdate(t, ctx, c, "u/f", "one", v1)
	require.NotEqual(t, v1.String(), v2.String(), "the version must change on every write, even of equal contents")

	// nil version overwrites whatever is there.
	v3 := mustUpdate(t, ctx, c, "/u/f", "three", nil)
	require.NotEqual(t, v2.String(), v3.String())
	requireFile(t, ctx, c, "u/f", "three", v3)

	// A second connection's CAS with the current version wins, ours then is stale.
	c2 := s.conn()
	v4 := mustUpdate(t, ctx, c2, "u/f", "four", v3)
	_, err = c.Update(ctx, "u/f", []byte("late"), v3)
	requireCode(t, err, topo.BadVersion, "Update with a version another connection made stale")
	requireFile(t, ctx, c, "u/f", "four", v4)
}

// testUpdateAbsentWithVersion: a compare-and-set on an absent file is NoNode
// and never creates it, whatever the version (a deleted file's version, 0,
// 1: etcd's ModRevision 0 and Consul's CAS index 0 mean "absent", and
// ZooKeeper versions start at 0).
func testUpdateAbsentWithVersion(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	v := mustCreate(t, ctx, c, "gone/f", "x")
	require.NoError(t, c.Delete(ctx, "gone/f", nil))
	versions := []topo.Version{v}
	if _, ok := v.(topo.NumericVersion); ok {
		versions = append(versions, topo.NumericVersion(0), topo.NumericVersion(1))
	}
	other := mustCreate(t, ctx, c, "other", "o")
	versions = append(versions, other)
	for _, ver := range versions {
		for _, p := range []string{"gone/f", "never/f", "never"} {
			_, err := c.Update(ctx, p, []byte("created?"), ver)
			requireCode(t, err, topo.NoNode, "Update of an absent file with version "+ver.String())
			requireNoFile(t, ctx, c, p)
		}
	}
	kvs, err := c.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"other"}, kvPaths(kvs), "a versioned Update of an absent file created something")
	entries, err := c.ListDir(ctx, "", false)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"other"}, "ListDir of the root")
}

// testGet: NoNode for absent files; returned and passed slices are not
// shared with the store.
func testGet(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	_, _, err := c.Get(ctx, "missing")
	requireCode(t, err, topo.NoNode, "Get of an absent file")
	_, _, err = c.Get(ctx, "missing/deeper")
	requireCode(t, err, topo.NoNode, "Get of an absent file")

	in := []byte("original")
	v := mustCreateBytes(t, s, c, "g/f", in)
	in[0] = 'X' // the store must have copied it
	got, gv, err := c.Get(ctx, "g/f")
	require.NoError(t, err)
	require.Equal(t, "original", string(got))
	require.Equal(t, v.String(), gv.String())
	got[0] = 'Y' // nor may it share what it returns
	requireFile(t, ctx, c, "g/f", "original", v)

	in = []byte("updated")
	v2, err := c.Update(ctx, "g/f", in, v)
	require.NoError(t, err)
	in[0] = 'X'
	requireFile(t, ctx, c, "g/f", "updated", v2)
}

func mustCreateBytes(t require.TestingT, s *store, c topo.Conn, path string, contents []byte) topo.Version {
	v, err := c.Create(ctxFor(s.t), path, contents)
	require.NoError(t, err)
	return v
}

// testDelete: NoNode when absent, BadVersion when stale (file kept), the
// current or nil version deletes.
func testDelete(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	err := c.Delete(ctx, "d/missing", nil)
	requireCode(t, err, topo.NoNode, "Delete of an absent file")

	v0 := mustCreate(t, ctx, c, "d/f", "zero")
	v1 := mustUpdate(t, ctx, c, "d/f", "one", nil)
	err = c.Delete(ctx, "d/f", v0)
	requireCode(t, err, topo.BadVersion, "Delete with a stale version")
	requireFile(t, ctx, c, "d/f", "one", v1)

	require.NoError(t, c.Delete(ctx, "d/f", v1))
	requireNoFile(t, ctx, c, "d/f")
	err = c.Delete(ctx, "d/f", nil)
	requireCode(t, err, topo.NoNode, "second Delete")
	err = c.Delete(ctx, "d/f", v1)
	requireCode(t, err, topo.NoNode, "versioned Delete of an absent file")

	mustCreate(t, ctx, c, "d/f", "again")
	require.NoError(t, c.Delete(ctx, "/d/f", nil))
	requireNoFile(t, ctx, c, "d/f")

	// Deleting one file leaves its siblings alone.
	mustCreate(t, ctx, c, "d/a", "a")
	mustCreate(t, ctx, c, "d/b", "b")
	require.NoError(t, c.Delete(ctx, "d/a", nil))
	requireFile(t, ctx, c, "d/b", "b", nil)
}

// testList: a plain string prefix over file paths, sorted, each KV with its
// own version; NoNode when nothing matches.
func testList(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	_, err := c.List(ctx, "")
	requireCode(t, err, topo.NoNode, "List of an empty store")

	files := map[string]string{"a/b": "1", "a/bc": "2", "a/b/c": "3", "ab": "4", "x/y": "5"}
	versions := map[string]topo.Version{}
	for _, p := range []string{"x/y", "a/bc", "ab", "a/b/c", "a/b"} {
		versions[p] = mustCreate(t, ctx, c, p, files[p])
	}
	// Update one so that versions differ from creation order.
	versions["a/bc"] = mustUpdate(t, ctx, c, "a/bc", "2", nil)

	cases := []struct {
		prefix string
		want   []string
	}{
		{"a/b", []string{"a/b", "a/b/c", "a/bc"}},
		{"/a/b", []string{"a/b", "a/b/c", "a/bc"}},
		{"a/b/", []string{"a/b/c"}},
		{"a", []string{"a/b", "a/b/c", "a/bc", "ab"}},
		{"a/", []string{"a/b", "a/b/c", "a/bc"}},
		{"", []string{"a/b", "a/b/c", "a/bc", "ab", "x/y"}},
		{"/", []string{"a/b", "a/b/c", "a/bc", "ab", "x/y"}},
		{"x/y", []string{"x/y"}},
	}
	for _, tc := range cases {
		kvs, err := c.List(ctx, tc.prefix)
		require.NoErrorf(t, err, "List(%q)", tc.prefix)
		require.Equalf(t, tc.want, kvPaths(kvs), "List(%q)", tc.prefix)
		for _, kv := range kvs {
			require.Equalf(t, files[kv.Path], string(kv.Value), "List(%q): value of %q", tc.prefix, kv.Path)
			require.NotNilf(t, kv.Version, "List(%q): version of %q", tc.prefix, kv.Path)
			require.Equalf(t, versions[kv.Path].String(), kv.Version.String(), "List(%q): version of %q", tc.prefix, kv.Path)
			_, gv, err := c.Get(ctx, kv.Path)
			require.NoError(t, err)
			require.Equalf(t, gv.String(), kv.Version.String(), "List(%q): version of %q differs from Get's", tc.prefix, kv.Path)
		}
	}
	for _, p := range []string{"q", "x/y/", "a/b/c/", "b", "abc"} {
		_, err := c.List(ctx, p)
		requireCode(t, err, topo.NoNode, "List of a prefix nothing matches: "+p)
	}
}

// testListExcludesInternals: lock and election entries never show up in
// List, only files do.
func testListExcludesInternals(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	v := mustCreate(t, ctx, c, "d/f", "file")
	mustLock(t, ctx, c, "d", "holder")
	ln, err := c.LockName(ctx, "named", "holder")
	require.NoError(t, err)
	unlockOnCleanup(t, ln)
	p := participate(t, c, "elec", "id1")
	_, err = p.WaitForLeadership()
	require.NoError(t, err)

	for _, prefix := range []string{"", "d", "d/"} {
		kvs, err := c.List(ctx, prefix)
		require.NoErrorf(t, err, "List(%q)", prefix)
		require.Equalf(t, []string{"d/f"}, kvPaths(kvs), "List(%q) while a lock, a named lock and a leader are held", prefix)
		require.Equal(t, v.String(), kvs[0].Version.String())
	}
	for _, prefix := range []string{"named", "elec", "elections", "e"} {
		_, err := c.List(ctx, prefix)
		requireCode(t, err, topo.NoNode, "List of lock or election internals: "+prefix)
	}
}

// testGetVersion: older contents by version, NoNode for a version the file
// never had; or NoImplementation when the backend declares it unsupported.
func testGetVersion(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	if s.opts.GetVersionUnsupported {
		v := mustCreate(t, ctx, c, "h/f", "one")
		n, err := backendkit.VersionNumber("h/f", v)
		require.NoError(t, err)
		_, err = c.GetVersion(ctx, "h/f", n)
		requireCode(t, err, topo.NoImplementation, "GetVersion on a backend that declares it unsupported")
		return
	}

	before := mustCreate(t, ctx, c, "h/other", "other")
	v1 := mustCreate(t, ctx, c, "h/f", "one")
	v2 := mustUpdate(t, ctx, c, "h/f", "two", nil)
	v3 := mustUpdate(t, ctx, c, "h/f", "three", v2)
	for _, tc := range []struct {
		v    topo.Version
		want string
	}{{v1, "one"}, {v2, "two"}, {v3, "three"}} {
		n, err := backendkit.VersionNumber("h/f", tc.v)
		require.NoError(t, err, "GetVersion needs NumericVersion versions")
		got, err := c.GetVersion(ctx, "h/f", n)
		require.NoErrorf(t, err, "GetVersion(h/f, %d)", n)
		require.Equalf(t, tc.want, string(got), "GetVersion(h/f, %d)", n)
		got, err = c.GetVersion(ctx, "/h/f", n)
		require.NoError(t, err)
		require.Equal(t, tc.want, string(got))
	}
	nb, err := backendkit.VersionNumber("h/other", before)
	require.NoError(t, err)
	_, err = c.GetVersion(ctx, "h/f", nb)
	requireCode(t, err, topo.NoNode, "GetVersion at a version from before the file existed")
	n1, _ := backendkit.VersionNumber("h/f", v1)
	_, err = c.GetVersion(ctx, "h/missing", n1)
	requireCode(t, err, topo.NoNode, "GetVersion of a file that never existed")
}

// testErrorsNamePath: errors are *topo.Error values naming the path.
func testErrorsNamePath(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	_, _, err := c.Get(ctx, "no/such/file")
	requireCode(t, err, topo.NoNode, "Get")
	requireNamesPath(t, err, "no/such/file")

	v := mustCreate(t, ctx, c, "e/dup", "x")
	_, err = c.Create(ctx, "e/dup", nil)
	requireCode(t, err, topo.NodeExists, "Create")
	requireNamesPath(t, err, "e/dup")

	mustUpdate(t, ctx, c, "e/dup", "y", nil)
	_, err = c.Update(ctx, "e/dup", nil, v)
	requireCode(t, err, topo.BadVersion, "Update")
	requireNamesPath(t, err, "e/dup")

	err = c.Delete(ctx, "e/dup", v)
	requireCode(t, err, topo.BadVersion, "Delete")
	requireNamesPath(t, err, "e/dup")

	err = c.Delete(ctx, "e/absent", nil)
	requireCode(t, err, topo.NoNode, "Delete")
	requireNamesPath(t, err, "e/absent")

	_, err = c.ListDir(ctx, "no/dir", false)
	requireCode(t, err, topo.NoNode, "ListDir")
	requireNamesPath(t, err, "no/dir")

	_, err = c.Create(ctx, "bad//path", nil)
	requireCode(t, err, topo.InvalidPath, "Create")
	requireNamesPath(t, err, "bad//path")
}
