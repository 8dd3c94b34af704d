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
// children (an empty znode with children is only a directory).
func isFile(st *zk.Stat) bool {
	return st.NumChildren == 0 || st.DataLength > 0
}

// internal reports whether the canonical path p is (or is inside) a lock or
// election znode rather than a file or directory.
func (c *Conn) internal(p string) bool {
	return p == electionsDir || strings.HasPrefix(p, electionsDir+"/") || c.system(p) || hasSegment(p, locksDir)
}

// Create creates filePath holding contents and returns version 0, in one
// round trip when the parent exists. A znode that is only a directory
// becomes the file, unless contents are empty (ErrEmptyFileWithChildren,
// nothing written): a one-op Txn (its CreateOp over a directory: a multi
// whose create fails, a read of the Stat and children, then a multi of
// the set-data and a check of a child, roleSame: the znode read, not a
// file created since). Missing parents are
// created in one multi with the file, so no reader sees them without it
// and a failed Create leaves none (k missing levels cost about 2+log2(k)
// round trips). Errors: InvalidPath (including the reserved-name rule,
// backendkit.CheckCreate), InvalidArgument (value too large,
// ErrEmptyFileWithChildren), NodeExists, PermissionDenied,
// Timeout/Interrupted, Closed, Unavailable.
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
	err := c.createWithParents(ctx, p, zp, contents, func(z *zk.Conn) error {
		_, err := z.Create(zp, contents, zk.FlagPersistent, c.acl)
		return err
	})
	switch {
	case err == nil:
		return topo.NumericVersion(0), nil
	case errors.Is(err, zk.ErrNodeExists):
		// A directory znode becomes the file, a file stays
		// (NodeExists): a one-op Txn, its CreateOp over a directory.
		vs, err := c.Txn(ctx, topo.CreateOp(p, contents))
		if err != nil {
			return nil, opErr(err)
		}
		return vs[0], nil
	}
	return nil, c.convert(err, p)
}

// createWithParents creates the znode zp: with single while its parent
// exists, else in one multi with the missing directories above it
// (createUnder, zp holding contents), their count learnt from failed
// requests: doubled while the highest is missing too, cut to those below
// one found existing. It returns the client's error (NodeExists when zp
// exists), or Unavailable after 20 attempts.
func (c *Conn) createWithParents(ctx context.Context, p, zp string, contents []byte, single func(z *zk.Conn) error) error {
	missing, depth := 0, strings.Count(zp, "/")-1
	for attempt := 0; attempt < 20; attempt++ {
		err := c.write(ctx, p, func(z *zk.Conn) error {
			if missing == 0 {
				return single(z)
			}
			return createUnder(z, zp, missing, contents, c.acl)
		})
		var at *opFailed // a multi's failing op
		if errors.As(err, &at) {
			err = at.err
		}
		switch {
		case errors.Is(err, zk.ErrNoNode) && missing < depth:
			missing = min(max(2*missing, 1), depth)
		case errors.Is(err, zk.ErrNodeExists) && at != nil && at.op < missing:
			missing -= at.op + 1 // that ancestor exists: create those below it
		default:
			return err
		}
	}
	return topo.NewError(topo.Unavailable, p)
}

// kindOn reads zp's Stat and its children's names on session s (nil: as
// a read, see answerOn) in one request, as an exists would, and keeps a
// child's name for a Txn's roleSame check (anyChild). An absent znode is
// !exists.
func (c *Conn) kindOn(ctx context.Context, s *zkSession, p, zp string) statRes {
	kids, err := c.childrenOn(ctx, s, p, zp, false)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return statRes{}
	case err != nil:
		return statRes{err: err}
	}
	return statRes{exists: true, st: kids.st, child: anyChild(kids.names)}
}

// anyChild returns the child roleSame checks: the least name but a
// "locks" znode (a container: the server deletes it once it is empty,
// failing the check for nothing), else "locks"; "" when there is none.
func anyChild(names []string) string {
	child := ""
	for _, n := range names {
		if child == "" || child == locksDir || n != locksDir && n < child {
			child = n
		}
	}
	return child
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

// makeDirs creates the directory znode dir and its missing ancestors (a
// container for isContainer, persistent otherwise), one create at a time,
// the ancestors after a create of dir failed with NoNode.
func (c *Conn) makeDirs(ctx context.Context, p, dir string) error {
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
		switch {
		case err == nil, errors.Is(err, zk.ErrNodeExists):
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

// isContainer reports whether the directory znode dir is created as a
// container: a "locks" znode, or an election's "values" znode. Election
// directories stay persistent for Vitess; directories of files too, as a
// file may be created at their path (the server would delete it with the
// container).
func (c *Conn) isContainer(dir string) bool {
	if path.Base(dir) == locksDir {
		return true
	}
	rel := c.relPath(dir)
	return path.Base(rel) == valuesDir && strings.HasPrefix(rel, electionsDir+"/") && strings.Count(rel, "/") >= 2
}

// zkVersion is the ZooKeeper version of a checked version number: -1
// (any) for backendkit.AnyVersion, -2 (which no znode has) above int32.
func zkVersion(n int64) int32 {
	if n > math.MaxInt32 {
		return -2
	}
	return int32(n)
}

// Update writes contents to filePath and returns the new Stat.Version. A
// nil version writes unconditionally (one round trip when the file
// exists), creating the file and its parents when absent and turning a
// directory-only znode into the file. A non-nil version is a
// compare-and-set: BadVersion when it differs, NoNode when the file is
// absent or only a directory. Empty contents on a znode with children
// (only a directory, or a file with files below it, which would vanish)
// are ErrEmptyFileWithChildren, nothing written. A compare-and-set, an
// unconditional Update of empty contents, and any Update where znodes may
// be lock or election entries (a Conn rooted at a reserved place, a path
// with a segment "elections": an entry is NodeExists) are a one-op Txn:
// a Stat read, then the write at the version read (two round trips); a
// file created below between the two is missed (see Txn), and
// ResourceExhausted (ErrTxnContention) comes when concurrent writers win
// every attempt. Errors: InvalidPath (including the reserved-name rule),
// InvalidArgument (value too large, foreign or negative version,
// ErrEmptyFileWithChildren), NoNode, NodeExists, BadVersion,
// PermissionDenied, ResourceExhausted, Timeout/Interrupted, Closed,
// Unavailable; nothing is written on any but the last three (outcome
// unknown).
func (c *Conn) Update(ctx context.Context, filePath string, contents []byte, version topo.Version) (topo.Version, error) {
	p, n, err := backendkit.BeginVersioned(ctx, filePath, func(p string) (string, int64, error) { return backendkit.CheckUpdate(p, contents, version) }, c.closed.Load)
	if err != nil {
		return nil, err
	}
	if c.internal(p) {
		return nil, backendkit.Wrap(topo.InvalidPath, p, errOwnZnodes)
	}
	entries := c.entriesAt(p)
	if entries || version != nil || len(contents) == 0 {
		if !entries && version == nil {
			contents = nil // sent as a null buffer (length -1)
		}
		vs, err := c.Txn(ctx, topo.UpdateOp(p, contents, version))
		if err != nil {
			return nil, opErr(err)
		}
		return vs[0], nil
	}
	zp := c.zkPath(p)
	for attempt := 0; ; attempt++ {
		var st *zk.Stat
		err := c.write(ctx, p, func(z *zk.Conn) error {
			var err error
			st, err = z.Set(zp, contents, zkVersion(n))
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

// emptyWithChildren is the InvalidArgument error of a write of empty
// contents to p, a znode with children (ErrEmptyFileWithChildren).
func emptyWithChildren(p string) error {
	return backendkit.Wrap(topo.InvalidArgument, p, ErrEmptyFileWithChildren)
}

// Get returns filePath's contents and Stat.Version in one round trip (a
// sync or read barrier may be pipelined before it: the package doc,
// Reads). A persistent znode another tool wrote at a reserved path
// (foreignFile) is a file; the lock and election layout and ZooKeeper's
// own "/zookeeper" are not. Errors: NoNode (absent, only a directory, or
// such a znode), InvalidPath, PermissionDenied, Timeout/Interrupted,
// Closed, Unavailable.
func (c *Conn) Get(ctx context.Context, filePath string) ([]byte, topo.Version, error) {
	p, err := backendkit.Begin(ctx, filePath, topo.CleanFilePath, c.closed.Load)
	if err != nil {
		return nil, nil, err
	}
	r, err := c.getOn(ctx, nil, p, c.zkPath(p), false)
	if err != nil {
		return nil, nil, c.convert(err, p)
	}
	if st := r.st; !isFile(st) || st.EphemeralOwner != 0 || c.system(p) || (c.internal(p) && !c.foreignFile(p, st)) {
		return nil, nil, topo.NewError(topo.NoNode, p)
	}
	return orEmpty(r.data), topo.NumericVersion(r.st.Version), nil
}

// GetVersion returns NoImplementation (ZooKeeper keeps no history) after
// backendkit.CheckGetVersion's checks (InvalidPath, InvalidArgument) and
// Closed.
func (c *Conn) GetVersion(ctx context.Context, filePath string, version int64) ([]byte, error) {
	return nil, backendkit.NoHistory(ctx, filePath, version, c.closed.Load, "zk2topo: ZooKeeper keeps no history")
}

// List returns every file whose path starts with filePathPrefix (a string
// prefix), with contents and Stat.Version, sorted by path, walking the
// znodes below the prefix's directory concurrently (MaxConcurrency) and
// skipping the lock and election layout. Files other tools wrote at
// reserved paths are left out and named by the PartialResult error of
// backendkit.ReservedFiles, returned with the others. Not a snapshot:
// files changed during the walk may show either state. Errors: NoNode (no
// match), InvalidPath, PermissionDenied, Timeout/Interrupted, Closed,
// Unavailable.
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
	// but NoNode (deleted meanwhile).
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

// system reports whether p is (inside) ZooKeeper's own "/zookeeper".
func (c *Conn) system(p string) bool {
	return c.root == "" && (p == "zookeeper" || strings.HasPrefix(p, "zookeeper/"))
}

// foreignFile reports whether the persistent znode at the reserved path p
// is a file another tool wrote: it holds data, or is an empty leaf that is
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

// Delete deletes filePath (at version, when not nil: BadVersion
// otherwise) and the parent directories it leaves empty (holding at most
// an empty "locks" znode). It reads the parent's Stat first (and the
// ancestors', one round trip more, when the parent holds only the file):
// directories the delete empties go in one multi with it
// (deleteEmptying). Otherwise the delete follows, with the parent read
// behind it to remove it when another client's Delete emptied it
// meanwhile (readBehind, best effort). A file under the root costs the
// delete alone. A file with files below it becomes a directory: a one-op
// Txn empties its data (Txn's DeleteOp; its own delete fails first, one
// request more than the emptying needs).
// Where znodes may be entries (see Update), Delete is a one-op Txn: an
// entry is NoNode, left alone. Errors: InvalidPath (including the
// reserved-name rule), InvalidArgument (bad version), NoNode, BadVersion
// (only with a version), PermissionDenied, ResourceExhausted
// (ErrTxnContention; for a file with files below it, writers that
// changed it between the Txn's read and write ten times),
// Timeout/Interrupted, Closed, Unavailable.
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
	delRes := sendFirst(s, opDelete, zp, func() error { return c.do(ctx, p, func() error { return s.zk.Delete(zp, ver) }) })
	behind := c.readBehind(ctx, s, p, parent)
	if delErr := <-delRes; delErr != nil {
		return c.deleteFailed(ctx, p, ver, delErr)
	}
	c.removeIfEmpty(ctx, behind, false)
	return nil
}

// deleteFailed is the error of Delete(p) at version ver (-1: any) whose
// delete of the file's znode failed with err.
func (c *Conn) deleteFailed(ctx context.Context, p string, ver int32, err error) error {
	switch {
	case errors.Is(err, zk.ErrNotEmpty):
		// A file with files below it becomes a directory: a one-op Txn
		// empties its data (see Txn, DeleteOp).
		var version topo.Version
		if ver >= 0 {
			version = topo.NumericVersion(ver)
		}
		_, err := c.Txn(ctx, topo.DeleteOp(p, version))
		return opErr(err)
	case errors.Is(err, zk.ErrBadVersion):
		// ZooKeeper checks the version before the children: NoNode when p
		// is absent or only a directory.
		switch r := c.statOn(ctx, nil, p, c.zkPath(p), false); {
		case r.err != nil:
			return c.convert(r.err, p)
		case !r.exists || !isFile(r.st):
			return topo.NewError(topo.NoNode, p)
		}
		return topo.NewError(topo.BadVersion, p)
	}
	return c.convert(err, p)
}

// deleteEmptying deletes the file p (znode zp, at version ver) and, in
// the same multi, the directories its delete empties (nearest first, each
// with one child and no data, at the version read: one changed since fails
// the multi), read on session s, the parent first and the ancestors above
// only when the parent holds nothing but the file. The next ancestor is
// read behind the multi (readBehind). done is false, nothing written,
// when the parent keeps other entries or the multi failed on a
// directory: Delete then deletes the file alone.
func (c *Conn) deleteEmptying(ctx context.Context, s *zkSession, p, zp string, ver int32) (done bool, err error) {
	// The parent first: usually it keeps other entries, and that is all.
	parent := zkDir(zp)
	r := c.statOn(ctx, s, p, parent, false)
	if r.err != nil {
		return true, c.convert(r.err, p)
	}
	if !onlyChild(r) {
		return false, nil
	}
	reqs, top, err := c.withEmptied(ctx, s, p, parent, []any{
		&zk.DeleteRequest{Path: zp, Version: ver},
		&zk.DeleteRequest{Path: parent, Version: r.st.Version}})
	if err != nil {
		return true, c.convert(err, p)
	}
	above := zkDir(top)
	var res []zk.MultiResponse
	multi := sendFirst(s, opMulti, zp, func() error {
		return c.do(ctx, p, func() error {
			var err error
			res, err = s.zk.Multi(reqs...)
			return err
		})
	})
	behind := c.readBehind(ctx, s, p, above)
	if err = <-multi; err == nil {
		c.removeIfEmpty(ctx, behind, false)
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

// opErr is the op's own error of a one-op Txn's *topo.TxnError.
func opErr(err error) error {
	var te *topo.TxnError
	if errors.As(err, &te) {
		return te.Err
	}
	return err
}
