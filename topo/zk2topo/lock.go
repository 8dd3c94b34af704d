package zk2topo

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo/backendkit"
)

// Lock entries: an ephemeral-sequential child of <dir>/locks/ holding the
// lock's contents (Vitess's layout). Every ZooKeeper lock lives as long as
// the session it was taken on: LockWithTTL's ttl is in effect the session
// timeout (TTL znodes are not used: they outlive a lost session), and
// LockName's lock has no other limit.

// abandonWait bounds how long TryLock waits to read the holder's entry.
const abandonWait = time.Second

// enqueue creates a lock entry holding contents under locksZp (the
// "locks" znode of directory dp) on session s, creating the "locks"
// container znode (and, for a named lock, the directory) when needed.
// With mustExist (Lock, TryLock, LockWithTTL) it creates nothing when no
// file lies below dp, and returns backendkit.LockNeedsFiles' error
// (decided with one more read, on this error path only). With read, the
// queue's children are read pipelined behind the create (see pipeline;
// with watch, setting a children watch), except behind a first attempt
// on a "locks" znode the session never created an entry in, which may
// well be absent: that read would be wasted. The pipelined read is
// returned with the entry; the caller drains it.
func (c *Conn) enqueue(ctx context.Context, s *zkSession, dp, locksZp, contents string, mustExist, read, watch bool) (created, pipelined, error) {
	dirZp := zkDir(locksZp)
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		known := s.creates[locksZp] > 0
		s.mu.Unlock()
		var pl pipelined
		if read && (attempt > 0 || known) {
			pl = c.pipeline(s, dp, locksZp, watch)
		}
		cr, err := c.createEntryWith(ctx, s, dp, locksZp, true, func() (created, error) {
			n, st, err := s.createWithStat(locksZp, []byte(contents), c.acl)
			return created{node: n, st: st}, err
		})
		if pl.stop != nil {
			pl.stop()
		}
		if err == nil {
			return cr, pl, nil
		}
		pl.drain()
		if !errors.Is(err, zk.ErrNoNode) || attempt >= 10 {
			return created{}, pipelined{}, c.convert(err, dp)
		}
		// No locks znode yet.
		if mustExist {
			d := c.statOn(ctx, s, dp, dirZp, false)
			if d.err != nil {
				return created{}, pipelined{}, c.convert(d.err, dp)
			}
			if !d.exists || d.st.NumChildren == 0 {
				// Which error: one read, on this error path only.
				isFile := false
				if d.exists && dp != "" {
					_, _, gerr := c.Get(ctx, dp)
					isFile = gerr == nil
				}
				return created{}, pipelined{}, backendkit.LockNeedsFiles(dp, isFile)
			}
		}
		if err := c.makeDirs(ctx, dp, locksZp, nil); err != nil {
			return created{}, pipelined{}, err
		}
	}
}

// releaseLock deletes the lock entry node of session s (dp is the
// lock's directory, for errors), then (pipelined behind the delete, on the
// same session) reads the directory's Stat; only when that shows no data
// and at most one child (the locks znode, when the directory's files are
// gone or it is a named lock) is the locks znode's Stat read too, and the
// directory removed when nothing but an empty locks znode is left (see
// removeDir). A directory that still holds files (the common case) so
// costs the delete and one read. Nothing is read when, once the delete
// was sent, the session has another entry in the queue whose delete was
// not: the locks znode is not left empty, and the last of them reads,
// after every earlier delete of the session (it runs its requests in
// order; an abandoned entry is forgotten before its delete and its own
// clean-up are sent; one deleted behind its back is forgotten when the
// session sees it gone, which then cleans up: see forgetGone and
// cleanupGone).
func (c *Conn) releaseLock(ctx context.Context, s *zkSession, dp, node string) error {
	locksZp := zkDir(node)
	dirZp := zkDir(locksZp)
	delRes := sendFirst(s, opDelete, node, func() error { return c.do(ctx, dp, func() error { return s.zk.Delete(node, -1) }) })
	if !c.removable(dirZp) || s.deleteSent(locksZp, node) {
		return <-delRes
	}
	dr := c.statsInOrder(ctx, s, dp, dirZp)[0]
	if err := <-delRes; err != nil {
		return err
	}
	d := <-dr
	if d.err != nil || !d.exists || d.st.DataLength > 0 || d.st.EphemeralOwner != 0 || d.st.NumChildren > 1 {
		// Gone, a file, or holding more than its locks znode: kept
		// whatever the locks znode's Stat.
		return nil
	}
	var l statRes
	if d.st.NumChildren == 1 {
		l = c.statOn(ctx, s, dp, locksZp, false)
	}
	if l.err == nil {
		c.removeDir(ctx, dirZp, d, l, false)
	}
	return nil
}
