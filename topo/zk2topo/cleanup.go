package zk2topo

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"
)

// Delete, Unlock (and an abandoned or gone lock entry's removal) and Txn's
// deletes remove the directories they emptied, then their parents, best
// effort, at the versions just read (the package doc, "Which znodes the
// library deletes"). Never the root.

// statRes is the answer to an exists request (or, from kindOn, a
// children request).
type statRes struct {
	exists bool
	st     *zk.Stat
	ch     <-chan zk.Event // its watch, when it set one
	err    error
	child  string // from kindOn: a child's name, "" when none
}

// statOn reads zp's Stat on session s (see answerOn), with watch setting
// an exists watch.
func (c *Conn) statOn(ctx context.Context, s *zkSession, p, zp string, watch bool) statRes {
	r, err := answerOn(ctx, c, s, p, func(z *zk.Conn) (r statRes, err error) {
		if watch {
			r.exists, r.st, r.ch, err = z.ExistsW(zp)
		} else {
			r.exists, r.st, err = z.Exists(zp)
		}
		return r, err
	})
	if err != nil {
		return statRes{err: err}
	}
	return r
}

// statsInOrder sends the Stat reads of zps on session s, each once the
// one before it is being written (sendFirst): run in that order, in one
// round trip.
func (c *Conn) statsInOrder(ctx context.Context, s *zkSession, p string, zps ...string) []<-chan statRes {
	outs := make([]<-chan statRes, len(zps))
	for i, zp := range zps {
		outs[i] = sendFirst(s, opExists, zp, func() statRes { return c.statOn(ctx, s, p, zp, false) })
	}
	return outs
}

// sendFirst runs req (one request of opcode op on zp on session s) in the
// background and returns once its frame is being written (see expect) or
// req returned, so that the server runs requests sent on s after it
// after it. The channel yields req's result.
func sendFirst[T any](s *zkSession, op int32, zp string, req func() T) <-chan T {
	sent, unregister := s.obs.expect(op, zp)
	defer unregister()
	out, done := make(chan T, 1), make(chan struct{})
	go func() {
		out <- req()
		close(done)
	}()
	select {
	case <-sent:
	case <-done:
	}
	return out
}

// emptiedReads are the Stat reads of dir's "locks" child and of dir, sent
// behind a write on its session that may leave dir empty (statsInOrder):
// of two writes emptying dir at once, the later one's reads see it empty.
type emptiedReads struct {
	dir   string
	stats []<-chan statRes // nil when dir is the root or above
}

// readBehind sends the emptiedReads of dir on s, once the write's frame is
// being written (sendFirst).
func (c *Conn) readBehind(ctx context.Context, s *zkSession, p, dir string) emptiedReads {
	if !c.removable(dir) {
		return emptiedReads{dir: dir}
	}
	return emptiedReads{dir, c.statsInOrder(ctx, s, p, dir+"/"+locksDir, dir)}
}

// removeIfEmpty waits for e's reads and, unless skip, removes e.dir when
// they show it empty (removeDir; best effort).
func (c *Conn) removeIfEmpty(ctx context.Context, e emptiedReads, skip bool) {
	if e.stats == nil {
		return
	}
	if lr, dr := <-e.stats[0], <-e.stats[1]; lr.err == nil && !skip {
		c.removeDir(ctx, e.dir, dr, lr, true)
	}
}

// dirDeletes returns the deletes that remove the directory dir given its
// Stat d and its "locks" znode's Stat l, nil when it is not empty. With
// locksFirst, l was read before d on one session, so one child with no
// locks znode is another child; otherwise that child may be a locks
// container reaped between the reads: reread says to read dir again.
func dirDeletes(dir string, d, l statRes, locksFirst bool) (reqs []any, reread bool) {
	if d.err != nil || !d.exists || d.st.DataLength > 0 || d.st.EphemeralOwner != 0 {
		return nil, false
	}
	switch {
	case d.st.NumChildren == 0:
		return []any{&zk.DeleteRequest{Path: dir, Version: d.st.Version}}, false
	case d.st.NumChildren != 1 || l.err != nil:
		return nil, false
	case l.exists && l.st.NumChildren == 0:
		return []any{
			&zk.DeleteRequest{Path: dir + "/" + locksDir, Version: l.st.Version},
			&zk.DeleteRequest{Path: dir, Version: d.st.Version}}, false
	}
	return nil, !l.exists && !locksFirst
}

// removeDir removes dir when d and l (see dirDeletes) show it empty, with
// the ancestors that empties (withEmptied), then the parents above
// (cleanupDirs). When the multi fails or the reads cannot tell,
// cleanupDirs reads dir again.
func (c *Conn) removeDir(ctx context.Context, dir string, d, l statRes, locksFirst bool) {
	if !c.removable(dir) {
		return
	}
	reqs, reread := dirDeletes(dir, d, l, locksFirst)
	if reqs == nil {
		if reread {
			c.cleanupDirs(ctx, cleanupAttempts, dir)
		}
		return
	}
	s, err := c.live(ctx, c.relPath(dir))
	if err != nil {
		return
	}
	reqs, top, err := c.withEmptied(ctx, s, c.relPath(dir), dir, reqs)
	if err != nil {
		return
	}
	err = c.write(ctx, c.relPath(dir), func(z *zk.Conn) error {
		_, err := z.Multi(reqs...)
		return err
	})
	if err != nil {
		c.cleanupDirs(ctx, cleanupAttempts, dir)
		return
	}
	c.cleanupDirs(ctx, cleanupAttempts, zkDir(top))
}

// withEmptied extends reqs, the deletes removing dir, with those of the
// ancestors that removing dir empties, so that none is left empty (an
// empty file) between two multis. It reads their Stats on session s (one
// round trip) and adds, nearest first, each holding one child and no
// data, at the version read. top is the highest directory removed; the
// error is a read's.
func (c *Conn) withEmptied(ctx context.Context, s *zkSession, p, dir string, reqs []any) (_ []any, top string, err error) {
	top = dir
	var chain []string
	for d := zkDir(dir); c.removable(d); d = zkDir(d) {
		chain = append(chain, d)
	}
	stats := c.statsInOrder(ctx, s, p, chain...)
	for i, d := range chain {
		r := <-stats[i]
		if r.err != nil {
			return nil, "", r.err
		}
		if !onlyChild(r) {
			break
		}
		reqs = append(reqs, &zk.DeleteRequest{Path: d, Version: r.st.Version})
		top = d
	}
	return reqs, top, nil
}

// onlyChild reports whether the Stat read shows a directory holding one
// child and no data (not an entry): one that its child's removal empties.
func onlyChild(r statRes) bool {
	return r.err == nil && r.exists && r.st.NumChildren == 1 && r.st.DataLength == 0 && r.st.EphemeralOwner == 0
}

// removable reports whether the directory znode dir is below the root.
func (c *Conn) removable(dir string) bool {
	return dir != c.zkPath("") && dir != "/" && strings.HasPrefix(dir, c.root+"/")
}

// cleanupAttempts bounds how many times cleanupDirs reads a directory
// whose removal failed again.
const cleanupAttempts = 3

// cleanupDirs removes the directories dirs while empty, then their
// parents, a level at a time for all (docs/layout-zookeeper.md,
// "Directories left empty"); when a level's multi fails, each directory
// is cleaned up alone, attempts times at most in all (callers pass
// cleanupAttempts).
func (c *Conn) cleanupDirs(ctx context.Context, attempts int, dirs ...string) {
	level := map[string]bool{}
	for _, d := range dirs {
		if c.removable(d) {
			level[d] = true
		}
	}
	for len(level) > 0 {
		// A directory above another of the level waits for a later level.
		above := map[string]bool{}
		for e := range level {
			for d := zkDir(e); c.removable(d) && !above[d]; d = zkDir(d) {
				above[d] = true
			}
		}
		var ds []string
		for d := range level {
			if !above[d] {
				ds = append(ds, d)
			}
		}
		slices.Sort(ds)
		// Their ancestors are read too: those the multi empties go in it.
		ancSet := map[string]bool{}
		for _, d := range ds {
			for a := zkDir(d); c.removable(a) && !level[a] && !ancSet[a]; a = zkDir(a) {
				ancSet[a] = true
			}
		}
		anc := slices.Collect(maps.Keys(ancSet))
		// Deepest first: a directory's children before it.
		slices.SortFunc(anc, func(a, b string) int {
			if n := strings.Count(b, "/") - strings.Count(a, "/"); n != 0 {
				return n
			}
			return strings.Compare(a, b)
		})
		ls, dstats := make([]statRes, len(ds)), make([]statRes, len(ds))
		astats := make([]statRes, len(anc))
		var wg sync.WaitGroup
		for k, a := range anc {
			wg.Go(func() { astats[k] = c.statOn(ctx, nil, c.relPath(a), a, false) })
		}
		for k, d := range ds {
			wg.Go(func() {
				s, err := c.live(ctx, c.relPath(d))
				if err != nil {
					dstats[k] = statRes{err: err}
					return
				}
				dstats[k] = c.statOn(ctx, s, c.relPath(d), d, false)
				// A directory with one child: is it an empty "locks" znode?
				if onlyChild(dstats[k]) {
					rs := c.statsInOrder(ctx, s, c.relPath(d), d+"/"+locksDir, d)
					ls[k], dstats[k] = <-rs[0], <-rs[1]
				}
			})
		}
		wg.Wait()
		var reqs []any
		var removed []string
		gone := map[string]bool{} // the directories the multi removes
		for k, d := range ds {
			if r, _ := dirDeletes(d, dstats[k], ls[k], true); r != nil {
				reqs = append(reqs, r...)
				removed = append(removed, d)
				gone[d] = true
			}
		}
		for k, a := range anc {
			r := astats[k]
			if r.err != nil || !r.exists || r.st.DataLength > 0 || r.st.EphemeralOwner != 0 {
				continue
			}
			n := int32(0)
			for g := range gone {
				if zkDir(g) == a {
					n++
				}
			}
			if n > 0 && n == r.st.NumChildren {
				reqs = append(reqs, &zk.DeleteRequest{Path: a, Version: r.st.Version})
				gone[a] = true
			}
		}
		if len(reqs) == 0 {
			return
		}
		err := c.write(ctx, "", func(z *zk.Conn) error {
			_, err := z.Multi(reqs...)
			return err
		})
		if err != nil {
			if attempts > 1 {
				for _, d := range removed {
					wg.Go(func() { c.cleanupDirs(ctx, attempts-1, d) })
				}
				wg.Wait()
			}
			return
		}
		next := map[string]bool{}
		for d := range level {
			if above[d] {
				next[d] = true // waited for its descendants
			}
		}
		for d := range gone {
			if p := zkDir(d); c.removable(p) && !gone[p] {
				next[p] = true
			}
		}
		level = next
	}
}
