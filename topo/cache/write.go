package cache

import (
	"context"

	"github.com/topokit/topokit/topo"
)

// Create implements topo.Conn.Create on the wrapped Conn. Until the watch
// delivers the new file, reads of it go to the store.
func (c *Cache) Create(ctx context.Context, filePath string, contents []byte) (topo.Version, error) {
	return c.write(filePath, false, func() (topo.Version, error) { return c.conn.Create(ctx, filePath, contents) })
}

// Update implements topo.Conn.Update on the wrapped Conn. Until the watch
// delivers the write, reads of the file go to the store.
func (c *Cache) Update(ctx context.Context, filePath string, contents []byte, version topo.Version) (topo.Version, error) {
	return c.write(filePath, false, func() (topo.Version, error) { return c.conn.Update(ctx, filePath, contents, version) })
}

// Delete implements topo.Conn.Delete on the wrapped Conn. Until the watch
// delivers the deletion, reads of the file go to the store.
func (c *Cache) Delete(ctx context.Context, filePath string, version topo.Version) error {
	_, err := c.write(filePath, true, func() (topo.Version, error) { return nil, c.conn.Delete(ctx, filePath, version) })
	return err
}

// write runs one write of filePath, marking the path pending around it when
// it is under the prefix.
func (c *Cache) write(filePath string, del bool, fn func() (topo.Version, error)) (topo.Version, error) {
	p, err := topo.CleanFilePath(filePath)
	if err != nil || !c.covers(p) {
		return fn()
	}
	c.mu.Lock()
	start := c.begin(p)
	c.mu.Unlock()
	v, err := fn()
	c.mu.Lock()
	c.finish(p, start, del, v, err)
	c.mu.Unlock()
	c.noteStore(err)
	return v, err
}

// finish records the answer of a write of p begun at start: a deletion
// (del) or a write that returned v, failed when err is not nil. Call with
// c.mu held.
func (c *Cache) finish(p string, start uint64, del bool, v topo.Version, err error) {
	if del {
		v = nil
	}
	c.end(p, start, v, err == nil && (del || v != nil))
}

// Txn implements topo.Conn.Txn on the wrapped Conn. Until the watch
// delivers them, reads of the files it writes under the prefix go to the
// store.
func (c *Cache) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	var paths []string // per op: the canonical path of a write under the prefix, or ""
	var start uint64
	c.mu.Lock()
	for _, op := range ops {
		p := ""
		if !op.Kind.IsCondition() {
			if q, err := topo.CleanFilePath(op.Path); err == nil && c.covers(q) {
				p = q
				start = c.begin(p)
			}
		}
		paths = append(paths, p)
	}
	c.mu.Unlock()
	vs, err := c.conn.Txn(ctx, ops...)
	c.mu.Lock()
	for i, p := range paths {
		if p == "" {
			continue
		}
		var v topo.Version
		if err == nil && i < len(vs) {
			v = vs[i]
		}
		c.finish(p, start, ops[i].Kind == topo.TxnDelete, v, err)
	}
	c.mu.Unlock()
	c.noteStore(err)
	return vs, err
}

// GetVersion implements topo.Conn.GetVersion on the wrapped Conn.
func (c *Cache) GetVersion(ctx context.Context, filePath string, version int64) ([]byte, error) {
	return c.conn.GetVersion(ctx, filePath, version)
}
