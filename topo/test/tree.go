package test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// testDirectoryNeverAFile: while a writer creates and deletes the only
// file of a directory (two levels deep, beside a file that stays), round
// after round, readers on other connections never see a directory as a
// file: Get of a directory path is NoNode, List never lists it, a full
// ListDir never types it TypeFile, and a WatchRecursive over the tree
// reports only files the writer wrote (no event for a directory, and a
// watch started meanwhile lists none among its initial values). On
// ZooKeeper, where an empty znode without children reads as an empty
// file, this catches a directory znode that a Create makes, or a Delete
// empties, in a request of its own before or after the file's.
func testDirectoryNeverAFile(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	w, r, rw := s.conn(), s.conn(), s.conn()
	const rounds = 40
	mustCreate(t, ctx, w, "a/keep", "k")
	files := map[string]bool{"a/keep": true, "a/d/e/f": true, "a/d/g": true}
	dirs := []string{"a/d", "a/d/e"}

	_, ch := mustWatchRecursive(t, ctx, rw, "a/", "WatchRecursive(a/)")
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	report := func(format string, args ...any) {
		select {
		case errs <- fmt.Errorf(format, args...):
		default:
		}
	}
	wg.Go(func() {
		for !stop.Load() {
			for _, d := range dirs {
				if _, _, err := r.Get(ctx, d); !topo.IsErrType(err, topo.NoNode) {
					report("Get(%q) of a directory: %v, want NoNode", d, err)
				}
			}
			kvs, err := r.List(ctx, "a/")
			if err != nil {
				report("List(a/): %v", err)
			}
			for _, kv := range kvs {
				if !files[kv.Path] {
					report("List(a/) lists %q, which no writer wrote", kv.Path)
				}
			}
			for _, dir := range []string{"a", "a/d"} {
				entries, err := r.ListDir(ctx, dir, true)
				if err != nil && !topo.IsErrType(err, topo.NoNode) {
					report("ListDir(%q): %v", dir, err)
				}
				for _, e := range entries {
					if p := dir + "/" + e.Name; !files[p] && e.Type == topo.TypeFile {
						report("ListDir(%q) types the directory %q a file", dir, e.Name)
					}
				}
			}
			wctx, cancel := context.WithCancel(ctx)
			init, wch, err := r.WatchRecursive(wctx, "a/")
			if err != nil {
				report("WatchRecursive(a/): %v", err)
			}
			for _, wd := range init {
				if !files[wd.Path] {
					report("WatchRecursive(a/) lists %q among its initial values, which no writer wrote", wd.Path)
				}
			}
			cancel()
			drainNow(wch)
		}
	})
	for i := range rounds {
		if len(errs) == cap(errs) {
			break
		}
		mustCreate(t, ctx, w, "a/d/e/f", fmt.Sprint(i))
		mustCreate(t, ctx, w, "a/d/g", fmt.Sprint(i))
		require.NoError(t, w.Delete(ctx, "a/d/g", nil))
		require.NoError(t, w.Delete(ctx, "a/d/e/f", nil))
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	var failed []string
	for err := range errs {
		failed = append(failed, err.Error())
	}
	require.Empty(t, failed, "what readers saw while a directory's only file came and went")
	// Every event the running watch sent is one of a file the writer wrote.
	mustCreate(t, ctx, w, "a/end", "end")
	waitRecursive(t, ch, "a/", "the running WatchRecursive(a/)", func(wd *topo.WatchDataRecursive) bool {
		require.Truef(t, files[wd.Path] || wd.Path == "a/end", "WatchRecursive(a/) sent an event for %q (err %v), which no writer wrote", wd.Path, wd.Err)
		return wd.Path == "a/end"
	})
}

// testFileWithChildren: a path that is a file and has files below it is
// listed as a directory (it has entries under it) by a full ListDir of
// its parent, read as a file by Get, List, Watch and WatchRecursive, and
// stays a directory when the file goes; an unconditional Update of a
// path that is only a directory makes it a file too, and a Watch of it
// ends with NoNode when that file is deleted while its children stay.
func testFileWithChildren(s *store) {
	t, ctx, c, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()

	mustCreate(t, ctx, c, "p/c", "child")
	vp := mustUpdate(t, ctx, c, "p", "file p", nil) // only a directory until now
	requireFile(t, ctx, c2, "p", "file p", vp)
	entries, err := c2.ListDir(ctx, "", true)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"p"}, "ListDir of the root")
	require.Equal(t, topo.TypeDirectory, entries[0].Type, "a file with files below it is a directory in a full listing")
	kvs, err := c2.List(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, []string{"p", "p/c"}, kvPaths(kvs))

	cur, ch := mustWatch(t, ctx, c2, "p", "Watch(p)")
	require.Equal(t, "file p", string(cur.Contents))
	init, rch := mustWatchRecursive(t, ctx, c2, "p", "WatchRecursive(p)")
	require.Equal(t, map[string]string{"p": "file p", "p/c": "child"}, recursiveInitial(t, ctx, c2, init))

	vp2 := mustUpdate(t, ctx, c, "p", "file p, 2", vp)
	wd := waitWatchValue(t, ch, "file p, 2", "Watch(p) of a file with children")
	require.Equal(t, vp2.String(), wd.Version.String())

	require.NoError(t, c.Delete(ctx, "p", vp2))
	waitWatchErr(t, ch, topo.NoNode, "Watch(p) when the file p goes and p/c stays")
	waitRecursive(t, rch, "p", "WatchRecursive(p) when the file p goes", func(wd *topo.WatchDataRecursive) bool {
		require.NotEqualf(t, "p/c", wd.Path, "WatchRecursive(p) sent an event of p/c, which did not change: %+v", wd)
		return wd.Path == "p" && topo.IsErrType(wd.Err, topo.NoNode)
	})
	requireNoFile(t, ctx, c2, "p")
	requireFile(t, ctx, c2, "p/c", "child", nil)
	entries, err = c2.ListDir(ctx, "", true)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"p"}, "ListDir of the root after the file p went")
	require.Equal(t, topo.TypeDirectory, entries[0].Type)

	// The file comes back at the directory's path; the watch reports it.
	vp3 := mustCreate(t, ctx, c, "p", "file p, 3")
	wr := waitRecursive(t, rch, "p", "WatchRecursive(p) when the file p comes back", func(wd *topo.WatchDataRecursive) bool {
		require.NotEqual(t, "p/c", wd.Path)
		return wd.Path == "p" && wd.Err == nil
	})
	require.Equal(t, "file p, 3", string(wr.Contents))
	require.Equal(t, vp3.String(), wr.Version.String())

	// The children go; the file stays.
	require.NoError(t, c.Delete(ctx, "p/c", nil))
	waitRecursive(t, rch, "p", "WatchRecursive(p) when p/c goes", func(wd *topo.WatchDataRecursive) bool {
		require.NotEqual(t, "p", wd.Path, "the file p did not change")
		return wd.Path == "p/c" && topo.IsErrType(wd.Err, topo.NoNode)
	})
	requireFile(t, ctx, c2, "p", "file p, 3", vp3)
	entries, err = c2.ListDir(ctx, "", true)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"p"}, "ListDir of the root after p/c went")
	require.Equal(t, topo.TypeFile, entries[0].Type)
	_, err = c2.ListDir(ctx, "p", false)
	requireCode(t, err, topo.NoNode, "ListDir of a file without children")
}

// testWatchVersionsIncrease: along a Watch, and along one file's events of
// a WatchRecursive, the versions of one file's values only increase (no
// older value after a newer one), and the last value is the last write.
func testWatchVersionsIncrease(s *store) {
	t, ctx, c, w := s.t, ctxFor(s.t), s.conn(), s.conn()
	// Created through the watching connection (a Cache knows its own
	// writes at once), written through the other.
	v := mustCreate(t, ctx, c, "o/f", "0")
	mustCreate(t, ctx, c, "o/g", "0")
	_, ch := mustWatch(t, ctx, c, "o/f", "Watch(o/f)")
	_, rch := mustWatchRecursive(t, ctx, c, "o/", "WatchRecursive(o/)")
	const n = 60
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 1; i <= n; i++ {
			_, err := w.Update(ctx, "o/g", []byte(fmt.Sprint(i)), nil)
			if err != nil {
				return
			}
		}
	})
	for i := 1; i <= n; i++ {
		v = mustUpdate(t, ctx, w, "o/f", fmt.Sprint(i), nil)
	}
	wg.Wait()
	last, err := backendkit.VersionNumber("o/f", v)
	require.NoError(t, err)
	prev := int64(-1)
	for {
		wd, ok := recv(t, ch, "Watch(o/f)")
		require.True(t, ok, "Watch(o/f) closed")
		require.NoError(t, wd.Err)
		vn, err := backendkit.VersionNumber("o/f", wd.Version)
		require.NoError(t, err)
		require.Greaterf(t, vn, prev, "Watch(o/f) sent version %d after %d", vn, prev)
		prev = vn
		if vn == last {
			require.Equal(t, fmt.Sprint(n), string(wd.Contents), "Watch(o/f)'s last value")
			break
		}
	}
	prevs := map[string]int64{}
	// Read through the writer: a Cache's reads may lag another
	// connection's writes (only its own are seen at once).
	gv, _, err := w.Get(ctx, "o/g")
	require.NoError(t, err)
	done := map[string]bool{}
	waitRecursive(t, rch, "o/", "WatchRecursive(o/)", func(wd *topo.WatchDataRecursive) bool {
		require.NoError(t, wd.Err)
		vn, err := backendkit.VersionNumber(wd.Path, wd.Version)
		require.NoError(t, err)
		if p, ok := prevs[wd.Path]; ok {
			require.Greaterf(t, vn, p, "WatchRecursive sent %s at version %d after %d", wd.Path, vn, p)
		}
		prevs[wd.Path] = vn
		done[wd.Path] = done[wd.Path] || string(wd.Contents) == fmt.Sprint(n)
		return done["o/f"] && done["o/g"]
	})
	require.Equal(t, fmt.Sprint(n), string(gv))
}

// testGetVersionEdges: GetVersion returns NoNode for a version the file
// never held (another file's, one between two of its writes, one not yet
// reached, the version its delete took), and an earlier incarnation's
// value for that incarnation's version; NoImplementation where declared.
func testGetVersionEdges(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()
	if s.opts.GetVersionUnsupported {
		return // testGetVersion checks NoImplementation
	}
	num := func(p string, v topo.Version) int64 {
		n, err := backendkit.VersionNumber(p, v)
		require.NoError(t, err)
		return n
	}
	v1 := num("h/f", mustCreate(t, ctx, c, "h/f", "one"))
	other := num("h/g", mustCreate(t, ctx, c, "h/g", "other"))
	v2 := num("h/f", mustUpdate(t, ctx, c, "h/f", "two", nil))
	require.NoError(t, c.Delete(ctx, "h/f", nil))
	v3 := num("h/f", mustCreate(t, ctx, c, "h/f", "three"))
	got, err := c.GetVersion(ctx, "h/f", v3)
	require.NoErrorf(t, err, "GetVersion(h/f, %d)", v3)
	require.Equal(t, "three", string(got))
	// An earlier incarnation's versions: etcd keeps them (the value);
	// memorytopo and the template discard a file's history when it is
	// deleted (documented), and then say NoNode.
	for _, tc := range []struct {
		v    int64
		want string
	}{{v1, "one"}, {v2, "two"}} {
		got, err := c.GetVersion(ctx, "h/f", tc.v)
		if err != nil {
			requireOneOf(t, err, fmt.Sprintf("GetVersion(h/f, %d) of an earlier incarnation", tc.v), topo.NoNode, topo.Compacted)
			continue
		}
		require.Equal(t, tc.want, string(got))
	}
	// Versions it never held: older than the current incarnation (which
	// memorytopo, keeping no history across a delete, calls Compacted),
	// and one not reached yet.
	for _, v := range []int64{0, other} {
		_, err := c.GetVersion(ctx, "h/f", v)
		requireOneOf(t, err, fmt.Sprintf("GetVersion(h/f, %d), a version it never held", v), topo.NoNode, topo.Compacted)
	}
	_, err = c.GetVersion(ctx, "h/f", v3+1<<30)
	requireCode(t, err, topo.NoNode, "GetVersion of a version not reached yet")
	_, err = c.GetVersion(ctx, "h", v1)
	requireCode(t, err, topo.NoNode, "GetVersion of a path that is only a directory")
}

// testRootLevel: files directly under the root, a lock on the root, and
// the root emptied: ListDir and List of the root show only files, and
// nothing of the lock once it is released.
func testRootLevel(s *store) {
	t, ctx, c, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()
	mustCreate(t, ctx, c, "f", "f")
	mustCreate(t, ctx, c, "g/h", "h")
	l, err := c.Lock(ctx, "", "root holder")
	require.NoError(t, err, "Lock of the root, which holds files")
	_, err = c2.TryLock(shortCtx(t, promptWait), "/", "other")
	requireCode(t, err, topo.NodeExists, "TryLock of a locked root")
	kvs, err := c2.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"f", "g/h"}, kvPaths(kvs), "List of the root while it is locked")
	require.NoError(t, l.Unlock(ctx))
	entries, err := c2.ListDir(ctx, "", true)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"f", "g"}, "ListDir of the root after its lock was released")
	for _, e := range entries {
		require.False(t, e.Ephemeral, "ListDir of the root after its lock was released: %+v", e)
	}
	require.NoError(t, c.Delete(ctx, "f", nil))
	require.NoError(t, c.Delete(ctx, "/g/h", nil))
	_, err = c2.ListDir(ctx, "", false)
	requireCode(t, err, topo.NoNode, "ListDir of the emptied root")
	_, err = c2.List(ctx, "")
	requireCode(t, err, topo.NoNode, "List of the emptied root")
	init, ch := mustWatchRecursive(t, ctx, c2, "", "WatchRecursive of the emptied root")
	require.Empty(t, init)
	mustCreate(t, ctx, c, "z", "z")
	waitRecursive(t, ch, "", "WatchRecursive of the root", func(wd *topo.WatchDataRecursive) bool {
		require.Falsef(t, strings.Contains(wd.Path, "lock"), "event of %q", wd.Path)
		return wd.Path == "z"
	})
}

// testTxnFileAndChild: one Txn creates a file and a file below it (in
// either order), another deletes both: both exist after the first, with
// the versions it returned, and after the second neither does, nor does
// any directory of theirs; a Txn deleting a directory's last file leaves
// no directory behind either.
func testTxnFileAndChild(s *store) {
	t, ctx, c, r := s.t, ctxFor(s.t), s.conn(), s.conn()
	mustCreate(t, ctx, c, "keep", "k")
	for i, ops := range [][]topo.TxnOp{
		{topo.CreateOp("n/a", []byte("a")), topo.CreateOp("n/a/b", []byte("b"))},
		{topo.CreateOp("n/a/b", []byte("b")), topo.CreateOp("n/a", []byte("a"))},
	} {
		vs, err := c.Txn(ctx, ops...)
		require.NoErrorf(t, err, "Txn %d creating a file and a file below it", i)
		for j, op := range ops {
			requireFile(t, ctx, r, op.Path, string(op.Contents), vs[j])
		}
		entries, err := r.ListDir(ctx, "n", true)
		require.NoError(t, err)
		requireSortedNames(t, entries, []string{"a"}, "ListDir(n)")
		require.Equal(t, topo.TypeDirectory, entries[0].Type)
		_, err = c.Txn(ctx, topo.DeleteOp("n/a", nil), topo.DeleteOp("n/a/b", nil))
		require.NoErrorf(t, err, "Txn %d deleting a file and the file below it", i)
		requireNoFile(t, ctx, r, "n/a")
		requireNoFile(t, ctx, r, "n/a/b")
		_, err = r.ListDir(ctx, "n", false)
		requireCode(t, err, topo.NoNode, "ListDir(n) after a Txn deleted every file below it")
		kvs, err := r.List(ctx, "")
		require.NoError(t, err)
		require.Equal(t, []string{"keep"}, kvPaths(kvs))
	}
	mustCreate(t, ctx, c, "m/d/e/f", "f")
	_, err := c.Txn(ctx, topo.DeleteOp("m/d/e/f", nil))
	require.NoError(t, err)
	entries, err := r.ListDir(ctx, "", false)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"keep"}, "ListDir of the root after a Txn deleted the last file of m/d/e")
}

// testWatchRecursiveExcludesInternals: a WatchRecursive of the root (and
// of a directory being locked) reports files only: locks taken and
// released (Lock, TryLock, LockName), a leader elected and stopped, and
// their entries and directories coming and going send no event, and
// neither does the clean-up of what they leave.
func testWatchRecursiveExcludesInternals(s *store) {
	t, ctx, c, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()
	mustCreate(t, ctx, c, "d/f", "f")
	_, root := mustWatchRecursive(t, ctx, c2, "", "WatchRecursive of the root")
	_, dir := mustWatchRecursive(t, ctx, c2, "d", "WatchRecursive(d)")

	l := mustLock(t, ctx, c, "d", "holder")
	require.NoError(t, l.Unlock(ctx))
	tl, err := c.TryLock(ctx, "d", "holder")
	require.NoError(t, err)
	require.NoError(t, tl.Unlock(ctx))
	ln, err := c.LockName(ctx, "named/x", "holder")
	require.NoError(t, err)
	require.NoError(t, ln.Unlock(ctx))
	p := participate(t, c, "elec", "id1")
	_, err = p.WaitForLeadership()
	require.NoError(t, err)
	p.Stop()
	l = mustLock(t, ctx, c, "d", "holder")
	require.NoError(t, c.Delete(ctx, "d/f", nil)) // d's last file goes while it is locked
	require.NoError(t, l.Unlock(ctx))

	mustCreate(t, ctx, c, "z", "end")
	mustCreate(t, ctx, c, "d/end", "end")
	for _, w := range []struct {
		prefix string
		ch     <-chan *topo.WatchDataRecursive
		last   string
	}{{"", root, "d/end"}, {"d", dir, "d/end"}} {
		waitRecursive(t, w.ch, w.prefix, "WatchRecursive("+w.prefix+")", func(wd *topo.WatchDataRecursive) bool {
			require.Truef(t, wd.Path == "d/f" || wd.Path == "z" || wd.Path == "d/end",
				"WatchRecursive(%q) sent an event of %q (err %v): locks and elections are no files", w.prefix, wd.Path, wd.Err)
			return wd.Path == w.last
		})
	}
}

// testWatchRecursiveBaseGoes: a WatchRecursive of a directory's prefix
// ("a/d/") keeps reporting when the directory itself goes (its last file
// deleted) and comes back, again and again, and when the prefix names a
// directory only in part ("a/d", also matching "a/dx").
func testWatchRecursiveBaseGoes(s *store) {
	t, ctx, c, w := s.t, ctxFor(s.t), s.conn(), s.conn()
	// Written through the watching connection: a Conn that serves reads
	// from a cache (topo/cache) knows its own writes at once.
	mustCreate(t, ctx, w, "a/keep", "k")
	mustCreate(t, ctx, w, "a/d/f", "0")
	init, full := mustWatchRecursive(t, ctx, w, "a/d/", "WatchRecursive(a/d/)")
	require.Equal(t, map[string]string{"a/d/f": "0"}, recursiveInitial(t, ctx, w, init))
	init, part := mustWatchRecursive(t, ctx, w, "a/d", "WatchRecursive(a/d)")
	require.Equal(t, map[string]string{"a/d/f": "0"}, recursiveInitial(t, ctx, w, init))
	for i := range 3 {
		require.NoError(t, c.Delete(ctx, "a/d/f", nil))
		for _, ch := range []<-chan *topo.WatchDataRecursive{full, part} {
			waitRecursive(t, ch, "a/d", "the delete of the base's last file", func(wd *topo.WatchDataRecursive) bool {
				require.Equalf(t, "a/d/f", wd.Path, "event %+v", wd)
				return topo.IsErrType(wd.Err, topo.NoNode)
			})
		}
		val := fmt.Sprint(i + 1)
		v := mustCreate(t, ctx, c, "a/d/f", val)
		mustCreate(t, ctx, c, "a/dx/g", val)
		wd := waitRecursive(t, full, "a/d/", "the base's file again", func(wd *topo.WatchDataRecursive) bool {
			require.Equalf(t, "a/d/f", wd.Path, "event %+v", wd)
			return wd.Err == nil && string(wd.Contents) == val
		})
		require.Equal(t, v.String(), wd.Version.String())
		seen := map[string]bool{}
		waitRecursive(t, part, "a/d", "the base's file again, and a/dx/g", func(wd *topo.WatchDataRecursive) bool {
			require.Containsf(t, []string{"a/d/f", "a/dx/g"}, wd.Path, "event %+v", wd)
			seen[wd.Path] = seen[wd.Path] || (wd.Err == nil && string(wd.Contents) == val)
			return seen["a/d/f"] && seen["a/dx/g"]
		})
		require.NoError(t, c.Delete(ctx, "a/dx/g", nil))
		waitRecursive(t, part, "a/d", "the delete of a/dx/g", func(wd *topo.WatchDataRecursive) bool {
			require.Equalf(t, "a/dx/g", wd.Path, "event %+v", wd)
			return topo.IsErrType(wd.Err, topo.NoNode)
		})
	}
}

// testEmptyFileWithFilesBelow: a write of empty contents that would make
// an empty file with files below it is never reported done and lost. A
// store either holds such a file (memorytopo, etcd, Consul: Get returns
// the empty contents, the file below stays) or cannot (ZooKeeper, where an
// empty znode with children reads as a directory) and refuses the write
// with InvalidArgument (inside a *topo.TxnError for a Txn), writing
// nothing. Each case runs on its own paths: Create and Update (with and
// without a version) onto a directory or a file with a file below it, the
// same as Txn ops, and a Txn writing an empty file and a file below it.
func testEmptyFileWithFilesBelow(s *store) {
	t, ctx, c, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()
	type outcome struct {
		name   string
		p      string
		before string // "" when p is only a directory (or absent) before
		write  func() (topo.Version, error)
	}
	var cases []outcome
	dir := func(name, p string, write func(p string) (topo.Version, error)) {
		mustCreate(t, ctx, c, p+"/x", "x")
		cases = append(cases, outcome{name, p, "", func() (topo.Version, error) { return write(p) }})
	}
	file := func(name, p string, write func(p string, v topo.Version) (topo.Version, error)) {
		mustCreate(t, ctx, c, p+"/x", "x")
		v := mustUpdate(t, ctx, c, p, "v", nil)
		cases = append(cases, outcome{name, p, "v", func() (topo.Version, error) { return write(p, v) }})
	}
	txnVersion := func(vs []topo.Version, err error) (topo.Version, error) {
		if err != nil {
			return nil, err
		}
		return vs[0], nil
	}
	dir("Create onto a directory", "d1", func(p string) (topo.Version, error) { return c.Create(ctx, p, nil) })
	dir("Update onto a directory", "d2", func(p string) (topo.Version, error) { return c.Update(ctx, p, nil, nil) })
	file("Update of a file with a file below", "f3", func(p string, _ topo.Version) (topo.Version, error) { return c.Update(ctx, p, nil, nil) })
	file("compare-and-set Update of a file with a file below", "f4", func(p string, v topo.Version) (topo.Version, error) { return c.Update(ctx, p, nil, v) })
	dir("Txn CreateOp onto a directory", "d5", func(p string) (topo.Version, error) { return txnVersion(c.Txn(ctx, topo.CreateOp(p, nil))) })
	dir("Txn UpdateOp onto a directory", "d6", func(p string) (topo.Version, error) {
		return txnVersion(c.Txn(ctx, topo.UpdateOp(p, nil, nil)))
	})
	file("Txn UpdateOp of a file with a file below", "f7", func(p string, _ topo.Version) (topo.Version, error) {
		return txnVersion(c.Txn(ctx, topo.UpdateOp(p, nil, nil)))
	})
	file("Txn compare-and-set UpdateOp of a file with a file below", "f8", func(p string, v topo.Version) (topo.Version, error) {
		return txnVersion(c.Txn(ctx, topo.UpdateOp(p, nil, v)))
	})
	for _, k := range cases {
		v, err := k.write()
		if err == nil {
			t.Logf("%s: stored", k.name)
			requireFile(t, ctx, c2, k.p, "", v)
		} else {
			var te *topo.TxnError
			if errors.As(err, &te) {
				err = te.Err
			}
			requireCode(t, err, topo.InvalidArgument, k.name+": the write either succeeds, the empty file there, or is InvalidArgument")
			t.Logf("%s: refused (%v)", k.name, err)
			if k.before == "" {
				requireNoFile(t, ctx, c2, k.p)
			} else {
				requireFile(t, ctx, c2, k.p, k.before, nil)
			}
		}
		requireFile(t, ctx, c2, k.p+"/x", "x", nil)
	}

	// One Txn writing an empty file and a file below it.
	_, err := c.Txn(ctx, topo.CreateOp("n", nil), topo.CreateOp("n/x", []byte("x")))
	if err == nil {
		requireFile(t, ctx, c2, "n", "", nil)
		requireFile(t, ctx, c2, "n/x", "x", nil)
		return
	}
	var te *topo.TxnError
	require.ErrorAs(t, err, &te)
	requireCode(t, te.Err, topo.InvalidArgument, "Txn(CreateOp(n, empty), CreateOp(n/x))")
	requireNoFile(t, ctx, c2, "n")
	requireNoFile(t, ctx, c2, "n/x")
}
