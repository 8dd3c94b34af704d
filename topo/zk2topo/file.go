package zk2topo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
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
	return p == electionsDir || strings.HasPrefix(p, electionsDir+"/") || c.system(p) || hasSegment(p, locksDir)
}

// Create creates filePath holding contents, creating missing parent
// directories, and returns version 0 (ZooKeeper's first Stat.Version). It
// costs one round trip when the parent exists. It returns NodeExists when
// the file exists; a znode that is only a directory (empty, with children)
// becomes the file instead. Missing parent directories are created with
// the file, in one multi: no reader sees them before the file is in them,
// and a Create that fails or is interrupted leaves no directory behind
// (one missing level costs two round trips, the failed create and the
// multi; k missing levels about 2+log2(k)). Errors: InvalidPath (including the
// reserved-name rule, backendkit.CheckCreate), InvalidArgument (value too large),
// NodeExists, PermissionDenied (the ACLs refuse the Conn's identity),
// Timeout/Interrupted (ctx), Closed, Unavailable.
func (c *Conn) Create(ctx context.Context, filePath string, contents []byte) (topo.Version, error) {
	p, err := backendkit.Begin(ctx, filePath, func(p string) (string, error) { return backendkit.CheckCreate(p, contents) }, c.closed.Load)
	if err != nil {
		return nil, err
	}
	if c.internal(p) {
		return nil, backendkit.Wrap(topo.InvalidPath, p, errOwnZnodes)
	}
	return c.create(ctx, p, contents)
}

func (c *Conn) create(ctx context.Context, p string, contents []byte) (topo.Version, error) {
	zp := c.zkPath(p)
	// Missing parent directories are created in one multi with the file,
	// never before it: a reader never sees a new directory znode without
	// its file (an empty znode without children reads as an empty file),
	// and a Create that fails or is interrupted leaves no directory. A
	// failed create says that the parent is missing; missing counts the
	// ancestors the next multi creates, doubled while the highest of them
	// is missing too, and cut down to those below an ancestor found
	// existing.
	missing, depth := 0, strings.Count(zp, "/")-1
	for attempt := 0; ; attempt++ {
		err := c.write(ctx, p, func(z *zk.Conn) error {
			if missing == 0 {
				_, err := z.Create(zp, contents, zk.FlagPersistent, c.acl)
				return err
			}
			return createUnder(z, zp, missing, contents, c.acl)
		})
		var at *opFailed // a multi's failing op
		if errors.As(err, &at) {
			err = at.err
		}
		switch {
		case err == nil:
			return topo.NumericVersion(0), nil
		case errors.Is(err, zk.ErrNoNode) && attempt < 20 && missing < depth:
			missing = min(max(2*missing, 1), depth)
		case errors.Is(err, zk.ErrNodeExists) && at != nil && at.op < missing && attempt < 20:
			missing -= at.op + 1 // that ancestor exists: create those below it
		case errors.Is(err, zk.ErrNodeExists) && attempt < 20:
			// A directory znode becomes the file; a file stays (NodeExists).
			r := c.statOn(ctx, nil, p, zp, false)
			if r.err != nil {
				return nil, c.convert(r.err, p)
			}
			if !r.exists {
				missing = 0
				continue
			}
			st := r.st
			if isFile(st) {
				return nil, topo.NewError(topo.NodeExists, p)
			}
			var nst *zk.Stat
			err = c.write(ctx, p, func(z *zk.Conn) error {
				var err error
				nst, err = z.Set(zp, contents, st.Version)
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

// opFailed is the error of a multi whose op number op failed with err.
type opFailed struct {
	op  int
	err error
}

func (e *opFailed) Error() string { return fmt.Sprintf("op %d: %v", e.op, e.err) }
func (e *opFailed) Unwrap() error { return e.err }

// createUnder sends one multi creating the n directory znodes above the
// file znode zp (the highest first) and then the file; a failed op comes
// back as an *opFailed.
func createUnder(z *zk.Conn, zp string, n int, contents []byte, acl []zk.ACL) error {
	ops := make([]any, n+1)
	d := zp
	for i := n - 1; i >= 0; i-- {
		d = zkDir(d)
		ops[i] = &zk.CreateRequest{Path: d, Acl: acl, Flags: zk.FlagPersistent}
	}
	ops[n] = &zk.CreateRequest{Path: zp, Data: contents, Acl: acl, Flags: zk.FlagPersistent}
	res, err := z.Multi(ops...)
	if err != nil && len(res) == len(ops) {
		if i := slices.IndexFunc(res, func(r zk.MultiResponse) bool { return r.Error != nil }); i >= 0 {
			return &opFailed{op: i, err: res[i].Error}
		}
	}
	return err
}

// makeDirs creates the directory znode dir (a znode path) and its missing
// ancestors (p names the file for errors), and appends to made (when not
// nil) each directory whose create it sent and that may have been applied
// (answered with success, or not answered), ancestors first.
func (c *Conn) makeDirs(ctx context.Context, p, dir string, made *[]string) error {
	if dir == "/" || dir == "" {
		return nil
	}
	container := c.isContainer(dir)
	for attempt := 0; attempt < 10; attempt++ {
		err := c.write(ctx, p, func(z *zk.Conn) error {
			if container {
				_, err := z.CreateContainer(dir, nil, zk.FlagContainer, c.acl)
				return err
			}
			_, err := z.Create(dir, nil, zk.FlagPersistent, c.acl)
			return err
		})
		if made != nil && !errors.Is(err, zk.ErrNodeExists) && !errors.Is(err, zk.ErrNoNode) {
			*made = append(*made, dir)
		}
		switch {
		case err == nil, errors.Is(err, zk.ErrNodeExists):
			return nil
		case errors.Is(err, zk.ErrNoNode):
			if err := c.makeDirs(ctx, p, zkDir(dir), made); err != nil {
				return err
			}
		default:
			return c.convert(err, p)
		}
	}
	return topo.NewError(topo.Unavailable, p)
}

// isContainer reports whether the library creates the directory znode dir
// as a container znode: a "locks" znode, or the "values" znode of an
// election directory (elections/<name>/values). Election directories stay
// persistent for Vitess (see the package doc), directories of files
// because a file may be created at a directory's path, and the server
// would delete that file's data with the container.
func (c *Conn) isContainer(dir string) bool {
	if path.Base(dir) == locksDir {
		return true
	}
	rel := c.relPath(dir)
	return path.Base(rel) == valuesDir && strings.HasPrefix(rel, electionsDir+"/") && strings.Count(rel, "/") >= 2
}

// zkVersion is the ZooKeeper version of a checked version number (see
// backendkit.CheckUpdate): -1 ("any version") for backendkit.AnyVersion,
// and -2, which no znode has (a compare-and-set at it fails with
// BadVersion, or NoNode), for one larger than any int32.
func zkVersion(n int64) int32 {
	if n > math.MaxInt32 {
		return -2
	}
	return int32(n)
}

// Update writes contents to filePath. A nil version writes
// unconditionally (one round trip when the file exists), creating the file
// and its parents when absent, and turning a znode that is only a
// directory into the file; a non-nil version is a compare-and-set against
// Stat.Version (two round trips: see casUpdate): BadVersion when it
// differs, NoNode when the file is absent or the path is only a directory,
// and then nothing is written or created. It returns the new Stat.Version.
// On a Conn rooted at a reserved place (inside a "locks" znode, say, or
// below a segment "elections"), and for a path with a segment
// "elections" (see Txn), Update is a one-op Txn: it
// reads the Stat first and returns NodeExists for an ephemeral znode (a
// lock or election entry, not a file), writing nothing, and writes a
// file at the version read (see Txn); there, concurrent writers that win
// every attempt make it fail with ResourceExhausted (ErrTxnContention),
// nothing written.
// Errors: InvalidPath (including the reserved-name rule), InvalidArgument
// (value too large, foreign or negative version), NoNode, NodeExists,
// BadVersion, PermissionDenied, ResourceExhausted (above), Timeout/Interrupted,
// Closed, Unavailable.
func (c *Conn) Update(ctx context.Context, filePath string, contents []byte, version topo.Version) (topo.Version, error) {
	p, n, err := backendkit.BeginVersioned(ctx, filePath, func(p string) (string, int64, error) { return backendkit.CheckUpdate(p, contents, version) }, c.closed.Load)
	if err != nil {
		return nil, err
	}
	ver := zkVersion(n)
	if c.internal(p) {
		return nil, backendkit.Wrap(topo.InvalidPath, p, errOwnZnodes)
	}
	zp := c.zkPath(p)
	if c.entriesAt(p) {
		vs, err := c.Txn(ctx, topo.UpdateOp(p, contents, version))
		if err != nil {
			return nil, opErr(err)
		}
		return vs[0], nil
	}
	if version != nil {
		return c.casUpdate(ctx, p, zp, contents, ver)
	}
	for attempt := 0; ; attempt++ {
		var st *zk.Stat
		err := c.write(ctx, p, func(z *zk.Conn) error {
			var err error
			st, err = z.Set(zp, contents, ver)
			return err
		})
		if err == nil {
			return topo.NumericVersion(st.Version), nil
		}
		if !errors.Is(err, zk.ErrNoNode) || attempt >= 10 {
			return nil, c.convert(err, p)
		}
		v, err := c.create(ctx, p, contents)
		if err == nil || !topo.IsErrType(err, topo.NodeExists) {
			return v, err
		}
		// Created concurrently by someone else: overwrite it.
	}
}

// casUpdate is a compare-and-set Update: a Stat read and then the write at
// that version, on one session (so the write is ordered after the read). A
// znode that is only a directory (empty, with children) is not a file:
// NoNode, and nothing is written. ZooKeeper's multi can check a znode's
// data version but not its kind, so the two requests are not one atomic
// operation; the write is still conditional on the version read, so it
// lands only on the znode that was read unless that znode was deleted and
// re-created as a directory at the same data version in between (only a
// new directory, version 0, can match a file's version 0), a window of one
// round trip.
func (c *Conn) casUpdate(ctx context.Context, p, zp string, contents []byte, ver int32) (topo.Version, error) {
	s, err := c.live(ctx, p)
	if err != nil {
		return nil, err
	}
	var exists bool
	var st *zk.Stat
	err = c.do(ctx, p, func() error {
		var err error
		exists, st, err = s.zk.Exists(zp)
		return err
	})
	if err != nil {
		return nil, c.convert(err, p)
	}
	if !exists || !isFile(st) || st.EphemeralOwner != 0 {
		return nil, topo.NewError(topo.NoNode, p)
	}
	if st.Version != ver {
		return nil, topo.NewError(topo.BadVersion, p)
	}
	var nst *zk.Stat
	err = c.do(ctx, p, func() error {
		var err error
		nst, err = s.zk.Set(zp, contents, ver)
		return err
	})
	if err != nil {
		return nil, c.convert(err, p)
	}
	return topo.NumericVersion(nst.Version), nil
}

// Get returns filePath's contents and Stat.Version in one round trip (with
// a sync pipelined before it with Options.LinearizableReads, and on the
// first read of a session). Reads are not refused at reserved paths: a
// persistent znode another tool wrote there (one List reports as a
// reserved file, see foreignFile) is returned like any file, while the
// znodes of the lock and election layout (locks znodes, lock entries,
// election directories, candidates, values) and ZooKeeper's own
// "/zookeeper" znodes are not files. It returns NoNode when the file is
// absent or is only a directory or such a znode, and InvalidPath,
// PermissionDenied, Timeout/Interrupted, Closed or Unavailable.
func (c *Conn) Get(ctx context.Context, filePath string) ([]byte, topo.Version, error) {
	p, err := backendkit.Begin(ctx, filePath, topo.CleanFilePath, c.closed.Load)
	if err != nil {
		return nil, nil, err
	}
	r, err := c.getOn(ctx, nil, p, c.zkPath(p), false)
	if err != nil {
		return nil, nil, c.convert(err, p)
	}
	data, st := r.data, r.st
	if !isFile(st) || st.EphemeralOwner != 0 || c.system(p) || (c.internal(p) && !c.foreignFile(p, st)) {
		return nil, nil, topo.NewError(topo.NoNode, p)
	}
	return orEmpty(data), topo.NumericVersion(st.Version), nil
}

// GetVersion always returns NoImplementation, after the checks of
// backendkit.CheckGetVersion (InvalidPath for a bad path, InvalidArgument
// for a negative version) and Closed: ZooKeeper keeps no history of a
// znode's values.
func (c *Conn) GetVersion(ctx context.Context, filePath string, version int64) ([]byte, error) {
	return nil, backendkit.NoHistory(ctx, filePath, version, c.closed.Load, "zk2topo: ZooKeeper keeps no history")
}

// List returns every file whose path starts with filePathPrefix (a plain
// string prefix), with its contents and Stat.Version, sorted by path. It
// walks the znodes below the prefix's directory with concurrent requests
// (at most MaxConcurrency in flight), skipping lock and election entries
// (ephemeral znodes) and the znodes of their layout. Persistent znodes
// that other tools wrote at reserved paths (topo.IsReserved: a znode with
// data under a "locks" znode, say) are files topokit cannot hold: they are
// not listed, and List returns the other files together with the
// PartialResult error of backendkit.ReservedFiles naming them. The result is not
// a snapshot: files changed during the walk may show their old or new
// state. It returns NoNode when no file matches, and InvalidPath,
// PermissionDenied, Timeout/Interrupted, Closed or Unavailable.
func (c *Conn) List(ctx context.Context, filePathPrefix string) ([]topo.KVInfo, error) {
	prefix, err := backendkit.Begin(ctx, filePathPrefix, topo.CleanPrefix, c.closed.Load)
	if err != nil {
		return nil, err
	}
	ctx = c.barrierScoped(ctx) // every read after the first starts after it answered
	dir, namePrefix := splitPrefix(prefix)
	var (
		mu       sync.Mutex
		out      []topo.KVInfo
		reserved []string
		first    error
		wg       sync.WaitGroup
		walk     func(p string)
	)
	// failed reports whether a read of p failed, keeping the first error
	// (a znode deleted meanwhile is none: it is left out).
	failed := func(err error, p string) bool {
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			mu.Lock()
			if first == nil {
				first = c.convert(err, p)
			}
			mu.Unlock()
		}
		return err != nil
	}
	children := func(p string, filter string) {
		kids, err := c.childrenOn(ctx, nil, p, c.zkPath(p), false)
		if failed(err, p) {
			return
		}
		for _, n := range kids.names {
			if !strings.HasPrefix(n, filter) {
				continue
			}
			if cp := backendkit.JoinPath(p, n); !c.system(cp) {
				wg.Go(func() { walk(cp) })
			}
		}
	}
	walk = func(p string) {
		r, err := c.getOn(ctx, nil, p, c.zkPath(p), false)
		data, st := r.data, r.st
		if failed(err, p) || st.EphemeralOwner != 0 {
			return // or a lock or election entry
		}
		mu.Lock()
		switch {
		case topo.IsReserved(p):
			if c.foreignFile(p, st) {
				reserved = append(reserved, p)
			}
		case isFile(st):
			out = append(out, topo.KVInfo{Path: p, Value: orEmpty(data), Version: topo.NumericVersion(st.Version)})
		}
		mu.Unlock()
		if st.NumChildren > 0 {
			children(p, "")
		}
	}
	if !c.system(dir) {
		wg.Go(func() { children(dir, namePrefix) })
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	sort.Strings(reserved)
	return backendkit.ListResult(prefix, out, reserved)
}

// system reports whether the canonical path p is (or is inside) ZooKeeper's
// own "/zookeeper" znode, which exists when the root is the ZooKeeper root.
func (c *Conn) system(p string) bool {
	return c.root == "" && (p == "zookeeper" || strings.HasPrefix(p, "zookeeper/"))
}

// foreignFile reports whether the persistent znode at the reserved path p,
// with Stat st, is a file another tool wrote rather than part of the lock
// and election layout: it holds data, or it is an empty leaf that is
// neither a "locks" znode nor an election directory.
func (c *Conn) foreignFile(p string, st *zk.Stat) bool {
	if st.DataLength > 0 {
		return true
	}
	if st.NumChildren > 0 || path.Base(p) == locksDir {
		return false
	}
	return p != electionsDir && !strings.HasPrefix(p, electionsDir+"/")
}

// splitPrefix splits a canonical prefix into the directory to list and the
// prefix its children's names must have: "a/b" → ("a", "b"), "a/b/" →
// ("a/b", ""), "ab" → ("", "ab").
func splitPrefix(prefix string) (dir, name string) {
	dir, name = path.Split(prefix)
	return strings.TrimSuffix(dir, "/"), name
}

// Delete deletes filePath (with a non-nil version, only at that
// Stat.Version: BadVersion otherwise) and the parent directories it
// leaves empty (a directory holding only an empty "locks" znode counts
// as empty). It first reads the Stat of the file's parent (one round
// trip; the ancestors above too, in one more, when the parent holds
// nothing but the file); when its delete empties directories, they go in
// one multi with the file (deleteEmptying), since an empty directory
// znode without children would read as an empty file in between. When the parent keeps other entries, the delete follows
// (another round trip), with the parent's and its "locks" child's Stat
// reads pipelined behind it, on the same session, to remove a parent
// that another client's Delete emptied meanwhile (best effort; only
// then, and for a directory left with an empty "locks" znode, may a
// reader see an emptied directory for a round trip). A file directly
// under the root costs the delete alone. A directory is removed only at
// the data version read, and its data is never written. A file that has
// files below it becomes a directory. On a Conn rooted at a reserved
// place, or for a path with a segment "elections", Delete is a one-op
// Txn that reads the Stat first: an ephemeral znode (a lock or election
// entry) is no file, NoNode, and is left alone; concurrent writers that
// win every attempt make it fail with ResourceExhausted
// (ErrTxnContention), nothing deleted.
// Errors: InvalidPath (including the reserved-name rule), InvalidArgument
// (bad version), NoNode, BadVersion, PermissionDenied, ResourceExhausted
// (above), Timeout/Interrupted, Closed, Unavailable.
func (c *Conn) Delete(ctx context.Context, filePath string, version topo.Version) error {
	p, n, err := backendkit.BeginVersioned(ctx, filePath, func(p string) (string, int64, error) { return backendkit.CheckDelete(p, version) }, c.closed.Load)
	if err != nil {
		return err
	}
	ver := zkVersion(n)
	if c.internal(p) {
		return topo.NewError(topo.NoNode, p)
	}
	if c.entriesAt(p) {
		_, err := c.Txn(ctx, topo.DeleteOp(p, version))
		return opErr(err)
	}
	s, err := c.live(ctx, p)
	if err != nil {
		return err
	}
	zp := c.zkPath(p)
	parent := zkDir(zp)
	if c.removable(parent) {
		if done, err := c.deleteEmptying(ctx, s, p, zp, ver); done {
			return err
		}
	}
	// The parent keeps other entries (or changed since it was read): the
	// delete, then (once its frame is written, so that the server runs
	// them after the delete, on the same session) Stat reads of the
	// parent's "locks" child and then of the parent, in that order (see
	// statsInOrder), pipelined so that they add no round trip; an emptied
	// parent is then removed (see removeDir).
	delRes := sendFirst(s, opDelete, zp, func() error { return c.do(ctx, p, func() error { return s.zk.Delete(zp, ver) }) })
	var stats []<-chan statRes
	if c.removable(parent) {
		stats = c.statsInOrder(ctx, s, p, parent+"/"+locksDir, parent)
	}
	if delErr := <-delRes; delErr != nil {
		return c.deleteFailed(ctx, p, ver, delErr)
	}
	if stats == nil {
		return nil // directly under the root: nothing to clean up
	}
	lr, pr := <-stats[0], <-stats[1]
	if lr.err == nil { // else best effort: the file is deleted
		c.removeDir(ctx, parent, pr, lr, true)
	}
	return nil
}

// deleteFailed is the error of Delete(p) at version ver (-1: any) whose
// delete of the file's znode failed with err.
func (c *Conn) deleteFailed(ctx context.Context, p string, ver int32, err error) error {
	switch {
	case errors.Is(err, zk.ErrNotEmpty):
		return c.unfile(ctx, p, ver)
	case errors.Is(err, zk.ErrBadVersion):
		// ZooKeeper checks the version before the children: NoNode when p
		// is only a directory, as the contract says.
		if _, err := c.fileStat(ctx, p); err != nil {
			return err
		}
		return topo.NewError(topo.BadVersion, p)
	}
	return c.convert(err, p)
}

// deleteEmptying deletes the file p (znode zp, at version ver) together
// with the directory znodes that its delete empties, in one multi, so
// that no reader ever sees one of them empty and childless (which reads
// as an empty file: see isFile) between the file's delete and theirs.
// It reads the Stat of zp's parent first, and when the parent holds
// nothing but the file, those of the ancestors above (pipelined on
// session s: one round trip each); the directories it deletes are those,
// nearest first, holding one child (the file, or the directory below)
// and no data, each at the version read, so that a directory that became
// a file or gained an entry since fails the multi and is kept. Pipelined
// behind the multi, the Stats of the next ancestor's "locks" znode and of
// that ancestor are read, as Delete reads its parent's: one that another
// client's Delete emptied meanwhile, or that holds nothing but an empty
// "locks" znode, is removed after (removeDir). It reports done false,
// having written nothing, when the parent keeps other entries or the
// multi failed on a directory (changed since the read): Delete then
// deletes the file alone and cleans up after it.
func (c *Conn) deleteEmptying(ctx context.Context, s *zkSession, p, zp string, ver int32) (done bool, err error) {
	var chain []string
	for d := zkDir(zp); c.removable(d); d = zkDir(d) {
		chain = append(chain, d)
	}
	// The parent first: when it keeps other entries (the common case),
	// nothing above it matters, and a deep path costs one read, not one
	// per level.
	stats := c.statsInOrder(ctx, s, p, chain[0])
	reqs := []any{&zk.DeleteRequest{Path: zp, Version: ver}}
	for i := range chain {
		if i == 1 {
			stats = append(stats, c.statsInOrder(ctx, s, p, chain[1:]...)...)
		}
		r := <-stats[i]
		if r.err != nil {
			return true, c.convert(r.err, p)
		}
		if !r.exists || r.st.NumChildren != 1 || r.st.DataLength > 0 || r.st.EphemeralOwner != 0 {
			break
		}
		reqs = append(reqs, &zk.DeleteRequest{Path: chain[i], Version: r.st.Version})
	}
	if len(reqs) == 1 {
		return false, nil
	}
	above := zkDir(reqs[len(reqs)-1].(*zk.DeleteRequest).Path)
	var res []zk.MultiResponse
	multi := sendFirst(s, opMulti, zp, func() error {
		return c.do(ctx, p, func() error {
			var err error
			res, err = s.zk.Multi(reqs...)
			return err
		})
	})
	var after []<-chan statRes
	if c.removable(above) {
		after = c.statsInOrder(ctx, s, p, above+"/"+locksDir, above)
	}
	err = <-multi
	if err == nil {
		if after != nil {
			if lr, ar := <-after[0], <-after[1]; lr.err == nil {
				c.removeDir(ctx, above, ar, lr, true)
			}
		}
		return true, nil
	}
	if code := topo.CodeOf(err); code == topo.Timeout || code == topo.Interrupted || code == topo.Closed {
		return true, err
	}
	if len(res) != len(reqs) {
		return true, c.convert(err, p) // no per-op answer: the outcome is unknown
	}
	if res[0].Error != nil {
		return true, c.deleteFailed(ctx, p, ver, res[0].Error)
	}
	return false, nil
}

// fileStat reads the Stat of p, NoNode unless it is a file.
func (c *Conn) fileStat(ctx context.Context, p string) (*zk.Stat, error) {
	r := c.statOn(ctx, nil, p, c.zkPath(p), false)
	if r.err != nil {
		return nil, c.convert(r.err, p)
	}
	if !r.exists || !isFile(r.st) {
		return nil, topo.NewError(topo.NoNode, p)
	}
	return r.st, nil
}

// unfile turns a file that has files below it into a directory (ZooKeeper
// cannot delete a znode with children): it empties its data, when at
// version ver (-1: any).
func (c *Conn) unfile(ctx context.Context, p string, ver int32) error {
	st, err := c.fileStat(ctx, p)
	if err != nil {
		return err
	}
	if ver != -1 && ver != st.Version {
		return topo.NewError(topo.BadVersion, p)
	}
	err = c.write(ctx, p, func(z *zk.Conn) error {
		_, err := z.Set(c.zkPath(p), nil, st.Version)
		return err
	})
	return c.convert(err, p)
}

// opErr is the error of a one-op Txn that makes a Conn method (Update,
// Delete of a znode that may be an entry: Conn.entriesAt): the op's own
// error rather than the *topo.TxnError naming it; nil for nil.
func opErr(err error) error {
	var te *topo.TxnError
	if errors.As(err, &te) {
		return te.Err
	}
	return err
}
