package zk2topo

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Fencing tokens.
//
// The token of a lock (or of a leadership term) is the creation zxid
// (Stat.Czxid) of its lock entry (or candidate entry), read on the entry's
// own session with an exists request that also sets the watch behind Done.
// Zxids are ZooKeeper's global transaction ids: every committed write gets
// one greater than all before it, across sessions, leader changes and
// server restarts (the epoch in the high 32 bits grows with every new
// leader; a restarted server continues from its transaction log).
//
// Why it is monotone: a lock on D is held by the entry with the lowest
// sequence among D's entries, and an entry only ever gets the lock after
// every entry created before it in the same "locks" znode is gone (each
// waiter waits for its predecessor; TryLock gives up when any entry is
// ahead). So a later holder's entry was created after the earlier holder's
// entry was created (its create is a later transaction: higher zxid), or,
// when the "locks" znode was removed and created again in between (its
// sequence restarts), after the earlier entry was deleted, which in turn
// came after that entry's creation. Either way the later holder's Czxid is
// greater. Elections are the same queue under elections/<name>/.

// hold makes l a held lock: its Done is from now on a child of its
// session's lostCtx (closed at once when the session is over already).
// Only a held lock is registered there: a claim given up while waiting
// leaves nothing behind on its session.
func (l *lockDesc) hold() { l.ended, l.endClaim = context.WithCancel(l.sess.lostCtx) }

// Token returns the lock's fencing token: the creation zxid (Stat.Czxid)
// of its lock entry, positive and fixed for the lock's life; every later
// holder of the same lock path gets a greater one (see the package doc).
func (l *lockDesc) Token() int64 { return l.token }

// Done returns a channel closed once the lock ends: Unlock; its session
// ending (expired, given up past the safety margin, or the Conn closed:
// closed before the session is seen lost, so never after Check reports
// LockLost for it); or its entry deleted (or rewritten by another owner)
// behind the holder's back, seen through a watch on the entry.
func (l *lockDesc) Done() <-chan struct{} { return l.ended.Done() }

// entryStat is the answer to an exists request on a claim's entry.
type entryStat struct {
	exists bool
	st     *zk.Stat
	ch     <-chan zk.Event
	err    error
}

// statEntry reads the entry's Stat with a watch (ExistsW), on session s
// only, in the background; the channel yields the answer.
func (c *Conn) statEntry(ctx context.Context, s *zkSession, p, node string) <-chan entryStat {
	out := make(chan entryStat, 1)
	go func() {
		// fn may still run after onSession gave up (ctx ended): it hands
		// its answer over a channel, never through shared variables.
		res := make(chan entryStat, 1) // only one attempt succeeds
		err := c.onSession(ctx, s, p, func(z *zk.Conn) error {
			exists, st, ch, err := z.ExistsW(node)
			if err == nil {
				res <- entryStat{exists: exists, st: st, ch: ch}
			}
			return err
		})
		if err != nil {
			out <- entryStat{err: err}
			return
		}
		r := <-res
		out <- r
	}()
	return out
}

// owned reports whether the exists answer shows the entry owned by s.
func (r entryStat) owned(s *zkSession) bool {
	return r.err == nil && r.exists && r.st.EphemeralOwner == s.zk.SessionID() && r.st.Czxid > 0
}

// watchEntry calls endFn when the entry node of session s is deleted (or
// no longer owned by s) or the Conn closes, re-arming the exists watch ch
// after other events. It returns when stop is closed too. The session's
// end needs no watching: stop is a child of the session's lostCtx (see
// lockDesc.ended), closed within lose.
func (c *Conn) watchEntry(s *zkSession, p, node string, ch <-chan zk.Event, stop <-chan struct{}, endFn func()) {
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		for {
			select {
			case ev := <-ch:
				if ev.Type == zk.EventNodeDeleted || ev.Type == zk.EventNotWatching {
					endFn()
					return
				}
			case <-stop:
				return
			case <-c.closing:
				endFn()
				return
			}
			r := <-c.statEntry(context.Background(), s, p, node)
			if !r.owned(s) {
				endFn()
				return
			}
			ch = r.ch
		}
	}()
}

// checkEntry is Check for a claim whose entry node lives on session s:
// LockLost once the session ended or the entry is gone or owned by
// another session, Unavailable while the session is not provably alive.
func (c *Conn) checkEntry(ctx context.Context, s *zkSession, p, node string) error {
	if s.isLost() || c.closed.Load() {
		return topo.NewError(topo.LockLost, p)
	}
	if err := backendkit.CheckContext(ctx, p); err != nil {
		return err
	}
	if !s.provablyAlive() {
		return backendkit.Wrap(topo.Unavailable, p, errNotConnected)
	}
	var exists bool
	var st *zk.Stat
	err := c.do(ctx, p, func() error {
		return s.syncThen(func() error {
			var err error
			exists, st, err = s.zk.Exists(node)
			return err
		})
	})
	switch {
	case s.isLost() || c.closed.Load():
		return topo.NewError(topo.LockLost, p)
	case err != nil:
		return c.convert(err, p)
	case !exists || st.EphemeralOwner != s.zk.SessionID():
		return topo.NewError(topo.LockLost, p)
	case !s.provablyAlive():
		return backendkit.Wrap(topo.Unavailable, p, errNotConnected)
	}
	return nil
}

// term is one leadership term of a participation: the candidate entry
// node of session sess, leading while lctx is not cancelled.
type term struct {
	p     *participation
	node  string
	sess  *zkSession
	token int64
	gen   uint64          // the entry's generation on its session (see entryGen)
	lctx  context.Context // a child of sess's lostCtx; its Done is the term's
}

// Token returns the term's fencing token: the creation zxid of the
// candidate entry that leads. Every later term of the election, whoever
// leads it, has a greater one, except that a participant leading again
// on the same entry after its connection dropped (its session and entry
// survived, so nobody led in between) gets a new term with the same
// token.
func (t *term) Token() int64 { return t.token }

// Done returns a channel closed when the term ends: when the leadership
// context is cancelled (Stop, Resign, a dropped connection, the session
// ending, the candidate entry deleted, Close); it is that context's Done,
// so it is closed before the session is seen lost.
func (t *term) Done() <-chan struct{} { return t.lctx.Done() }

// ended reports whether the term is over locally.
func (t *term) ended() bool {
	return t.lctx.Err() != nil || t.sess.entryGen(t.node) != t.gen
}

// Check returns nil while the term lasts and the store shows the
// candidate entry owned by its session (a sync, then an exists, on that
// session), Closed after the Conn's Close (whatever happened to the term
// before), Interrupted after Stop, LockLost once the term ended
// otherwise or the entry is gone, Unavailable while the session is not
// provably alive, Timeout or Interrupted when ctx ends first.
func (t *term) Check(ctx context.Context) error {
	p := t.p
	if err := p.c.closedCheck(ctx, p.name); err != nil {
		return err
	}
	p.mu.Lock()
	stopped := p.stopped
	p.mu.Unlock()
	if stopped {
		return topo.NewError(topo.Interrupted, p.name)
	}
	if t.ended() {
		return topo.NewError(topo.LockLost, p.name)
	}
	return p.c.checkEntry(ctx, t.sess, p.name, t.node)
}

// Term returns the current leadership term (the same Fence for the whole
// term) while the participant leads, and a NotLeader *topo.Error
// otherwise; Closed after the Conn's Close.
func (p *participation) Term() (topo.Fence, error) {
	if p.c.closed.Load() {
		return nil, topo.NewError(topo.Closed, p.name)
	}
	p.mu.Lock()
	t := p.term
	p.mu.Unlock()
	if t == nil || t.ended() {
		return nil, topo.NewError(topo.NotLeader, p.name)
	}
	return t, nil
}

// takeSeqHint returns (and forgets) the entry name the Conn expects the
// next create under the locks znode locksZp to get (see noteReleased).
func (c *Conn) takeSeqHint(locksZp string) (string, bool) {
	v, ok := c.seqHints.LoadAndDelete(locksZp)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%s/%0*d", locksZp, seqLen, v.(int64)), true
}

// noteReleased records, after this Conn deleted its lock entry node, the
// name the next entry under the same locks znode gets if nobody else
// creates one there meanwhile: ZooKeeper numbers sequential children with
// a counter of their parent that each create raises by one (the deletes
// do not, as ZooKeeper 3.8 shows). A wrong guess costs nothing but the
// fallback read.
func (c *Conn) noteReleased(node string) {
	if len(node) < seqLen {
		return
	}
	seq, err := strconv.ParseInt(node[len(node)-seqLen:], 10, 64)
	if err != nil || seq+1 > math.MaxInt32 {
		return
	}
	c.seqHints.Store(zkDir(node), seq+1)
}

// prefetchEntry pipelines an exists with a watch of node, the predicted
// name of the claim's entry, behind the claim's first create on session s
// (see prefetchChildren): the server runs it after the create, so when the
// create returns that very name and the read shows a znode owned by s,
// its Stat is our entry's, and its watch the one behind Done. After a
// wrong guess the watch is left to fire on whatever next happens at that
// name (the next entry's create, or the other entry's delete), and is
// dropped. The channel yields nothing when the read was not sent or
// failed.
func (c *Conn) prefetchEntry(ctx context.Context, s *zkSession, dp, locksZp, node string) (<-chan entryStat, func()) {
	sent, unregister := s.obs.expect(opCreate, locksZp+"/")
	out := make(chan entryStat, 1)
	quit := make(chan struct{})
	go func() {
		defer close(out)
		select {
		case <-sent:
		case <-quit:
			return
		}
		res := make(chan entryStat, 1) // written by fn even after do gave up
		err := c.do(ctx, dp, func() error {
			exists, st, ch, err := s.zk.ExistsW(node)
			if err == nil {
				res <- entryStat{exists: exists, st: st, ch: ch}
			}
			return err
		})
		if err == nil {
			out <- <-res
		}
	}()
	var once sync.Once
	return out, func() {
		once.Do(func() {
			unregister()
			close(quit)
		})
	}
}

// closedCheck returns, once c is closed, ctx's error (backendkit's
// order: the context first) or else Closed for path; nil while c is open.
// The claim calls (Check, Unlock, ...) start with it, so that after Close
// they return Closed, whatever happened to the claim before.
func (c *Conn) closedCheck(ctx context.Context, path string) error {
	if !c.closed.Load() {
		return nil
	}
	if err := backendkit.CheckContext(ctx, path); err != nil {
		return err
	}
	return topo.NewError(topo.Closed, path)
}
