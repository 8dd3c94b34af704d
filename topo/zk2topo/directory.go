package zk2topo

import (
	"context"
	"math/bits"
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
// as Ephemeral directories while a lock is held or a candidate runs (an
// election directory holding only an empty "values" znode is hidden), and
// hidden otherwise; a full listing also marks the top-level "elections"
// directory Ephemeral, as every backend does. The arguments are checked
// in backendkit's order (ctx first, then the path). It returns NoNode when dirPath does not exist or has no
// visible entry, and InvalidPath, Timeout/Interrupted, Closed or
// Unavailable.
func (c *Conn) ListDir(ctx context.Context, dirPath string, full bool) ([]topo.DirEntry, error) {
	if err := backendkit.CheckContext(ctx, dirPath); err != nil {
		return nil, err
	}
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
	inElections := dp == electionsDir
	var entries []topo.DirEntry
	if !full {
		// A large directory's names are taken in sorted order straight
		// from the radix sort's order (sortedOrder), without sorting the
		// names themselves first.
		var order []uint64
		var m uint64
		if len(names) >= sortMin && len(names) <= 1<<31 {
			sc := getScratch(&c.sortPool)
			defer c.sortPool.Put(sc)
			order, m = sc.sortedOrder(names)
		} else {
			slices.Sort(names)
		}
		// The reserved-name checks, on each child's name: every child of
		// an internal directory (under a locks or elections directory)
		// is internal, and so are "locks" children and, at the ZooKeeper
		// root, "zookeeper"; "elections" at the root is shown.
		dirInternal := c.internal(dp)
		hideSystem := dp == "" && c.root == ""
		entries = make([]topo.DirEntry, 0, len(names))
		for i := range names {
			n := names[i]
			if order != nil {
				n = names[order[i]&m]
			}
			if n == locksDir || inElections {
				// Shown only while a lock is held / a candidate runs.
				var st *zk.Stat
				var exists bool
				cp := backendkit.JoinPath(dp, n)
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
				if inElections {
					busy, err := c.electionBusy(ctx, dp, cp, st)
					if err != nil {
						return nil, err
					}
					if !busy {
						continue
					}
				}
			} else if dirInternal || (hideSystem && n == "zookeeper") {
				continue // lock and election entries, ZooKeeper's own znodes
			}
			entries = append(entries, topo.DirEntry{Name: n})
		}
	} else {
		sortNames(names, &c.sortPool)
		stats := make([]*zk.Stat, len(names))
		errs := make([]error, len(names))
		var wg sync.WaitGroup
		for i, n := range names {
			wg.Go(func() {
				errs[i] = c.read(ctx, dp, func(z *zk.Conn) error {
					exists, st, err := z.Exists(c.zkPath(backendkit.JoinPath(dp, n)))
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
			cp := backendkit.JoinPath(dp, n)
			e := topo.DirEntry{Name: n, Type: topo.TypeFile, Ephemeral: st.EphemeralOwner != 0}
			if st.NumChildren > 0 {
				e.Type = topo.TypeDirectory
			}
			switch {
			case n == locksDir || inElections:
				if st.NumChildren == 0 {
					continue
				}
				if inElections {
					busy, err := c.electionBusy(ctx, dp, cp, st)
					if err != nil {
						return nil, err
					}
					if !busy {
						continue
					}
				}
				e.Ephemeral = true
			case cp == electionsDir:
				// Like every lock and election directory (and as Vitess's
				// backends list it), the top-level elections directory is
				// Ephemeral: it exists while elections run.
				e.Type = topo.TypeDirectory
				e.Ephemeral = true
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

// electionBusy reports whether the election directory cp (a child of
// "elections", Stat st) has anything but an empty "values" znode, which
// outlives the last candidate until it is removed (see values.go).
func (c *Conn) electionBusy(ctx context.Context, dp, cp string, st *zk.Stat) (bool, error) {
	if st.NumChildren != 1 {
		return st.NumChildren > 0, nil
	}
	var exists bool
	var vst *zk.Stat
	err := c.read(ctx, dp, func(z *zk.Conn) error {
		var err error
		exists, vst, err = z.Exists(c.zkPath(backendkit.JoinPath(cp, valuesDir)))
		return err
	})
	if err != nil {
		return false, c.convert(err, dp)
	}
	return !exists || vst.NumChildren > 0, nil
}

// sortScratch is the reusable memory of the name sorts, kept in a per-Conn
// pool between calls.
type sortScratch struct {
	keys []uint64 // 2n: the packed keys and the radix sort's other buffer
	hist []int32  // the radix sort's histograms, one per pass
	out  []string // sortNames' output before it is copied back
}

// sortMin is the number of names from which the radix sort beats
// slices.Sort.
const sortMin = 64

// sortNames sorts znode names (ZooKeeper returns children in no order)
// in place, by bytes, as slices.Sort does but several times faster for
// large directories (see sortedOrder). Its scratch memory is kept in pool
// (per Conn) between calls.
func sortNames(names []string, pool *sync.Pool) {
	n := len(names)
	if n < sortMin || n > 1<<31 {
		slices.Sort(names)
		return
	}
	sc := getScratch(pool)
	keys, m := sc.sortedOrder(names)
	if cap(sc.out) < n {
		sc.out = make([]string, n)
	}
	out := sc.out[:n]
	for i, k := range keys {
		out[i] = names[k&m]
	}
	copy(names, out)
	clear(out) // keep no names alive in the pool
	pool.Put(sc)
}

// getScratch returns a sortScratch from pool, or a new one.
func getScratch(pool *sync.Pool) *sortScratch {
	sc, _ := pool.Get().(*sortScratch)
	if sc == nil {
		sc = &sortScratch{}
	}
	return sc
}

// sortedOrder returns the indexes of names in the order of their names
// (as slices.Sort orders them), each in the low bits of one element of
// keys (index = key & m); keys is sc's memory, valid until sc is used
// again. names must hold at least sortMin and at most 1<<31 names.
//
// It is an LSD radix sort of one uint64 per name: the index in the low
// bits and, above it, the bits that differ between names of an 8-byte
// window of each name (big-endian, zero-padded): its first 8 bytes, or the
// 8 bytes after the names' common prefix when all first 8 bytes agree
// (the highest differing bits, when they do not all fit), in passes of 8 to 11 bits that
// skip a pass where all keys agree; then a comparison sort of each run of
// names whose kept bits tie.
func (sc *sortScratch) sortedOrder(names []string) (keys []uint64, m uint64) {
	n := len(names)
	if cap(sc.keys) < 2*n {
		sc.keys = make([]uint64, 2*n)
	}
	keys, tmp := sc.keys[:n], sc.keys[n:2*n]
	// The 8-byte windows first, in tmp: of the names' first bytes, in
	// one pass over the names, which serves unless the names share their
	// first 8 bytes; then after their common prefix.
	var or, and uint64 = 0, ^uint64(0)
	for i, s := range names {
		k := window(s)
		tmp[i] = k
		or |= k
		and &= k
	}
	if or == and {
		lcp := names[0]
		for _, s := range names[1:] {
			if strings.HasPrefix(s, lcp) {
				continue
			}
			i := 0
			for i < len(lcp) && i < len(s) && lcp[i] == s[i] {
				i++
			}
			if lcp = lcp[:i]; lcp == "" {
				break
			}
		}
		or, and = 0, ^uint64(0)
		for i, s := range names {
			k := window(s[len(lcp):])
			tmp[i] = k
			or |= k
			and &= k
		}
	}
	idxBits := bits.Len(uint(n - 1))
	m = 1<<idxBits - 1
	differ := or ^ and
	keyBits := 0
	if differ != 0 {
		lz, tz := bits.LeadingZeros64(differ), bits.TrailingZeros64(differ)
		keyBits = min(64-lz-tz, 64-idxBits)
		shift := 64 - lz - keyBits
		kmask := uint64(1)<<keyBits - 1
		for i, k := range tmp {
			keys[i] = (k>>shift&kmask)<<idxBits | uint64(i)
		}
	} else {
		for i := range keys {
			keys[i] = uint64(i)
		}
	}
	if keyBits > 0 {
		d := min(max(bits.Len(uint(n)), 8), 11) // bits per pass
		passes := (keyBits + d - 1) / d
		size := passes << d
		if cap(sc.hist) < size {
			sc.hist = make([]int32, size)
		}
		hist := sc.hist[:size]
		clear(hist)
		dmask := uint64(1)<<d - 1
		switch passes {
		case 1:
			for _, e := range keys {
				hist[e>>idxBits&dmask]++
			}
		case 2:
			h0, h1 := hist[:1<<d], hist[1<<d:2<<d]
			for _, e := range keys {
				v := e >> idxBits
				h0[v&dmask]++
				h1[v>>d&dmask]++
			}
		default:
			for _, e := range keys {
				v := e >> idxBits
				for p := range passes {
					hist[p<<d+int(v>>(p*d)&dmask)]++
				}
			}
		}
		for p := range passes {
			pos := hist[p<<d : (p+1)<<d]
			var sum int32
			all := false
			for b, c := range pos {
				if int(c) == n {
					all = true
					break
				}
				pos[b] = sum
				sum += c
			}
			if all {
				continue // every key has this digit
			}
			sh := idxBits + p*d
			for _, e := range keys {
				b := e >> sh & dmask
				tmp[pos[b]] = e
				pos[b]++
			}
			keys, tmp = tmp, keys
		}
	}
	// Runs whose kept bits tie, by name.
	byName := func(a, b uint64) int { return strings.Compare(names[a&m], names[b&m]) }
	prev := keys[0] >> idxBits
	for i := 1; i < n; i++ {
		k := keys[i] >> idxBits
		if k != prev {
			prev = k
			continue
		}
		j := i + 1
		for j < n && keys[j]>>idxBits == k {
			j++
		}
		slices.SortFunc(keys[i-1:j], byName)
		if j < n {
			prev = keys[j] >> idxBits
		}
		i = j
	}
	return keys, m
}

// window returns the first 8 bytes of s as a big-endian number, zero-padded
// when s is shorter.
func window(s string) uint64 {
	switch len(s) {
	case 0:
		return 0
	case 1:
		return uint64(s[0]) << 56
	case 2:
		return uint64(s[0])<<56 | uint64(s[1])<<48
	case 3:
		return uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40
	case 4:
		return uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32
	case 5:
		return uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32 |
			uint64(s[4])<<24
	case 6:
		return uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32 |
			uint64(s[4])<<24 | uint64(s[5])<<16
	case 7:
		return uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32 |
			uint64(s[4])<<24 | uint64(s[5])<<16 | uint64(s[6])<<8
	}
	return uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32 |
		uint64(s[4])<<24 | uint64(s[5])<<16 | uint64(s[6])<<8 | uint64(s[7])
}
