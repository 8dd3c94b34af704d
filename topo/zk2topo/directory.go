package zk2topo

import (
	"context"
	"slices"
	"strings"
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
	sortNames(names)
	inElections := dp == electionsDir
	var entries []topo.DirEntry
	if !full {
		// The reserved-name checks, on each child's name: every child of
		// an internal directory (under a locks or elections directory)
		// is internal, and so are "locks" children and, at the ZooKeeper
		// root, "zookeeper"; "elections" at the root is shown.
		dirInternal := c.internal(dp)
		hideSystem := dp == "" && c.root == ""
		entries = make([]topo.DirEntry, 0, len(names))
		for _, n := range names {
			if n == locksDir || inElections {
				// Shown only while a lock is held / a candidate runs.
				var st *zk.Stat
				var exists bool
				cp := topo.JoinPath(dp, n)
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
			} else if dirInternal || (hideSystem && n == "zookeeper") {
				continue // lock and election entries, ZooKeeper's own znodes
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

// sortNames sorts znode names (ZooKeeper returns children in no order)
// in place, by bytes, as slices.Sort does but about three times faster for
// large directories: an LSD radix sort on the 8 bytes that follow the
// names' common prefix, skipping the byte positions where all names agree,
// then a comparison sort of each run of names whose 8 bytes tie.
func sortNames(names []string) {
	if len(names) < 64 {
		slices.Sort(names)
		return
	}
	type keyed struct {
		k uint64 // the 8 bytes after the common prefix, big-endian, zero-padded
		s string
	}
	lcp := names[0]
	for _, n := range names[1:] {
		i := 0
		for i < len(lcp) && i < len(n) && lcp[i] == n[i] {
			i++
		}
		if lcp = lcp[:i]; lcp == "" {
			break
		}
	}
	keys := make([]keyed, len(names))
	tmp := make([]keyed, len(names))
	var or, and uint64 = 0, ^uint64(0)
	for i, n := range names {
		var k uint64
		rest := n[len(lcp):]
		for j := range 8 {
			k <<= 8
			if j < len(rest) {
				k |= uint64(rest[j])
			}
		}
		keys[i] = keyed{k, n}
		or |= k
		and &= k
	}
	differ := or ^ and // the bits where some keys differ
	for shift := uint(0); shift < 64; shift += 8 {
		if (differ>>shift)&0xff == 0 {
			continue
		}
		var count [257]int
		for i := range keys {
			count[(keys[i].k>>shift)&0xff+1]++
		}
		for i := 1; i < len(count); i++ {
			count[i] += count[i-1]
		}
		for i := range keys {
			b := (keys[i].k >> shift) & 0xff
			tmp[count[b]] = keys[i]
			count[b]++
		}
		keys, tmp = tmp, keys
	}
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j].k == keys[i].k {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(keys[i:j], func(a, b keyed) int { return strings.Compare(a.s, b.s) })
		}
		i = j
	}
	for i := range keys {
		names[i] = keys[i].s
	}
}
