package cache

import (
	"context"

	"github.com/topokit/topokit/topo"
)

// Create implements topo.Conn.Create on the wrapped Conn. Until the watch
// delivers the new file, reads of it go to the store.
func (c *Cache) Create(ctx context.Context, filePath string, contents []byte) (topo.Version, error) {
	return c.write(ctx, filePath, false, func() (topo.Version, error) { return c.conn.Create(ctx, filePath, contents) })
}

// Update implements topo.Conn.Update on the wrapped Conn. Until the watch
// delivers the write, reads of the file go to the store.
func (c *Cache) Update(ctx context.Context, filePath string, contents []byte, version topo.Version) (topo.Version, error) {
	return c.write(ctx, filePath, false, func() (topo.Version, error) { return c.conn.Update(ctx, filePath, contents, version) })
}

// Delete implements topo.Conn.Delete on the wrapped Conn. Until the watch
// delivers the deletion, reads of the file go to the store. When a
// deletion event of the file arrives while it is in flight (it may be
// another writer's), Delete passes a revision barrier before it returns on
// a SyncWatcher Conn; on others (or when the barrier fails) the file is
// read from the store until a later deletion event of it, or until the
// Cache lists the prefix again, which its probe asks for (see
// docs/cache.md).
func (c *Cache) Delete(ctx context.Context, filePath string, version topo.Version) error {
	_, err := c.write(ctx, filePath, true, func() (topo.Version, error) { return nil, c.conn.Delete(ctx, filePath, version) })
	return err
}

// write runs one write of filePath, marking the path pending around it when
// it is under the prefix.
func (c *Cache) write(ctx context.Context, filePath string, del bool, fn func() (topo.Version, error)) (topo.Version, error) {
	p, err := topo.CleanFilePath(filePath)
	if err != nil || !c.covers(p) {
		return fn()
	}
	c.mu.Lock()
	t := c.begin(p)
	c.mu.Unlock()
	v, err := fn()
	synced := del && err == nil && c.syncDeletes(ctx, []string{p})
	c.mu.Lock()
	c.finish(p, t, del, v, err, synced)
	c.mu.Unlock()
	c.noteStore(err)
	return v, err
}

// syncDeletes is called after deletions of paths succeeded, before they are
// recorded. A deletion event of such a path delivered while the deletion
// was in flight may be another writer's earlier one (the file then created
// again, and that creation's event still on its way): it does not show
// the deletion, as a version shows an update. So when one was, syncDeletes
// waits for a revision barrier (see barrier), after which memory holds
// every change committed before it, the deletions included; it reports
// whether it passed one. Without a barrier (no SyncWatcher: ZooKeeper,
// Consul, or the barrier failing) the deletion is recorded as unsure (see
// finish): its path is read from the store until a later deletion event
// of it or a relist, which the probe asks for (see relistUnsure).
func (c *Cache) syncDeletes(ctx context.Context, paths []string) bool {
	c.mu.RLock()
	ambiguous := false
	for _, p := range paths {
		if pd := c.pending[p]; pd != nil && pd.hasLast && pd.last == nil {
			ambiguous = true
		}
	}
	c.mu.RUnlock()
	if !ambiguous {
		return false
	}

	_, passed := c.barrier(ctx)
	return passed
}

// finish records the answer of a write of p begun with ticket t: a deletion
// (del) or a write that returned v, failed when err is not nil. synced
// says that memory is known to hold the write already (see syncDeletes).
// A deletion not synced whose path saw a deletion event while it was in
// flight is recorded as unsure (see want): that event may be another
// writer's. Call with c.mu held.
func (c *Cache) finish(p string, t ticket, del bool, v topo.Version, err error, synced bool) {
	unsure := false
	if del {
		v = nil
		pd := c.pending[p]
		unsure = !synced && pd.hasLast && pd.last == nil
	}
	c.end(p, t, v, err == nil && (del || v != nil), synced, unsure)
}

// Txn implements topo.Conn.Txn on the wrapped Conn. Until the watch
// delivers them, reads of the files it writes under the prefix go to the
// store.
func (c *Cache) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	var paths []string // per op: the canonical path of a write under the prefix, or ""
	tickets := make([]ticket, len(ops))
	c.mu.Lock()
	for i, op := range ops {
		p := ""
		if !op.Kind.IsCondition() {
			if q, err := topo.CleanFilePath(op.Path); err == nil && c.covers(q) {
				p = q
				tickets[i] = c.begin(p)
			}
		}
		paths = append(paths, p)
	}
	c.mu.Unlock()
	vs, err := c.conn.Txn(ctx, ops...)
	var deleted []string
	for i, p := range paths {
		if p != "" && ops[i].Kind == topo.TxnDelete {
			deleted = append(deleted, p)
		}
	}
	synced := err == nil && len(deleted) > 0 && c.syncDeletes(ctx, deleted)
	c.mu.Lock()
	for i, p := range paths {
		if p == "" {
			continue
		}
		var v topo.Version
		if err == nil && i < len(vs) {
			v = vs[i]
		}
		c.finish(p, tickets[i], ops[i].Kind == topo.TxnDelete, v, err, synced)
	}
	c.mu.Unlock()
	c.noteStore(err)
	return vs, err
}

// GetVersion implements topo.Conn.GetVersion on the wrapped Conn.
func (c *Cache) GetVersion(ctx context.Context, filePath string, version int64) ([]byte, error) {
	return c.conn.GetVersion(ctx, filePath, version)
}
