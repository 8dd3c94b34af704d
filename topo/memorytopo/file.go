package memorytopo

import (
	"bytes"
	"context"
	"slices"
	"strings"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Create implements topo.Conn.Create; NodeExists also when filePath is a
// lock or election entry.
func (c *Conn) Create(ctx context.Context, filePath string, contents []byte) (topo.Version, error) {
	op, value, err := c.beginWrite(ctx, topo.TxnCreate, filePath, contents, nil)
	if err != nil {
		return nil, err
	}
	return c.writeOne(op, value)
}

// beginWrite is begin for a write of kind, checked as backendkit checks
// Update (Create: with a nil version) or Delete. It returns the write as
// a transaction's op and the new value, copied outside the store's lock.
func (c *Conn) beginWrite(ctx context.Context, kind topo.TxnOpKind, filePath string, contents []byte, version topo.Version) (backendkit.TxnOp, *fileState, error) {
	op := backendkit.TxnOp{Kind: kind}
	p, err := c.begin(ctx, writeOps[kind], filePath, func(raw string) (p string, err error) {
		if kind == topo.TxnDelete {
			p, op.Version, err = backendkit.CheckDelete(raw, version)
		} else {
			p, op.Version, err = backendkit.CheckUpdate(raw, contents, version)
		}
		return p, err
	})
	if err != nil {
		return op, nil, err
	}
	op.Path = p
	if kind == topo.TxnDelete {
		return op, nil, nil
	}
	return op, &fileState{contents: bytes.Clone(contents)}, nil
}

// writeOne runs the write op under the store's write lock as a one-op Txn
// would: Closed again, its condition, then the write.
func (c *Conn) writeOne(op backendkit.TxnOp, value *fileState) (topo.Version, error) {
	s := c.s
	s.lock()
	defer s.mu.Unlock()
	if err := c.closedErr(op.Path); err != nil {
		return nil, err
	}
	s.placeFor(op.Path)
	if err := c.txnCheck(op); err != nil {
		return nil, err
	}
	return c.apply(op, value), nil
}

// Update implements topo.Conn.Update; NodeExists when filePath is an
// entry. Updates of different existing files do not serialise
// (updateInPlace).
func (c *Conn) Update(ctx context.Context, filePath string, contents []byte, version topo.Version) (topo.Version, error) {
	op, value, err := c.beginWrite(ctx, topo.TxnUpdate, filePath, contents, version)
	if err != nil {
		return nil, err
	}
	if v, done, err := c.updateInPlace(op.Path, value, op.Version); done {
		return v, err
	}
	return c.writeOne(op, value)
}

// updateInPlace rewrites an existing file with the store's mu held for
// reading (the tree's shape cannot change, so n stays the file's) and the
// file's node locked (its history and Watch events stay in version
// order). It reports done=false, having changed nothing, when p holds no
// file or a WatchRecursive is registered (its events of different files
// must stay in version order, which only the write lock gives).
func (c *Conn) updateInPlace(p string, value *fileState, want int64) (v topo.Version, done bool, err error) {
	s := c.s
	s.rlock()
	defer s.mu.RUnlock()
	if err := c.closedErr(p); err != nil {
		return nil, true, err
	}
	if len(s.recWatchers) > 0 {
		return nil, false, nil
	}
	n := c.files[p]
	if n == nil || n.entry != nil {
		return nil, false, nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	old := n.file.Load()
	if old == nil {
		return nil, false, nil
	}
	if want != backendkit.AnyVersion && old.version != want {
		return nil, true, topo.NewError(topo.BadVersion, p)
	}
	return s.setFile(c.root, p, n, value).ver, true, nil
}

func (c *Conn) load(p string) *fileState {
	defer c.s.unlock(c.s.rlockPlaced(p, false))
	return stateOf(c.files[p])
}

// stateOf returns n's file, or its entry read as one; nil for none. Call
// with mu held.
func stateOf(n *node) *fileState {
	switch {
	case n == nil:
		return nil
	case n.entry != nil:
		return &fileState{contents: []byte(n.entry.value), version: n.entry.seq, ver: topo.NumericVersion(n.entry.seq)}
	}
	return n.file.Load()
}

// cleanFilePath is topo.CleanFilePath, through backendkit.CleanPlain.
func cleanFilePath(p string) (string, error) {
	if c, ok := backendkit.CleanPlain(p); ok {
		return c, nil
	}
	return topo.CleanFilePath(p)
}

// Get implements topo.Conn.Get; an entry reads as a file of its contents.
func (c *Conn) Get(ctx context.Context, filePath string) ([]byte, topo.Version, error) {
	p, err := c.begin(ctx, OpGet, filePath, cleanFilePath)
	if err != nil {
		return nil, nil, err
	}
	fs := c.load(p)
	if fs == nil {
		return nil, nil, topo.NewError(topo.NoNode, p)
	}
	return bytes.Clone(fs.contents), fs.ver, nil
}

// GetVersion implements topo.Conn.GetVersion from the last Options.History
// versions (a delete discards them): Compacted before them.
func (c *Conn) GetVersion(ctx context.Context, filePath string, version int64) ([]byte, error) {
	p, err := c.begin(ctx, OpGetVersion, filePath, func(raw string) (string, error) {
		p, err := cleanFilePath(raw)
		if err == nil && version < 0 {
			_, err = backendkit.CheckGetVersion(p, version)
		}
		return p, err
	})
	if err != nil {
		return nil, err
	}
	fs := c.load(p)
	if fs == nil {
		return nil, topo.NewError(topo.NoNode, p)
	}
	if fs.version == version {
		return bytes.Clone(fs.contents), nil
	}
	s := c.s
	s.rlock()
	defer s.mu.RUnlock()
	n := c.node(p)
	if n == nil {
		return nil, topo.NewError(topo.NoNode, p)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	contents, code := n.versionAt(version)
	if code != 0 {
		return nil, topo.NewError(code, p)
	}
	return bytes.Clone(contents), nil
}

// List implements topo.Conn.List as one snapshot (under the write lock).
func (c *Conn) List(ctx context.Context, filePathPrefix string) ([]topo.KVInfo, error) {
	p, err := c.begin(ctx, OpList, filePathPrefix, topo.CleanPrefix)
	if err != nil {
		return nil, err
	}
	s := c.s
	s.lock()
	var out []topo.KVInfo
	s.walkPrefix(c.fullPrefix(p), func(full string, fs *fileState) {
		out = append(out, topo.KVInfo{Path: c.rel(full), Value: bytes.Clone(fs.contents), Version: fs.ver})
	})
	s.mu.Unlock()
	if len(out) == 0 {
		return nil, topo.NewError(topo.NoNode, p)
	}
	slices.SortFunc(out, func(a, b topo.KVInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// walkPrefix calls fn for every regular file whose full path starts with
// prefix, in any order.
func (s *store) walkPrefix(prefix string, fn func(full string, fs *fileState)) {
	dir, rest := "", prefix
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dir, rest = prefix[:i], prefix[i+1:]
	}
	n := s.lookup(dir)
	if n == nil {
		return
	}
	for name, ch := range n.children {
		if strings.HasPrefix(name, rest) {
			walkFiles(ch, joinRoot(dir, name), fn)
		}
	}
}

func walkFiles(n *node, full string, fn func(string, *fileState)) {
	if n.files == 0 {
		return
	}
	if n.file.Load() != nil {
		fn(full, n.file.Load())
	}
	for name, ch := range n.children {
		walkFiles(ch, full+"/"+name, fn)
	}
}

// Delete implements topo.Conn.Delete; NoNode also for a directory,
// InvalidPath for a reserved path (where entries live).
func (c *Conn) Delete(ctx context.Context, filePath string, version topo.Version) error {
	op, _, err := c.beginWrite(ctx, topo.TxnDelete, filePath, nil, version)
	if err != nil {
		return err
	}
	_, err = c.writeOne(op, nil)
	return err
}
