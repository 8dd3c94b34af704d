package zk2topo

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo/backendkit"
)

// Every ZooKeeper lock lives as long as its session: LockWithTTL's ttl is
// in effect the session timeout (TTL znodes would outlive a lost session),
// and LockName's lock has no other limit.

// abandonWait bounds how long TryLock waits to read the holder's entry.
const abandonWait = time.Second

// enqueue creates a lock entry holding contents under locksZp (directory
// dp's "locks") on s, creating it (and a named lock's directory) when
// needed. With mustExist it creates nothing when no file lies below dp
// (backendkit.LockNeedsFiles; one more read, on that error path only).
// With read, the queue's children are read pipelined behind the create
// (with watch, a children watch; the caller drains it), except on a first
// attempt in a "locks" znode the session never used (maybe absent).
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
				isFile := false
				// An empty znode whose children were all deleted (its
				// child version moved) is a directory being removed
				// after its last file went, not an empty file: an empty
				// file cannot have had children.
				if d.exists && dp != "" && (d.st.DataLength > 0 || d.st.Cversion == 0) {
					_, _, gerr := c.Get(ctx, dp)
					isFile = gerr == nil
				}
				return created{}, pipelined{}, backendkit.LockNeedsFiles(dp, isFile)
			}
		}
		if err := c.makeLocks(ctx, dp, locksZp); err != nil {
			return created{}, pipelined{}, err
		}
	}
}

// makeLocks creates the "locks" znode locksZp: a container when its
// directory exists. When the directory is missing too (LockName on a new
// path), one multi creates it, its missing ancestors and locksZp (made one
// at a time, each new directory would read as an empty file until its
// child came: TestLockNameNewDirectoryNeverAFile); locksZp is then
// persistent (a multi cannot create a container; Vitess's are persistent
// too) and goes at Unlock's clean-up.
func (c *Conn) makeLocks(ctx context.Context, dp, locksZp string) error {
	err := c.createWithParents(ctx, dp, locksZp, nil, func(z *zk.Conn) error {
		_, err := z.CreateContainer(locksZp, nil, zk.FlagContainer, c.acl)
		return err
	})
	if err == nil || errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return c.convert(err, dp)
}

// releaseLock deletes s's lock entry node and, pipelined behind it, reads
// the directory's Stat; only when that shows no data and no child but the
// locks znode is that znode's Stat read too, and the directory removed
// when nothing else is left (removeDir). Nothing is read when s has
// another entry in the queue whose delete was not sent: the last of them
// reads, after every earlier delete of s (an entry deleted behind its back
// cleans up when s sees it gone: forgetGone).
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
