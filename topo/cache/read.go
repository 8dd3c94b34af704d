package cache

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/topokit/topokit/topo"
)

// Get implements topo.Conn.Get, from memory when it may (see
// GetWithInfo).
func (c *Cache) Get(ctx context.Context, filePath string) ([]byte, topo.Version, error) {
	b, v, _, err := c.GetWithInfo(ctx, filePath)
	return b, v, err
}

// GetWithInfo is Get that also says where the answer came from. A path
// under the prefix is answered from memory in Cached mode (the mode of
// ctx, see WithMode, or Options.Mode) unless this Cache wrote it and the
// watch has not delivered that write yet, or the Cache may not serve
// (closed, over its limit, or not Healthy for longer than MaxStaleness).
// In Consistent mode memory answers after a barrier, when the wrapped Conn
// is a SyncWatcher and the Cache is Healthy: once the watch has delivered
// every change committed before the call (one cheap store read, then a
// wait). Otherwise the wrapped Conn answers. The errors are Conn.Get's: NoNode for
// an absent file, InvalidPath, and from the store whatever it returns.
// The returned slice is the caller's.
func (c *Cache) GetWithInfo(ctx context.Context, filePath string) ([]byte, topo.Version, Info, error) {
	p, ok := c.memoryPath(ctx, filePath)
	mode := modeOf(ctx, c.opts.Mode)
	if ok && mode == Cached {
		c.mu.RLock()
		serve, stale := c.serving()
		if serve && c.pending[p] == nil {
			return c.memoryGet(p, stale)
		}
		c.mu.RUnlock()
	}
	if ok && mode == Consistent {
		if gen, passed := c.barrier(ctx); passed {
			c.mu.RLock()
			if c.gen == gen && c.health == Healthy && !c.closed && c.pending[p] == nil {
				return c.memoryGet(p, false)
			}
			c.mu.RUnlock()
		}
	}
	c.hook("Get", storeOutcome(ok, mode))
	b, v, err := c.conn.Get(storeCtx(ctx, mode), filePath)
	c.noteStore(err)
	return b, v, Info{Confirmed: time.Now()}, err
}

// memoryGet answers a Get of p from memory. Call with c.mu held for
// reading; it releases it.
func (c *Cache) memoryGet(p string, stale bool) ([]byte, topo.Version, Info, error) {
	e, confirmed, rev := c.files[p], c.confirmed, c.rev
	c.mu.RUnlock()
	c.hook("Get", outcome(stale))
	info := Info{FromMemory: true, Stale: stale, Confirmed: confirmed, Revision: rev}
	if e == nil {
		return nil, nil, info, topo.NewError(topo.NoNode, p)
	}
	return slices.Clone(e.value), e.version, info, nil
}

// List implements topo.Conn.List, from memory when it may (see
// ListWithInfo).
func (c *Cache) List(ctx context.Context, filePathPrefix string) ([]topo.KVInfo, error) {
	kvs, _, err := c.ListWithInfo(ctx, filePathPrefix)
	return kvs, err
}

// ListWithInfo is List that also says where the answer came from. A
// prefix that starts with the Cache's prefix is answered from memory under
// the rules of GetWithInfo (no file under it may have a write of this Cache
// not yet delivered by the watch). The errors are Conn.List's: NoNode when
// no file matches, InvalidPath, and from the store whatever it returns.
// The returned slices are the caller's.
func (c *Cache) ListWithInfo(ctx context.Context, filePathPrefix string) ([]topo.KVInfo, Info, error) {
	mode := modeOf(ctx, c.opts.Mode)
	p, err := topo.CleanPrefix(filePathPrefix)
	ok := err == nil && ctx.Err() == nil && c.covers(p)
	if ok && mode == Cached {
		c.mu.RLock()
		serve, stale := c.serving()
		if serve && !c.pendingUnder(p, false) {
			var kvs []topo.KVInfo
			for path, e := range c.files {
				if strings.HasPrefix(path, p) {
					kvs = append(kvs, topo.KVInfo{Path: path, Value: slices.Clone(e.value), Version: e.version})
				}
			}
			confirmed, rev := c.confirmed, c.rev
			c.mu.RUnlock()
			c.hook("List", outcome(stale))
			info := Info{FromMemory: true, Stale: stale, Confirmed: confirmed, Revision: rev}
			if len(kvs) == 0 {
				return nil, info, topo.NewError(topo.NoNode, p)
			}
			slices.SortFunc(kvs, func(a, b topo.KVInfo) int { return strings.Compare(a.Path, b.Path) })
			return kvs, info, nil
		}
		c.mu.RUnlock()
	}
	c.hook("List", storeOutcome(ok, mode))
	kvs, err := c.conn.List(storeCtx(ctx, mode), filePathPrefix)
	c.noteStore(err)
	return kvs, Info{Confirmed: time.Now()}, err
}

// ListDir implements topo.Conn.ListDir. It goes to the wrapped Conn
// unless Options.ListDirFromMemory is set and every file below dirPath is
// under the prefix; then, under the rules of GetWithInfo, memory answers
// with the directories and files below dirPath, and no lock or election
// entries (which the store lists, Ephemeral).
func (c *Cache) ListDir(ctx context.Context, dirPath string, full bool) ([]topo.DirEntry, error) {
	mode := modeOf(ctx, c.opts.Mode)
	d, err := topo.CleanDirPath(dirPath)
	dp := d + "/"
	if d == "" {
		dp = ""
	}
	ok := c.opts.ListDirFromMemory && err == nil && ctx.Err() == nil && c.covers(dp)
	if ok && mode == Cached {
		c.mu.RLock()
		serve, stale := c.serving()
		if serve && !c.pendingUnder(dp, false) {
			entries := c.listDir(dp, full)
			c.mu.RUnlock()
			c.hook("ListDir", outcome(stale))
			if len(entries) == 0 {
				return nil, topo.NewError(topo.NoNode, d)
			}
			return entries, nil
		}
		c.mu.RUnlock()
	}
	c.hook("ListDir", storeOutcome(ok, mode))
	entries, err := c.conn.ListDir(storeCtx(ctx, mode), dirPath, full)
	c.noteStore(err)
	return entries, err
}

// listDir lists the names directly under dp (a directory path with its
// trailing "/", or "" for the root) from memory. A name that is a file and
// also has files below it is listed once, as a directory. Call with c.mu
// held.
func (c *Cache) listDir(dp string, full bool) []topo.DirEntry {
	types := map[string]topo.DirEntryType{}
	for path := range c.files {
		rest, ok := strings.CutPrefix(path, dp)
		if !ok {
			continue
		}
		name, _, isDir := strings.Cut(rest, "/")
		if isDir {
			types[name] = topo.TypeDirectory
		} else if _, seen := types[name]; !seen {
			types[name] = topo.TypeFile
		}
	}
	entries := make([]topo.DirEntry, 0, len(types))
	for name, t := range types {
		e := topo.DirEntry{Name: name}
		if full {
			e.Type = t
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b topo.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return entries
}

// memoryPath returns the canonical form of filePath and whether memory may
// answer for it: a valid path under the prefix, with ctx not ended (a bad
// path or an ended context goes to the store, which returns its error).
func (c *Cache) memoryPath(ctx context.Context, filePath string) (string, bool) {
	p, err := topo.CleanFilePath(filePath)
	return p, err == nil && ctx.Err() == nil && c.covers(p)
}

// storeCtx is the context of a read the store answers in mode: in
// Consistent mode it asks the wrapped Conn for a linearizable read (see
// topo.WithLinearizableRead), whatever options the Conn was opened with.
func storeCtx(ctx context.Context, mode Mode) context.Context {
	if mode == Consistent {
		return topo.WithLinearizableRead(ctx)
	}
	return ctx
}

func outcome(stale bool) Outcome {
	if stale {
		return StaleHit
	}
	return Hit
}

// storeOutcome is how a read the store answers counts: a Miss when memory
// could have answered it, Passed otherwise.
func storeOutcome(covered bool, mode Mode) Outcome {
	if covered && mode != Bypass {
		return Miss
	}
	return Passed
}
