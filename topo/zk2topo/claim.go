package zk2topo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Lock takes the lock on dirPath: it creates an ephemeral-sequential znode
// holding contents under <root>/dirPath/locks/ (creating that "locks"
// container znode when absent; the server removes it once its last entry
// is gone), and waits until its znode has the lowest sequence, watching
// only its predecessor. It reads the new entry's Stat with an exists that
// sets the watch behind Done (its Czxid is the fencing token, see Token):
// pipelined behind the create, with the children read, when the Conn
// predicts the entry's name (it released the previous entry there), so
// that an uncontended Lock waits one round trip; otherwise sent when the
// create returns (one more round trip unless the claim waits for a
// predecessor anyway). It returns NoNode when dirPath has no files
// (InvalidArgument when it is a file with no children; see
// backendkit.LockNeedsFiles, decided with one more read on that path),
// Timeout or Interrupted when ctx ends first (the waiting znode is then
// removed with a fresh context), LockLost when the session it waits on
// ends (the server then deleted its znode), PermissionDenied when the
// ACLs refuse it, and InvalidPath (including the reserved-name rule,
// backendkit.CheckLockPath), InvalidArgument, Closed or Unavailable. The lock
// lives as long as the session it was taken on (see Options.SafetyMargin).
func (c *Conn) Lock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lock(ctx, dirPath, contents, true, false)
}

// LockWithTTL is Lock with a time to live. ttl must be positive
// (InvalidArgument). The ZooKeeper backend rounds every ttl to the session
// timeout (Options.SessionTimeout, as clamped by the server): the lock
// entry is an ephemeral znode that the server removes when the holder's
// session expires, i.e. one session timeout after the holder stops talking
// to ZooKeeper. TTL znodes (extendedTypesEnabled) are not used: they are not
// tied to a session, so a holder that lost its session would keep the lock.
func (c *Conn) LockWithTTL(ctx context.Context, dirPath, contents string, ttl time.Duration) (topo.LockDescriptor, error) {
	if ttl <= 0 {
		// backendkit's order: the context, the directory, the value, then
		// the ttl, all before Closed.
		if err := backendkit.CheckContext(ctx, dirPath); err != nil {
			return nil, err
		}
		_, err := backendkit.CheckLockWithTTL(dirPath, contents, ttl)
		return nil, err
	}
	return c.lock(ctx, dirPath, contents, true, false)
}

// LockName takes the named lock dirPath, which need not exist (the
// directory znodes are created; they disappear from listings once the lock
// is released). Like every ZooKeeper lock it lives as long as the session,
// with no other time limit. Errors as for Lock, except NoNode and the
// InvalidArgument of a file.
func (c *Conn) LockName(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lock(ctx, dirPath, contents, false, false)
}

// TryLock is Lock that returns NodeExists at once (after removing its own
// entry) when another entry, holder or waiter, is ahead of it. That error
// names the holder (the lowest entry) with a *topo.LockHeldError
// (backendkit.LockHeld): Holder is the entry's data, the contents the
// holder locked with (topokit's or Vitess's), Session its ephemeral
// owner's session id as "0x" and hex digits. The entry is read on the
// claim's session while its own entry is deleted, so this adds no round
// trip of waiting; when it cannot be read (the holder left meanwhile) the
// error is a plain NodeExists.
func (c *Conn) TryLock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lock(ctx, dirPath, contents, true, true)
}

// lock claims the lock: it enters the queue on the current session and
// waits for its turn on that session only. Every request of one claim runs
// on the session its entry was created on; when that session ends before
// the entry was created, the claim starts again on a new session (nothing
// of it can survive on the old one), and after, it fails with LockLost.
// The arguments are checked in backendkit's order: ctx, the path, the
// reserved-name rule, the value, whether c is closed (LockWithTTL checks
// its ttl before calling it).
func (c *Conn) lock(ctx context.Context, dirPath, contents string, mustExist, try bool) (topo.LockDescriptor, error) {
	if err := backendkit.CheckContext(ctx, dirPath); err != nil {
		return nil, err
	}
	dp, err := backendkit.CheckLockPath(dirPath)
	if err != nil {
		return nil, err
	}
	if err := backendkit.CheckValue(dp, []byte(contents)); err != nil {
		return nil, err
	}
	if err := c.begin(ctx, dp); err != nil {
		return nil, err
	}
	if c.internal(dp) {
		return nil, backendkit.Wrap(topo.InvalidPath, dp, errors.New("zk2topo: ZooKeeper's own znodes cannot be locked"))
	}
	dirZp := c.zkPath(dp)
	locksZp := dirZp + "/" + locksDir
	if dirZp == "/" {
		locksZp = "/" + locksDir
	}
	for session := 0; ; session++ {
		s, err := c.live(ctx, dp)
		if err != nil {
			return nil, err
		}
		// The creates the session started under locksZp, and whether any
		// is in flight, before the prefetches are registered: a predicted
		// read is used only when our create was the one create of the
		// session under locksZp from then on (so the frame it was sent
		// behind is ours).
		started, inFlight := s.createState(locksZp)
		pre, stop := c.prefetchChildren(ctx, s, dp, locksZp)
		predicted, hinted := c.takeSeqHint(locksZp)
		var tokPre <-chan entryStat
		stopTok := func() {}
		if hinted {
			tokPre, stopTok = c.prefetchEntry(ctx, s, dp, locksZp, predicted)
		}
		node, first, err := c.enqueue(ctx, s, dp, dirZp, locksZp, contents, mustExist)
		stop()
		stopTok()
		if err != nil {
			if s.isLost() && topo.CodeOf(err) != topo.Timeout && topo.CodeOf(err) != topo.Interrupted && session < 3 {
				continue // nothing was created on the ended session that outlives it
			}
			return nil, err
		}
		l := &lockDesc{c: c, dir: dp, node: node, sess: s, gen: s.entryGen(node)}
		// The entry's Stat (its Czxid is the token) with the watch behind
		// Done. When the entry got the predicted name, the exists
		// pipelined behind the create read it (an exists of that name sent
		// after our create, on our session, showing a znode our session
		// owns, shows our entry). Otherwise it is read while the claim
		// waits: one round trip of waiting when the lock is free at once.
		var got entryStat
		if now, _ := s.createState(locksZp); tokPre != nil && first && node == predicted && inFlight == 0 && now == started+1 {
			if r, ok := <-tokPre; ok && r.owned(s) {
				got = r
			}
		}
		var stat <-chan entryStat
		if got.st == nil {
			stat = c.statEntry(ctx, s, dp, node)
		}
		if err := l.wait(ctx, try, pre); err != nil {
			return nil, err
		}
		if stat == nil {
			l.token = got.st.Czxid
			l.hold()
			c.watchEntry(s, dp, node, got.ch, l.ended.Done(), l.endClaim)
			return l, nil
		}
		r := <-stat
		switch {
		case r.err == errSessionOver || s.isLost():
			return nil, backendkit.Wrap(topo.LockLost, dp, errLostWhileWaiting)
		case r.err != nil:
			l.abandon()
			return nil, c.convert(r.err, dp)
		case !r.owned(s):
			// Deleted behind our back (or not ours): not held.
			s.forget(node)
			return nil, backendkit.Wrap(topo.LockLost, dp, errLostWhileWaiting)
		}
		l.token = r.st.Czxid
		l.hold()
		c.watchEntry(s, dp, node, r.ch, l.ended.Done(), l.endClaim)
		return l, nil
	}
}

// errLostWhileWaiting is the cause of the LockLost of a claim whose
// session ended (or whose entry vanished) before the lock was held.
var errLostWhileWaiting = errors.New("zk2topo: the session ended, or the entry vanished, while waiting for the lock")

// childrenRes is the answer to a children read.
type childrenRes struct {
	children []string
	err      error
}

// prefetchChildren pipelines the first children read of the locks znode
// behind the claim's first create: once the create's frame is written on
// session s, the read is sent on s, so the server runs it after the create
// and its answer includes the new entry, without a second round trip of
// waiting. stop abandons it when the create's frame was never written. The
// channel yields nothing when the read was not sent.
func (c *Conn) prefetchChildren(ctx context.Context, s *zkSession, dp, locksZp string) (<-chan childrenRes, func()) {
	sent, unregister := s.obs.expect(opCreate, locksZp+"/")
	out := make(chan childrenRes, 1)
	quit := make(chan struct{})
	go func() {
		defer close(out)
		select {
		case <-sent:
		case <-quit:
			return
		}
		res := make(chan childrenRes, 1) // written by fn even after do gave up
		err := c.do(ctx, dp, func() error {
			children, _, err := s.zk.Children(locksZp)
			res <- childrenRes{children, err}
			return err
		})
		if err != nil {
			out <- childrenRes{err: err}
			return
		}
		out <- <-res
	}()
	var once sync.Once
	return out, func() {
		once.Do(func() {
			unregister()
			close(quit)
		})
	}
}

// enqueue creates the claim's entry on session s, creating the "locks"
// znode (and, for a named lock, the directory) when needed.
// It reports whether the first create made the entry (no retry).
func (c *Conn) enqueue(ctx context.Context, s *zkSession, dp, dirZp, locksZp, contents string, mustExist bool) (string, bool, error) {
	for attempt := 0; ; attempt++ {
		n, err := c.createEntry(ctx, s, dp, locksZp, []byte(contents))
		if err == nil {
			return n, attempt == 0, nil
		}
		if !errors.Is(err, zk.ErrNoNode) || attempt >= 10 {
			return "", false, c.convert(err, dp)
		}
		// No locks znode yet.
		if mustExist {
			var exists bool
			var st *zk.Stat
			err := c.onSession(ctx, s, dp, func(z *zk.Conn) error {
				var err error
				exists, st, err = z.Exists(dirZp)
				return err
			})
			if err != nil {
				return "", false, c.convert(err, dp)
			}
			if !exists || st.NumChildren == 0 {
				// Which error: one read, on this error path only.
				isFile := false
				if exists && dp != "" {
					_, _, gerr := c.Get(ctx, dp)
					isFile = gerr == nil
				}
				return "", false, backendkit.LockNeedsFiles(dp, isFile)
			}
		}
		if err := c.makeDirs(ctx, dp, locksZp); err != nil {
			return "", false, err
		}
	}
}

// wait blocks until the entry is the lowest in its queue. On failure the
// entry is removed (or gone with its session).
func (l *lockDesc) wait(ctx context.Context, try bool, pre <-chan childrenRes) error {
	c, s, dp := l.c, l.sess, l.dir
	locksZp := zkDir(l.node)
	name := l.node[len(locksZp)+1:]
	lost := func() error {
		return backendkit.Wrap(topo.LockLost, dp, errLostWhileWaiting)
	}
	for {
		var children []string
		var err error
		fresh := true
		if pre != nil {
			// Read after the first create's frame, on our session: valid
			// when it shows our entry (a retried create came later).
			if r, ok := <-pre; ok && r.err == nil && slices.Contains(r.children, name) {
				children, fresh = r.children, false
			}
			pre = nil
		}
		if fresh {
			err = c.onSession(ctx, s, dp, func(z *zk.Conn) error {
				var err error
				children, _, err = z.Children(locksZp)
				return err
			})
		}
		if err == errSessionOver {
			return lost()
		}
		if err != nil {
			l.abandon()
			return c.convert(err, dp)
		}
		children = entryNames(children)
		idx := -1
		for i, n := range children {
			if n == name {
				idx = i
				break
			}
		}
		if idx < 0 {
			// Our entry vanished: deleted by another client, or the session
			// ended.
			s.forget(l.node)
			return lost()
		}
		if idx == 0 {
			return nil
		}
		if try {
			// The holder's entry is read while our entry is deleted, both
			// in flight at once on our session: naming the holder costs
			// no round trip of waiting.
			holder := c.readHolder(ctx, s, dp, locksZp+"/"+children[0])
			l.abandon()
			return <-holder
		}
		pred := locksZp + "/" + children[idx-1]
		var exists bool
		var ch <-chan zk.Event
		err = c.onSession(ctx, s, dp, func(z *zk.Conn) error {
			var err error
			exists, _, ch, err = z.ExistsW(pred)
			return err
		})
		if err == errSessionOver {
			return lost()
		}
		if err != nil {
			l.abandon()
			return c.convert(err, dp)
		}
		if !exists {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			l.abandon()
			return backendkit.FromContext(ctx, dp)
		case <-s.lost:
			return lost()
		case <-c.closing:
			return topo.NewError(topo.Closed, dp)
		}
	}
}

// readHolder reads the lock entry zp (the holder, the lowest entry) on
// session s, and yields the NodeExists error TryLock returns: a
// backendkit.LockHeld naming the holder by its entry's data (the contents
// it locked with) and its session id (ZooKeeper's "0x" hex form), or a
// plain NodeExists when the entry could not be read within abandonWait
// (the holder left meanwhile, the session or ctx ended).
func (c *Conn) readHolder(ctx context.Context, s *zkSession, dp, zp string) <-chan error {
	out := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, abandonWait) // as prompt as the abandon
		defer cancel()
		type getRes struct {
			data []byte
			st   *zk.Stat
		}
		res := make(chan getRes, 1) // written by fn even after do gave up
		err := c.onSession(ctx, s, dp, func(z *zk.Conn) error {
			data, st, err := z.Get(zp)
			if err == nil {
				res <- getRes{data, st}
			}
			return err
		})
		if err != nil {
			out <- topo.NewError(topo.NodeExists, dp)
			return
		}
		r := <-res
		session := ""
		if r.st.EphemeralOwner != 0 {
			session = fmt.Sprintf("0x%x", r.st.EphemeralOwner)
		}
		out <- backendkit.LockHeld(dp, r.data, session)
	}()
	return out
}
