package zk2topo

import (
	"context"
	"errors"
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
	var st *zk.Stat
	err = c.read(ctx, dp, func(z *zk.Conn) error {
		var err error
		names, st, err = z.Children(zp)
		return err
	})
	if err != nil {
		return nil, c.convert(err, dp)
	}
	if !full {
		return c.nameEntries(ctx, dp, zp, st, names)
	}
	inElections := dp == electionsDir
	var entries []topo.DirEntry
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

// nameEntries is a names-only ListDir's work after the Children read of
// dp (znode zp, whose Stat in that reply is st): names (in the store's
// order) sorted, or taken sorted from the listCache when the directory's
// children did not change since it was last listed, with the
// reserved-name checks on each child's name. In a directory of files every child is shown but
// a "locks" child (shown while a lock is held, see lockedEntry) and, at
// the ZooKeeper root, "zookeeper" (ZooKeeper's own znodes); "elections"
// at the root is shown. Those two are found by a binary search of the
// sorted entries, which spares a comparison per child.
func (c *Conn) nameEntries(ctx context.Context, dp, zp string, st *zk.Stat, names []string) ([]topo.DirEntry, error) {
	if dp == electionsDir || c.internal(dp) {
		return c.internalEntries(ctx, dp, names)
	}
	var entries []topo.DirEntry
	if len(names) >= sortMin && len(names) <= 1<<31 {
		if cached := c.listCache.get(zp, st); cached != nil {
			// The directory's children are those of the last listing
			// (see listCache).
			entries = slices.Clone(cached)
		} else {
			// A large directory's names are taken in sorted order
			// straight from the radix sort's order, without sorting
			// the names first.
			entries = make([]topo.DirEntry, len(names))
			sc := getScratch(&c.sortPool)
			order, m := sc.sortedOrder(names)
			for i, k := range order {
				entries[i].Name = names[k&m]
			}
			c.sortPool.Put(sc)
			c.listCache.put(zp, st, slices.Clone(entries))
		}
	} else {
		entries = make([]topo.DirEntry, len(names))
		slices.Sort(names)
		for i, n := range names {
			entries[i].Name = n
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
	if len(entries) == 0 {
		return nil, topo.NewError(topo.NoNode, dp)
	}
	return entries, nil
}

// findEntry returns the index of the entry named name in entries (sorted
// by name, each name once) and whether it is there.
func findEntry(entries []topo.DirEntry, name string) (int, bool) {
	return slices.BinarySearchFunc(entries, name, func(e topo.DirEntry, n string) int { return strings.Compare(e.Name, n) })
}

// lockedEntry reads dp's child n, a "locks" directory or (when dp is
// "elections") an election's directory, and reports whether a names-only
// listing shows it: while it has children (a lock entry), and for an
// election while a candidate runs in it (see electionBusy).
func (c *Conn) lockedEntry(ctx context.Context, dp, n string) (bool, error) {
	var st *zk.Stat
	var exists bool
	cp := backendkit.JoinPath(dp, n)
	err := c.read(ctx, dp, func(z *zk.Conn) error {
		var err error
		exists, st, err = z.Exists(c.zkPath(cp))
		return err
	})
	if err != nil {
		return false, c.convert(err, dp)
	}
	if !exists || st.NumChildren == 0 {
		return false, nil
	}
	if dp != electionsDir {
		return true, nil
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
		sortNames(names, &c.sortPool)
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
	if len(entries) == 0 {
		return nil, topo.NewError(topo.NoNode, dp)
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
	var children []string
	err := c.read(ctx, dp, func(z *zk.Conn) error {
		var err error
		children, _, err = z.Children(c.zkPath(cp))
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, c.convert(err, dp)
	}
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
		var exists bool
		var sst *zk.Stat
		err := c.read(ctx, dp, func(z *zk.Conn) error {
			var err error
			exists, sst, err = z.Exists(c.zkPath(sub))
			return err
		})
		if err != nil {
			return false, c.convert(err, dp)
		}
		if !exists {
			continue
		}
		busy, err := c.electionBusy(ctx, dp, sub, sst)
		if err != nil || busy {
			return busy, err
		}
	}
	return false, nil
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
// (the low halves of its bytes only, when only those differ; the highest
// differing bits, when they do not all fit), in as few
// passes of at most 8 to 11 bits (by the number of names) as the kept
// bits need, the bits shared out evenly, their histograms counted as the
// keys are built; a pass where all keys agree is skipped. Then the runs of names whose kept bits tie are
// sorted by name, unless no two names can tie: when every differing bit
// was kept and every name (after the common prefix) is at most 8 bytes
// long and does not end with a zero byte, distinct names have distinct
// windows.
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
	maxLen, zeroEnd := 0, false
	for i, s := range names {
		k := window(s)
		tmp[i] = k
		or |= k
		and &= k
		maxLen = max(maxLen, len(s))
		zeroEnd = zeroEnd || (s != "" && s[len(s)-1] == 0)
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
		maxLen -= len(lcp)
	}
	idxBits := bits.Len(uint(n - 1))
	m = 1<<idxBits - 1
	// The kept bits: those from the highest to the lowest that differ
	// between names, the lowest dropped when they do not all fit beside
	// the index. When only the low 4 bits of bytes differ (digits, and
	// letters within one 16-letter range), the window's low halves of
	// bytes are packed first (packNibbles), which drops the alike high
	// halves between them.
	differ := or ^ and
	nib := differ&^lowNibbles == 0
	if nib {
		differ = packNibbles(differ)
	}
	keyBits, shift, truncated := 0, 0, false
	if differ != 0 {
		lz, tz := bits.LeadingZeros64(differ), bits.TrailingZeros64(differ)
		keyBits = min(64-lz-tz, 64-idxBits)
		truncated = keyBits < 64-lz-tz
		shift = 64 - lz - keyBits
	}
	passes, d := 0, 0
	if keyBits > 0 {
		dmax := min(max(bits.Len(uint(n)), 8), 11)
		passes = (keyBits + dmax - 1) / dmax
		d = (keyBits + passes - 1) / passes
	}
	size := passes << d
	if cap(sc.hist) < size {
		sc.hist = make([]int32, size)
	}
	hist := sc.hist[:size]
	clear(hist)
	dmask := uint64(1)<<d - 1
	kmask := uint64(1)<<keyBits - 1
	// The keys, with the histograms of their digits counted on the way.
	switch passes {
	case 0:
		for i := range keys {
			keys[i] = uint64(i)
		}
	case 1:
		for i, k := range tmp {
			if nib {
				k = packNibbles(k)
			}
			v := k >> shift & kmask
			keys[i] = v<<idxBits | uint64(i)
			hist[v]++
		}
	case 2:
		h0, h1 := hist[:1<<d], hist[1<<d:2<<d]
		for i, k := range tmp {
			if nib {
				k = packNibbles(k)
			}
			v := k >> shift & kmask
			keys[i] = v<<idxBits | uint64(i)
			h0[v&dmask]++
			h1[v>>d&dmask]++
		}
	default:
		for i, k := range tmp {
			if nib {
				k = packNibbles(k)
			}
			v := k >> shift & kmask
			keys[i] = v<<idxBits | uint64(i)
			for p := range passes {
				hist[p<<d+int(v>>(p*d)&dmask)]++
			}
		}
	}
	for p := range passes {
		pos := hist[p<<d : (p+1)<<d]
		sh := idxBits + p*d
		if int(pos[keys[0]>>sh&dmask]) == n {
			continue // every key has this digit
		}
		var sum int32
		for b, c := range pos {
			pos[b] = sum
			sum += c
		}
		for _, e := range keys {
			b := e >> sh & dmask
			tmp[pos[b]] = e
			pos[b]++
		}
		keys, tmp = tmp, keys
	}
	if !truncated && maxLen <= 8 && !zeroEnd {
		return keys, m // distinct names have distinct keys
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

// lowNibbles has the low 4 bits of each byte set.
const lowNibbles = 0x0F0F0F0F0F0F0F0F

// packNibbles returns the low 4 bits of each byte of x, in their order,
// as one 32-bit number.
func packNibbles(x uint64) uint64 {
	x &= lowNibbles
	x = (x | x>>4) & 0x00FF00FF00FF00FF
	x = (x | x>>8) & 0x0000FFFF0000FFFF
	return (x | x>>16) & 0xFFFFFFFF
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
