package zk2topo

import (
	"context"
	"sort"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
)

// ListDir lists the znodes directly under dirPath, sorted by name. A plain
// listing costs one round trip (plus one when a "locks" child must be
// checked); a full one adds one pipelined Stat read per entry, and reports
// TypeDirectory for znodes with children, TypeFile otherwise. The "locks"
// znode of a locked directory and the entries under "elections" are shown
// as Ephemeral directories while a lock is held or a candidate runs, and
// hidden otherwise. It returns NoNode when dirPath does not exist or has no
// visible entry, and InvalidPath, Timeout/Interrupted, Closed or
// Unavailable.
func (c *Conn) ListDir(ctx context.Context, dirPath string, full bool) ([]topo.DirEntry, error) {
	dp, err := topo.CleanDirPath(dirPath)
	if err != nil {
		return nil, err
	}
	if err := c.begin(ctx, dp); err != nil {
		return nil, err
	}
	zp := c.zkPath(dp)
	var names []string
	err = c.read(ctx, dp, func(z *zk.Conn) error {
		var err error
		names, _, err = z.Children(zp)
		return err
	})
	if err != nil {
		return nil, c.convert(err, dp)
	}
	sort.Strings(names)
	inElections := dp == electionsDir
	var entries []topo.DirEntry
	if !full {
		for _, n := range names {
			cp := topo.JoinPath(dp, n)
			if c.internal(cp) && n != locksDir && !inElections && cp != electionsDir {
				continue // ZooKeeper's own znodes
			}
			if n == locksDir || inElections {
				// Shown only while a lock is held / a candidate runs.
				var st *zk.Stat
				var exists bool
				err := c.read(ctx, dp, func(z *zk.Conn) error {
					var err error
					exists, st, err = z.Exists(c.zkPath(cp))
					return err
				})
				if err != nil {
					return nil, c.convert(err, dp)
				}
				if !exists || st.NumChildren == 0 {
					continue
				}
			}
			entries = append(entries, topo.DirEntry{Name: n})
		}
	} else {
		stats := make([]*zk.Stat, len(names))
		errs := make([]error, len(names))
		var wg sync.WaitGroup
		for i, n := range names {
			wg.Go(func() {
				errs[i] = c.read(ctx, dp, func(z *zk.Conn) error {
					exists, st, err := z.Exists(c.zkPath(topo.JoinPath(dp, n)))
					if err == nil && exists {
						stats[i] = st
					}
					return err
				})
			})
		}
		wg.Wait()
		for i, n := range names {
			if errs[i] != nil {
				return nil, c.convert(errs[i], dp)
			}
			st := stats[i]
			if st == nil {
				continue // deleted meanwhile
			}
			cp := topo.JoinPath(dp, n)
			e := topo.DirEntry{Name: n, Type: topo.TypeFile, Ephemeral: st.EphemeralOwner != 0}
			if st.NumChildren > 0 {
				e.Type = topo.TypeDirectory
			}
			switch {
			case n == locksDir || inElections:
				if st.NumChildren == 0 {
					continue
				}
				e.Ephemeral = true
			case cp == electionsDir:
				e.Type = topo.TypeDirectory
			case c.internal(cp):
				continue
			}
			entries = append(entries, e)
		}
	}
	if len(entries) == 0 {
		return nil, topo.NewError(topo.NoNode, dp)
	}
	return entries, nil
}
