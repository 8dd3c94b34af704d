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

// ListDir lists the znodes directly under dirPath, sorted by name. A plain
// listing costs one round trip (plus one when a "locks" child must be
// checked); a full one adds one pipelined Stat read per entry, and reports
// TypeDirectory for znodes with children, TypeFile otherwise. The "locks"
// znode of a locked directory and the entries under "elections" are shown
// as Ephemeral directories while a lock is held or a candidate runs, and
// hidden otherwise (an election directory with children costs one more
// read of its children, and of each nested election's directory: see
// electionBusy). A full listing also marks the top-level "elections"
// directory Ephemeral while a candidate runs below it, as every backend
// does (one more read of its children, and of each election's directory
// until a running one is found). Election directories are
// persistent, as Vitess creates them, and outlive their candidates, so
// "elections" stays in the root's listing once an election ran. The
// arguments are checked in backendkit's order (ctx first, then the path).
// It returns NoNode when dirPath does not exist or has no visible entry,
// and InvalidPath, Timeout/Interrupted, Closed or Unavailable.
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
			// Like every lock and election directory (and as Vitess's
			// backends list it), the top-level elections directory is
			// Ephemeral while elections run below it. ZooKeeper keeps it
			// once they ended: then it is a plain, persistent directory.
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

// nameEntries is a names-only ListDir after the Children read of dp
// (znode zp, st the reply's Stat): every name, sorted (or copied from the
// listCache when the children did not change), but a "locks" child while
// no lock is held (see lockedEntry) and "zookeeper" at the ZooKeeper root
// (ZooKeeper's own znodes), both found by a binary search. ListDir
// turns no entry into NoNode.
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

// findEntry returns the index of the entry named name in entries (sorted
// by name, each name once) and whether it is there.
func findEntry(entries []topo.DirEntry, name string) (int, bool) {
	return slices.BinarySearchFunc(entries, name, func(e topo.DirEntry, n string) int { return strings.Compare(e.Name, n) })
}

// lockedEntry reads dp's child n and reports whether a names-only
// listing shows it (see shown).
func (c *Conn) lockedEntry(ctx context.Context, dp, n string) (bool, error) {
	cp := backendkit.JoinPath(dp, n)
	r := c.statOn(ctx, nil, dp, c.zkPath(cp), false)
	if r.err != nil || !r.exists {
		return false, c.convert(r.err, dp)
	}
	return c.shown(ctx, dp, cp, r.st)
}

// shown reports whether a listing shows dp's child cp (with Stat st), a
// "locks" directory or (when dp is "elections") an election's directory:
// while it has children (a lock entry), and for an election while a
// candidate runs in it (see electionBusy).
func (c *Conn) shown(ctx context.Context, dp, cp string, st *zk.Stat) (bool, error) {
	if dp != electionsDir {
		return st.NumChildren > 0, nil
	}
	return c.electionBusy(ctx, dp, cp, st)
}

// internalEntries is nameEntries in "elections" or an internal directory
// (under a locks or elections directory), whose children are internal,
// but for the "locks" children and the children of "elections" that
// lockedEntry shows. They are read in sorted order.
func (c *Conn) internalEntries(ctx context.Context, dp string, names []string) ([]topo.DirEntry, error) {
	inElections := dp == electionsDir
	if inElections {
		slices.Sort(names)
	}
	var entries []topo.DirEntry
	for _, n := range names {
		if n != locksDir && !inElections {
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

// electionBusy reports whether the election directory cp (below
// "elections", Stat st) has a candidate entry, in it or in a nested
// election's directory below it. Election directories are persistent and
// outlive their candidates (see isContainer), so a directory with
// children may be idle: its children are read (one round trip per
// directory with children), the "values" container is ignored (a value
// znode lives only with its candidate), and any other child is a nested
// election's directory, read in turn.
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
	children := kids.names
	for _, n := range children {
		if isEntryName(n) {
			return true, nil
		}
	}
	for _, n := range children {
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
