package zk2topo

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// ListDir lists the znodes directly under dirPath, sorted by name: one
// round trip (one more when a "locks" child must be checked); a full
// listing adds a concurrent Stat read per entry and reports TypeDirectory
// for znodes with children. A "locks" znode and the entries under
// "elections" are shown as Ephemeral directories while a lock is held or
// a candidate runs (electionBusy reads an election's children, and its
// nested elections'), hidden otherwise; a full listing also marks the
// top-level "elections" Ephemeral while a candidate runs below it. It
// stays listed once an election ran (its directories are persistent).
// Errors: NoNode (absent, or no visible entry), InvalidPath,
// Timeout/Interrupted, Closed, Unavailable.
func (c *Conn) ListDir(ctx context.Context, dirPath string, full bool) ([]topo.DirEntry, error) {
	dp, err := backendkit.Begin(ctx, dirPath, topo.CleanDirPath, c.closed.Load)
	if err != nil {
		return nil, err
	}
	ctx = c.barrierScoped(ctx) // the reads after the first start after it answered
	zp := c.zkPath(dp)
	kids, err := c.childrenOn(ctx, nil, dp, zp, false)
	if err != nil {
		return nil, c.convert(err, dp)
	}
	names := kids.names
	if !full {
		entries, err := c.nameEntries(ctx, dp, zp, kids.st, names)
		if err != nil || len(entries) > 0 {
			return entries, err
		}
		return nil, topo.NewError(topo.NoNode, dp)
	}
	inElections := dp == electionsDir
	var entries []topo.DirEntry
	slices.Sort(names)
	stats := make([]statRes, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() { stats[i] = c.statOn(ctx, nil, dp, c.zkPath(backendkit.JoinPath(dp, n)), false) })
	}
	wg.Wait()
	for i, n := range names {
		if stats[i].err != nil {
			return nil, c.convert(stats[i].err, dp)
		}
		st := stats[i].st
		if !stats[i].exists {
			continue // deleted meanwhile
		}
		cp := backendkit.JoinPath(dp, n)
		e := topo.DirEntry{Name: n, Type: topo.TypeFile, Ephemeral: st.EphemeralOwner != 0}
		if st.NumChildren > 0 {
			e.Type = topo.TypeDirectory
		}
		switch {
		case n == locksDir || inElections:
			show, err := c.shown(ctx, dp, cp, st)
			if err != nil {
				return nil, err
			}
			if !show {
				continue
			}
			e.Ephemeral = true
		case cp == electionsDir:
			busy, err := c.electionBusy(ctx, dp, cp, st)
			if err != nil {
				return nil, err
			}
			e.Type = topo.TypeDirectory
			e.Ephemeral = busy
		case c.internal(cp):
			continue
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return nil, topo.NewError(topo.NoNode, dp)
	}
	return entries, nil
}

// nameEntries is a names-only ListDir after the children read of dp
// (znode zp, Stat st): every name, sorted (or from the listCache), but an
// unlocked "locks" child and "zookeeper" at the ZooKeeper root.
func (c *Conn) nameEntries(ctx context.Context, dp, zp string, st *zk.Stat, names []string) ([]topo.DirEntry, error) {
	if c.internal(dp) { // "elections" too
		return c.internalEntries(ctx, dp, names)
	}
	var entries []topo.DirEntry
	if cached := c.listCache.get(zp, st); cached != nil {
		entries = slices.Clone(cached) // unchanged since the last listing
	} else {
		slices.Sort(names)
		entries = make([]topo.DirEntry, len(names))
		for i, n := range names {
			entries[i].Name = n
		}
		if len(entries) >= listCacheMin {
			c.listCache.put(zp, st, slices.Clone(entries))
		}
	}
	if i, ok := findEntry(entries, locksDir); ok {
		show, err := c.lockedEntry(ctx, dp, locksDir)
		if err != nil {
			return nil, err
		}
		if !show {
			entries = slices.Delete(entries, i, i+1)
		}
	}
	if dp == "" && c.root == "" {
		if i, ok := findEntry(entries, "zookeeper"); ok {
			entries = slices.Delete(entries, i, i+1)
		}
	}
	return entries, nil
}

// findEntry binary-searches entries (sorted by name) for name.
func findEntry(entries []topo.DirEntry, name string) (int, bool) {
	return slices.BinarySearchFunc(entries, name, func(e topo.DirEntry, n string) int { return strings.Compare(e.Name, n) })
}

// lockedEntry reads dp's child n and reports whether it is shown.
func (c *Conn) lockedEntry(ctx context.Context, dp, n string) (bool, error) {
	cp := backendkit.JoinPath(dp, n)
	r := c.statOn(ctx, nil, dp, c.zkPath(cp), false)
	if r.err != nil || !r.exists {
		return false, c.convert(r.err, dp)
	}
	return c.shown(ctx, dp, cp, r.st)
}

// shown reports whether a listing shows dp's child cp (Stat st), a
// "locks" znode while it has children, or an election's directory while
// electionBusy.
func (c *Conn) shown(ctx context.Context, dp, cp string, st *zk.Stat) (bool, error) {
	if dp != electionsDir {
		return st.NumChildren > 0, nil
	}
	return c.electionBusy(ctx, dp, cp, st)
}

// internalEntries is nameEntries in "elections" or an internal directory:
// only the "locks" children and the elections that lockedEntry shows.
func (c *Conn) internalEntries(ctx context.Context, dp string, names []string) ([]topo.DirEntry, error) {
	slices.Sort(names)
	var entries []topo.DirEntry
	for _, n := range names {
		if n != locksDir && dp != electionsDir {
			continue // lock and election entries
		}
		show, err := c.lockedEntry(ctx, dp, n)
		if err != nil {
			return nil, err
		}
		if show {
			entries = append(entries, topo.DirEntry{Name: n})
		}
	}
	return entries, nil
}

// electionBusy reports whether the election directory cp (Stat st) or a
// nested election below it has a candidate, reading the children of each
// (one round trip per directory with children; "values" ignored).
func (c *Conn) electionBusy(ctx context.Context, dp, cp string, st *zk.Stat) (bool, error) {
	if st == nil || st.NumChildren == 0 {
		return false, nil
	}
	kids, err := c.childrenOn(ctx, nil, dp, c.zkPath(cp), false)
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, c.convert(err, dp)
	}
	for _, n := range kids.names {
		if isEntryName(n) {
			return true, nil
		}
	}
	for _, n := range kids.names {
		if n == valuesDir {
			continue
		}
		sub := backendkit.JoinPath(cp, n)
		r := c.statOn(ctx, nil, dp, c.zkPath(sub), false)
		if r.err != nil {
			return false, c.convert(r.err, dp)
		}
		if !r.exists {
			continue
		}
		busy, err := c.electionBusy(ctx, dp, sub, r.st)
		if err != nil || busy {
			return busy, err
		}
	}
	return false, nil
}
