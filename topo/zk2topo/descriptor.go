package zk2topo

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
)

// lockDesc is a lock entry held (or being waited for) through a Conn, on
// the session that created it.
type lockDesc struct {
	c    *Conn
	dir  string // canonical directory path
	node string // the entry's znode path
	sess *zkSession

	// token is the entry's creation zxid (Stat.Czxid), set once the lock
	// is held (see Token).
	token int64
	// gen is the entry's generation on its session (see entryGen).
	gen uint64
	// ended is cancelled by endClaim, and with its session's lostCtx:
	// within lose itself, so that Done is closed the moment the session
	// is declared lost (see Done). Set by hold, once the lock is held.
	ended    context.Context
	endClaim context.CancelFunc

	mu       sync.Mutex
	released bool
}

// abandon removes the entry of a lock that is not taken, with a fresh
// context, on its own session, so that it never blocks later lockers. It
// waits for the delete (one round trip) for at most abandonWait, so that a
// caller whose context ended is not held up long by a hung server; the
// delete then completes in the background.
func (l *lockDesc) abandon() {
	c := l.c
	if c.closed.Load() || l.sess.isLost() {
		return
	}
	done := make(chan struct{})
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		defer close(done)
		c.deleteLockEntry(l.sess, l.node)
	}()
	select {
	case <-done:
	case <-time.After(abandonWait):
	}
}

// abandonWait bounds how long a Lock whose context ended waits for the
// deletion of its entry.
const abandonWait = time.Second

// Check returns nil only while the holder can prove it still holds the
// lock: its session is connected, the latest answer from the server came
// within the safe window (session timeout minus Options.SafetyMargin, see
// there), and a consistent read (a sync, then an exists, on the lock's
// session) shows the entry owned by that session. It returns Closed after
// the Conn's Close (whatever happened to the lock before); Interrupted
// after Unlock; LockLost when the session ended (expired or given up) or the entry is gone or owned by another session;
// Unavailable while the session is disconnected but may still live;
// Timeout or Interrupted when ctx ends first.
func (l *lockDesc) Check(ctx context.Context) error {
	if err := l.c.closedCheck(ctx, l.dir); err != nil {
		return err
	}
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if released {
		return topo.NewError(topo.Interrupted, l.dir)
	}
	return l.c.checkEntry(ctx, l.sess, l.dir, l.node)
}

// errNotConnected is the cause of Check's Unavailable while the claim's
// session is not provably alive.
var errNotConnected = errors.New("zk2topo: the session of the lock or term is not connected")

// Unlock deletes the lock entry (one round trip), on the session that
// created it and only there: when that session is over, nothing is sent
// and Unlock returns LockLost (the server deleted the entry with the
// session, and a znode of the same name now belongs to someone else). A
// second Unlock returns Interrupted; after the Conn's Close (which ended
// the session, releasing the lock) every Unlock returns Closed; LockLost also when the entry was
// already gone, and, without anything sent, when Done had closed (the
// watch saw the entry deleted) or the session has since created an entry
// of the same name. When the directory holds nothing else afterwards (its files
// were deleted while it was locked, or it is a named lock), it is removed
// with the parents left empty. Done is closed first, whatever the outcome.
func (l *lockDesc) Unlock(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		if c := l.c; c.closed.Load() {
			return topo.NewError(topo.Closed, l.dir)
		}
		return topo.NewError(topo.Interrupted, l.dir)
	}
	l.released = true
	l.mu.Unlock()
	// Done closed before Unlock: the session ended or the watch saw the
	// entry deleted behind the holder's back. Then nothing is sent: a
	// znode of the entry's name may by now be another holder's.
	ended := l.ended.Err() != nil
	l.endClaim()
	c, s := l.c, l.sess
	if c.closed.Load() {
		return topo.NewError(topo.Closed, l.dir)
	}
	if s.isLost() {
		return topo.NewError(topo.LockLost, l.dir)
	}
	if ended || !s.owns(l.node) || s.entryGen(l.node) != l.gen {
		return topo.NewError(topo.LockLost, l.dir)
	}
	err := l.release(ctx)
	switch {
	case err == nil:
		s.forget(l.node)
		c.noteReleased(l.node)
		return nil
	case s.isLost():
		return topo.NewError(topo.LockLost, l.dir)
	case errors.Is(err, zk.ErrNoNode):
		s.forget(l.node)
		return topo.NewError(topo.LockLost, l.dir)
	case topo.CodeOf(err) == topo.Timeout || topo.CodeOf(err) == topo.Interrupted:
		l.abandon() // ctx ended: still remove the entry
	}
	return c.convert(err, l.dir)
}

// release deletes the entry, then (pipelined behind the delete, on the same
// session) reads the directory's Stat; only when that shows no data and at
// most one child (the locks znode, when the directory's files are gone or
// it is a named lock) is the locks znode's Stat read too, and the
// directory removed when nothing but an empty locks znode is left. A
// directory that still holds files (the common case) so costs the delete
// and one read. When the delete's answer is seen before its send (both
// ready at once), the Stat is read after it instead.
func (l *lockDesc) release(ctx context.Context) error {
	c, s := l.c, l.sess
	locksZp := zkDir(l.node)
	dirZp := zkDir(locksZp)
	sent, unregister := s.obs.expect(opDelete, l.node)
	defer unregister()
	delRes := make(chan error, 1)
	go func() { delRes <- c.do(ctx, l.dir, func() error { return s.zk.Delete(l.node, -1) }) }()
	select {
	case <-sent:
	case err := <-delRes:
		if err != nil {
			return err
		}
		delRes <- nil // answered already: the waits below get it again
	}
	type statRes struct {
		exists bool
		st     *zk.Stat
		err    error
	}
	stat := func(zp string) chan statRes {
		out := make(chan statRes, 1)
		go func() {
			res := make(chan statRes, 1) // written by fn even after do gave up
			err := c.do(ctx, l.dir, func() error {
				exists, st, err := s.zk.Exists(zp)
				res <- statRes{exists, st, err}
				return err
			})
			if err != nil {
				out <- statRes{err: err}
				return
			}
			out <- <-res
		}()
		return out
	}
	if dirZp == c.zkPath("") || dirZp == "/" {
		return <-delRes
	}
	dr := stat(dirZp)
	if err := <-delRes; err != nil {
		return err
	}
	d := <-dr
	if d.err != nil || !d.exists || d.st.DataLength > 0 || d.st.EphemeralOwner != 0 || d.st.NumChildren > 1 {
		// Gone, a file, or holding more than its locks znode:
		// removeIfEmpty would leave it whatever the locks znode's Stat.
		return nil
	}
	k := <-stat(locksZp)
	if k.err == nil && c.removeIfEmpty(ctx, dirZp, d.exists, d.st, k.exists, k.st) {
		c.cleanupDir(ctx, zkDir(dirZp))
	}
	return nil
}
