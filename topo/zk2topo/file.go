package zk2topo

import (
	"context"
	"errors"
	"math"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
)

// isFile reports whether a znode is a file: it holds data, or has no
// children. An empty znode with children is only a directory (that is how
// intermediate directories are created), so an empty file that also has
// files below it is seen as a directory.
func isFile(st *zk.Stat) bool {
	return st.NumChildren == 0 || st.DataLength > 0
}

// internal reports whether the canonical path p is (or is inside) a lock or
// election znode rather than a file or directory.
func (c *Conn) internal(p string) bool {
	if p == electionsDir || strings.HasPrefix(p, electionsDir+"/") {
		return true
	}
	if c.root == "" && (p == "zookeeper" || strings.HasPrefix(p, "zookeeper/")) {
		return true // ZooKeeper's own system znodes
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == locksDir {
			return true
		}
	}
	return false
}

// Create creates filePath holding contents, creating missing parent
// directories, and returns version 0 (ZooKeeper's first Stat.Version). It
// costs one round trip when the parent exists. It returns NodeExists when
// the file exists; a znode that is only a directory (empty, with children)
// becomes the file instead. Errors: InvalidPath, InvalidArgument (value too
// large), NodeExists, Timeout/Interrupted (ctx), Closed, Unavailable.
func (c *Conn) Create(ctx context.Context, filePath string, contents []byte) (topo.Version, error) {
	p, err := topo.CheckCreate(filePath, contents)
	if err != nil {
		return nil, err
	}
	if err := c.begin(ctx, p); err != nil {
		return nil, err
	}
	if c.internal(p) {
		return nil, &topo.Error{Code: topo.InvalidPath, Path: p, Err: errors.New("zk2topo: \"locks\" and \"elections\" are reserved names")}
	}
	return c.create(ctx, p, contents)
}

func (c *Conn) create(ctx context.Context, p string, contents []byte) (topo.Version, error) {
	zp := c.zkPath(p)
	for attempt := 0; ; attempt++ {
		err := c.do(ctx, p, func() error {
			_, err := c.zk.Create(zp, contents, zk.FlagPersistent, c.acl)
			return err
		})
		switch {
		case err == nil:
			return topo.NumericVersion(0), nil
		case errors.Is(err, zk.ErrNoNode) && attempt < 10:
			if err := c.makeDirs(ctx, p, zkDir(zp)); err != nil {
				return nil, err
			}
		case errors.Is(err, zk.ErrNodeExists) && attempt < 10:
			// A directory znode becomes the file; a file stays (NodeExists).
			var st *zk.Stat
			var exists bool
			err := c.read(ctx, p, func() error {
				var err error
				exists, st, err = c.zk.Exists(zp)
				return err
			})
			if err != nil {
				return nil, c.convert(err, p)
			}
			if !exists {
				continue
			}
			if isFile(st) {
				return nil, topo.NewError(topo.NodeExists, p)
			}
			var nst *zk.Stat
			err = c.do(ctx, p, func() error {
				var err error
				nst, err = c.zk.Set(zp, contents, st.Version)
				return err
			})
			if err == nil {
				return topo.NumericVersion(nst.Version), nil
			}
			if !errors.Is(err, zk.ErrBadVersion) && !errors.Is(err, zk.ErrNoNode) {
				return nil, c.convert(err, p)
			}
		default:
			return nil, c.convert(err, p)
		}
	}
}

// makeDirs creates the directory znode dir (a znode path) and its missing
// ancestors. p names the file for errors.
func (c *Conn) makeDirs(ctx context.Context, p, dir string) error {
	if dir == "/" || dir == "" {
		return nil
	}
	for attempt := 0; attempt < 10; attempt++ {
		err := c.do(ctx, p, func() error {
			_, err := c.zk.Create(dir, nil, zk.FlagPersistent, c.acl)
			return err
		})
		switch {
		case err == nil:
			// A new directory: its version is 0 and it has no locks child.
			c.dirs.set(dir, 0)
			if path.Base(dir) != locksDir {
				c.dirs.setAbsent(dir + "/" + locksDir)
			}
			return nil
		case errors.Is(err, zk.ErrNodeExists):
			return nil
		case errors.Is(err, zk.ErrNoNode):
			if err := c.makeDirs(ctx, p, zkDir(dir)); err != nil {
				return err
			}
		default:
			return c.convert(err, p)
		}
	}
	return topo.NewError(topo.Unavailable, p)
}

// zkVersion converts a checked version number (see topo.CheckUpdate) for a
// compare-and-set: topo.AnyVersion is ZooKeeper's -1 ("any version"). ok
// is false when no ZooKeeper version can equal it (it is larger than an
// int32).
func zkVersion(n int64) (ver int32, ok bool) {
	if n > math.MaxInt32 {
		return 0, false
	}
	return int32(n), true
}

// Update writes contents to filePath (one round trip when the file exists).
// A nil version writes unconditionally, creating the file and its parents
// when absent; a non-nil version is a compare-and-set against Stat.Version
// (BadVersion when it differs, NoNode when the file is absent; it never
// creates). It returns the new Stat.Version. Errors: InvalidPath,
// InvalidArgument (value too large, foreign or negative version), NoNode,
// BadVersion, Timeout/Interrupted, Closed, Unavailable.
func (c *Conn) Update(ctx context.Context, filePath string, contents []byte, version topo.Version) (topo.Version, error) {
	p, n, err := topo.CheckUpdate(filePath, contents, version)
	if err != nil {
		return nil, err
	}
	ver, ok := zkVersion(n)
	if err := c.begin(ctx, p); err != nil {
		return nil, err
	}
	if c.internal(p) {
		return nil, &topo.Error{Code: topo.InvalidPath, Path: p, Err: errors.New("zk2topo: \"locks\" and \"elections\" are reserved names")}
	}
	zp := c.zkPath(p)
	if !ok {
		if _, _, err := c.Get(ctx, p); err != nil {
			return nil, err
		}
		return nil, topo.NewError(topo.BadVersion, p)
	}
	for attempt := 0; ; attempt++ {
		var st *zk.Stat
		err := c.do(ctx, p, func() error {
			var err error
			st, err = c.zk.Set(zp, contents, ver)
			return err
		})
		if err == nil {
			return topo.NumericVersion(st.Version), nil
		}
		if version != nil || !errors.Is(err, zk.ErrNoNode) || attempt >= 10 {
			return nil, c.convert(err, p)
		}
		v, err := c.create(ctx, p, contents)
		if err == nil || !topo.IsErrType(err, topo.NodeExists) {
			return v, err
		}
		// Created concurrently by someone else: overwrite it.
	}
}

// Get returns filePath's contents and Stat.Version in one round trip. It
// returns NoNode when the file is absent or is only a directory, and
// InvalidPath, Timeout/Interrupted, Closed or Unavailable.
func (c *Conn) Get(ctx context.Context, filePath string) ([]byte, topo.Version, error) {
	p, err := topo.CleanFilePath(filePath)
	if err != nil {
		return nil, nil, err
	}
	if err := c.begin(ctx, p); err != nil {
		return nil, nil, err
	}
	zp := c.zkPath(p)
	var data []byte
	var st *zk.Stat
	err = c.read(ctx, p, func() error {
		var err error
		data, st, err = c.zk.Get(zp)
		return err
	})
	if err != nil {
		return nil, nil, c.convert(err, p)
	}
	if !isFile(st) || st.EphemeralOwner != 0 || c.internal(p) {
		return nil, nil, topo.NewError(topo.NoNode, p)
	}
	if data == nil {
		data = []byte{}
	}
	return data, topo.NumericVersion(st.Version), nil
}

// GetVersion always returns NoImplementation (after validating its
// arguments): ZooKeeper keeps no history of a znode's values.
func (c *Conn) GetVersion(ctx context.Context, filePath string, version int64) ([]byte, error) {
	p, err := topo.CleanFilePath(filePath)
	if err != nil {
		return nil, err
	}
	if c.closed.Load() {
		return nil, topo.NewError(topo.Closed, p)
	}
	if err := topo.CheckContext(ctx, p); err != nil {
		return nil, err
	}
	return nil, &topo.Error{Code: topo.NoImplementation, Path: p, Err: errors.New("zk2topo: ZooKeeper keeps no history")}
}

// List returns every file whose path starts with filePathPrefix (a plain
// string prefix), with its contents and Stat.Version, sorted by path. It
// walks the znodes below the prefix's directory with concurrent requests
// (at most MaxConcurrency in flight), skipping lock and election entries.
// The result is not a snapshot: files changed during the walk may show
// their old or new state. It returns NoNode when no file matches, and
// InvalidPath, Timeout/Interrupted, Closed or Unavailable.
func (c *Conn) List(ctx context.Context, filePathPrefix string) ([]topo.KVInfo, error) {
	prefix, err := topo.CleanPrefix(filePathPrefix)
	if err != nil {
		return nil, err
	}
	if err := c.begin(ctx, prefix); err != nil {
		return nil, err
	}
	dir, namePrefix := splitPrefix(prefix)
	var (
		mu     sync.Mutex
		out    []topo.KVInfo
		first  error
		wg     sync.WaitGroup
		walk   func(p string)
		failed = func(err error) {
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
		}
	)
	children := func(p string, filter string) {
		var names []string
		err := c.read(ctx, p, func() error {
			var err error
			names, _, err = c.zk.Children(c.zkPath(p))
			return err
		})
		if err != nil {
			if !errors.Is(err, zk.ErrNoNode) {
				failed(c.convert(err, p))
			}
			return
		}
		for _, n := range names {
			if !strings.HasPrefix(n, filter) {
				continue
			}
			cp := topo.JoinPath(p, n)
			if c.internal(cp) {
				continue
			}
			wg.Add(1)
			go walk(cp)
		}
	}
	walk = func(p string) {
		defer wg.Done()
		var data []byte
		var st *zk.Stat
		err := c.read(ctx, p, func() error {
			var err error
			data, st, err = c.zk.Get(c.zkPath(p))
			return err
		})
		if err != nil {
			if !errors.Is(err, zk.ErrNoNode) {
				failed(c.convert(err, p))
			}
			return
		}
		if st.EphemeralOwner != 0 {
			return
		}
		if isFile(st) {
			if data == nil {
				data = []byte{}
			}
			mu.Lock()
			out = append(out, topo.KVInfo{Path: p, Value: data, Version: topo.NumericVersion(st.Version)})
			mu.Unlock()
		}
		if st.NumChildren > 0 {
			children(p, "")
		}
	}
	if dir == "" || !c.internal(dir) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			children(dir, namePrefix)
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if len(out) == 0 {
		return nil, topo.NewError(topo.NoNode, prefix)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// splitPrefix splits a canonical prefix into the directory to list and the
// prefix its children's names must have: "a/b" → ("a", "b"), "a/b/" →
// ("a/b", ""), "ab" → ("", "ab").
func splitPrefix(prefix string) (dir, name string) {
	if strings.HasSuffix(prefix, "/") {
		return strings.TrimSuffix(prefix, "/"), ""
	}
	i := strings.LastIndexByte(prefix, '/')
	if i < 0 {
		return "", prefix
	}
	return prefix[:i], prefix[i+1:]
}

// Delete deletes filePath (with a non-nil version, only at that
// Stat.Version: BadVersion otherwise) and then the parent directories it
// left empty (best effort; a directory holding only an empty "locks" znode
// counts as empty). It costs one round trip when the parent keeps other
// entries: the parent's and its "locks" child's Stat reads are pipelined
// behind the delete. A file that has files below it becomes a directory.
// Errors: InvalidPath, InvalidArgument (bad version), NoNode, BadVersion,
// Timeout/Interrupted, Closed, Unavailable.
func (c *Conn) Delete(ctx context.Context, filePath string, version topo.Version) error {
	p, n, err := topo.CheckDelete(filePath, version)
	if err != nil {
		return err
	}
	ver, ok := zkVersion(n)
	if err := c.begin(ctx, p); err != nil {
		return err
	}
	if c.internal(p) {
		return topo.NewError(topo.NoNode, p)
	}
	if !ok {
		if _, _, err := c.Get(ctx, p); err != nil {
			return err
		}
		return topo.NewError(topo.BadVersion, p)
	}
	zp := c.zkPath(p)
	parent := zkDir(zp)
	if parent == c.zkPath("") {
		// Directly under the root: nothing to clean up.
		err := c.do(ctx, p, func() error { return c.zk.Delete(zp, ver) })
		if errors.Is(err, zk.ErrNotEmpty) {
			return c.unfile(ctx, p, version)
		}
		return c.convert(err, p)
	}

	// Fast path: the parent's data version is known from an earlier call
	// (and an empty directory znode's data cannot change while its version
	// stays), so one multi deletes the file and rewrites the parent's empty
	// data at that version, which returns the parent's Stat: whether the
	// delete emptied it, in the same round trip. The multi also proves what
	// the parent's "locks" child is: rewriting its empty data at a known
	// version returns its Stat, and creating and deleting it proves it is
	// absent. Any surprise fails the multi as a whole, and the slow path
	// runs instead.
	if pv, ok := c.dirs.get(parent); ok {
		locks := parent + "/" + locksDir
		ops := []any{
			&zk.DeleteRequest{Path: zp, Version: ver},
			&zk.SetDataRequest{Path: parent, Data: nil, Version: pv},
		}
		lv, lknown := c.dirs.get(locks)
		labsent := !lknown && c.dirs.absent(locks)
		switch {
		case lknown:
			ops = append(ops, &zk.SetDataRequest{Path: locks, Data: nil, Version: lv})
		case labsent:
			ops = append(ops, &zk.CreateRequest{Path: locks, Acl: c.acl}, &zk.DeleteRequest{Path: locks, Version: -1})
		}
		var mr []zk.MultiResponse
		err := c.do(ctx, p, func() error {
			var err error
			mr, err = c.zk.Multi(ops...)
			return err
		})
		if topo.CodeOf(err) != 0 {
			return err // ctx ended or closed (mr may still be written)
		}
		switch {
		case err == nil && len(mr) == len(ops) && mr[1].Stat != nil:
			st := mr[1].Stat
			c.dirs.set(parent, st.Version)
			var lst *zk.Stat
			if lknown && mr[2].Stat != nil {
				lst = mr[2].Stat
				c.dirs.set(locks, lst.Version)
			}
			switch {
			case st.NumChildren == 0 || (st.NumChildren == 1 && lst != nil):
				if c.removeIfEmpty(ctx, parent, true, st, lst != nil, lst) {
					c.cleanupDir(ctx, zkDir(parent))
				}
			case st.NumChildren == 1 && !labsent:
				c.cleanupAfterDelete(ctx, parent, st)
			}
			return nil
		case len(mr) == len(ops) && mr[0].Error != nil:
			if errors.Is(mr[0].Error, zk.ErrNotEmpty) {
				return c.unfile(ctx, p, version)
			}
			return c.convert(mr[0].Error, p)
		case len(mr) == len(ops):
			// Someone else changed the parent or its locks: slow path.
			c.dirs.drop(parent)
			c.dirs.drop(locks)
		default:
			return c.convert(err, p)
		}
	}

	// Slow path: the delete, then (once its frame is written, so that the
	// server runs it after the delete) a Stat read of the parent, pipelined
	// so that it adds no round trip.
	type statRes struct {
		exists bool
		st     *zk.Stat
		err    error
	}
	sent, unregister := c.sent.expect(opDelete, zp)
	defer unregister()
	delRes := make(chan error, 1)
	go func() { delRes <- c.do(ctx, p, func() error { return c.zk.Delete(zp, ver) }) }()
	var delErr error
	haveDel := false
	select {
	case <-sent:
	case delErr = <-delRes:
		haveDel = true
	}
	var parentRes, locksRes chan statRes
	if !haveDel || delErr == nil {
		parentRes, locksRes = make(chan statRes, 1), make(chan statRes, 1)
		stat := func(zp string, out chan statRes) {
			var exists bool
			var st *zk.Stat
			err := c.do(ctx, p, func() error {
				var err error
				exists, st, err = c.zk.Exists(zp)
				return err
			})
			if err != nil {
				out <- statRes{err: err} // exists and st may still be written
				return
			}
			out <- statRes{exists: exists, st: st}
		}
		go stat(parent, parentRes)
		go stat(parent+"/"+locksDir, locksRes)
	}
	if !haveDel {
		delErr = <-delRes
	}
	if errors.Is(delErr, zk.ErrNotEmpty) {
		return c.unfile(ctx, p, version)
	}
	if delErr != nil {
		return c.convert(delErr, p)
	}
	if parentRes == nil {
		// The delete finished before its frame was seen (cannot normally
		// happen); clean up with sequential reads.
		c.cleanupDir(ctx, parent)
		return nil
	}
	pr, lr := <-parentRes, <-locksRes
	if pr.err != nil || lr.err != nil || !pr.exists {
		return nil // best effort: the file is deleted
	}
	// Learn the parent's and its locks child's versions for the fast path.
	locks := parent + "/" + locksDir
	if pr.st.DataLength == 0 && pr.st.EphemeralOwner == 0 {
		c.dirs.set(parent, pr.st.Version)
		switch {
		case !lr.exists:
			c.dirs.setAbsent(locks)
		case lr.st.DataLength == 0 && lr.st.EphemeralOwner == 0:
			c.dirs.set(locks, lr.st.Version)
		}
	}
	if c.removeIfEmpty(ctx, parent, pr.exists, pr.st, lr.exists, lr.st) {
		c.cleanupDir(ctx, zkDir(parent))
	}
	return nil
}

// cleanupAfterDelete removes the directory znode dir, whose Stat after a
// delete below it is st, when the delete left it empty (or holding only an
// empty "locks" znode), and then its parents left empty.
func (c *Conn) cleanupAfterDelete(ctx context.Context, dir string, st *zk.Stat) {
	if st.DataLength > 0 || st.EphemeralOwner != 0 || st.NumChildren > 1 {
		return
	}
	var lexists bool
	var lst *zk.Stat
	if st.NumChildren == 1 {
		err := c.do(ctx, c.relPath(dir), func() error {
			var err error
			lexists, lst, err = c.zk.Exists(dir + "/" + locksDir)
			return err
		})
		if err != nil {
			return
		}
		if !lexists {
			c.dirs.setAbsent(dir + "/" + locksDir)
			return
		}
		if lst.DataLength == 0 && lst.EphemeralOwner == 0 {
			c.dirs.set(dir+"/"+locksDir, lst.Version)
		}
	}
	if c.removeIfEmpty(ctx, dir, true, st, lexists, lst) {
		c.cleanupDir(ctx, zkDir(dir))
	}
}

// unfile turns a file that has files below it into a directory (ZooKeeper
// cannot delete a znode with children): it empties its data.
func (c *Conn) unfile(ctx context.Context, p string, version topo.Version) error {
	zp := c.zkPath(p)
	var data []byte
	var st *zk.Stat
	err := c.read(ctx, p, func() error {
		var err error
		data, st, err = c.zk.Get(zp)
		return err
	})
	if err != nil {
		return c.convert(err, p)
	}
	_ = data
	if !isFile(st) {
		return topo.NewError(topo.NoNode, p)
	}
	if version != nil {
		if n, _ := topo.VersionNumber(p, version); n != int64(st.Version) {
			return topo.NewError(topo.BadVersion, p)
		}
	}
	err = c.do(ctx, p, func() error {
		_, err := c.zk.Set(zp, nil, st.Version)
		return err
	})
	return c.convert(err, p)
}

// cleanupDir removes the directory znode dir, and then its parents, while
// they are empty (or hold only an empty "locks" znode). It never removes the
// root, and stops at the first error.
func (c *Conn) cleanupDir(ctx context.Context, dir string) {
	for dir != c.zkPath("") && dir != "/" && strings.HasPrefix(dir, c.root+"/") {
		var pexists, lexists bool
		var pst, lst *zk.Stat
		var wg sync.WaitGroup
		var perr, lerr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			perr = c.do(ctx, dir, func() error {
				var err error
				pexists, pst, err = c.zk.Exists(dir)
				return err
			})
		}()
		go func() {
			defer wg.Done()
			lerr = c.do(ctx, dir, func() error {
				var err error
				lexists, lst, err = c.zk.Exists(dir + "/" + locksDir)
				return err
			})
		}()
		wg.Wait()
		if perr != nil || lerr != nil || !c.removeIfEmpty(ctx, dir, pexists, pst, lexists, lst) {
			return
		}
		dir = zkDir(dir)
	}
}

// removeIfEmpty deletes the directory znode dir when its Stat shows no
// child other than an empty "locks" znode and no data, guarding the deletes
// with the versions read, and reports whether it did.
func (c *Conn) removeIfEmpty(ctx context.Context, dir string, exists bool, st *zk.Stat, lexists bool, lst *zk.Stat) bool {
	if !exists || st.DataLength > 0 || st.EphemeralOwner != 0 || dir == c.zkPath("") || dir == "/" {
		return false
	}
	p := c.relPath(dir)
	var err error
	switch {
	case st.NumChildren == 0:
		err = c.do(ctx, p, func() error { return c.zk.Delete(dir, st.Version) })
		if errors.Is(err, zk.ErrNoNode) {
			err = nil
		}
	case st.NumChildren == 1 && lexists && lst.NumChildren == 0:
		err = c.do(ctx, p, func() error {
			_, err := c.zk.Multi(
				&zk.DeleteRequest{Path: dir + "/" + locksDir, Version: lst.Version},
				&zk.DeleteRequest{Path: dir, Version: st.Version})
			return err
		})
	default:
		return false
	}
	if err != nil {
		return false
	}
	c.dirs.drop(dir)
	c.dirs.drop(dir + "/" + locksDir)
	return true
}

// dirCache remembers the data version of directory znodes (empty data) a
// Conn has seen, and which "locks" znodes it saw absent, for Delete's fast
// path. An entry only saves round trips: a stale one makes the fast path's
// multi fail as a whole, and is dropped. It is bounded (cleared when full)
// and safe for concurrent use.
type dirCache struct {
	mu sync.Mutex
	m  map[string]int32 // version of a directory znode; -1: known absent
}

const dirCacheMax = 4096

func (d *dirCache) get(zp string) (int32, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.m[zp]
	return v, ok && v >= 0
}

func (d *dirCache) absent(zp string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.m[zp]
	return ok && v < 0
}

func (d *dirCache) put(zp string, v int32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil || len(d.m) >= dirCacheMax {
		d.m = make(map[string]int32)
	}
	d.m[zp] = v
}

func (d *dirCache) set(zp string, v int32) { d.put(zp, v) }

func (d *dirCache) setAbsent(zp string) { d.put(zp, -1) }

func (d *dirCache) drop(zp string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, zp)
}
