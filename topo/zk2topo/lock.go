package zk2topo

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
)

// Lock takes the lock on dirPath: it creates an ephemeral-sequential znode
// holding contents under <root>/dirPath/locks/ (creating that persistent
// "locks" znode the first time; it is kept for later locks and hidden from
// listings while empty), and waits until its znode has the lowest sequence,
// watching only its predecessor. Uncontended it costs two round trips (the
// create and a children read). It returns NoNode when dirPath has no files,
// Timeout or Interrupted when ctx ends first (the waiting znode is then
// removed with a fresh context), and InvalidPath, InvalidArgument, Closed or
// Unavailable. The lock lives as long as the Conn's session: it is lost one
// session timeout after the process stops talking to ZooKeeper.
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
		p, _ := topo.CleanDirPath(dirPath)
		return nil, &topo.Error{Code: topo.InvalidArgument, Path: p, Err: errors.New("ttl must be positive")}
	}
	return c.lock(ctx, dirPath, contents, true, false)
}

// LockName takes the named lock dirPath, which need not exist (the
// directory znodes are created; they disappear from listings once the lock
// is released). Like every ZooKeeper lock it lives as long as the session,
// with no other time limit. Errors as for Lock, except NoNode.
func (c *Conn) LockName(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lock(ctx, dirPath, contents, false, false)
}

// TryLock is Lock that returns NodeExists at once (after removing its own
// entry) when another entry, holder or waiter, is ahead of it.
func (c *Conn) TryLock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lock(ctx, dirPath, contents, true, true)
}

func (c *Conn) lock(ctx context.Context, dirPath, contents string, mustExist, try bool) (topo.LockDescriptor, error) {
	dp, err := topo.CleanDirPath(dirPath)
	if err != nil {
		return nil, err
	}
	if err := topo.CheckValue(dp, []byte(contents)); err != nil {
		return nil, err
	}
	if err := c.begin(ctx, dp); err != nil {
		return nil, err
	}
	if c.internal(dp) {
		return nil, &topo.Error{Code: topo.InvalidPath, Path: dp, Err: errors.New("zk2topo: cannot lock inside a lock or election")}
	}
	dirZp := c.zkPath(dp)
	locksZp := dirZp + "/" + locksDir
	if dirZp == "/" {
		locksZp = "/" + locksDir
	}
	sess := c.session()

	var node string
	// Fast path: with the locks znode's data version known, one multi
	// creates the entry and rewrites the locks znode's empty data at that
	// version, returning its Stat: a single child means the entry is the
	// only one, so the lock is held without a children read. A stale
	// version fails the multi as a whole (nothing is created).
	if lv, ok := c.dirs.get(locksZp); ok {
		var mr []zk.MultiResponse
		n, err := c.createEntry(ctx, dp, locksZp, func() (string, error) {
			var err error
			mr, err = c.zk.Multi(
				&zk.CreateRequest{Path: locksZp + "/", Data: []byte(contents), Acl: c.acl, Flags: zk.FlagEphemeralSequential},
				&zk.SetDataRequest{Path: locksZp, Data: nil, Version: lv})
			if err != nil || len(mr) != 2 || mr[1].Stat == nil {
				return "", errMulti(err)
			}
			return mr[0].String, nil
		})
		switch {
		case err == nil:
			node = n
			c.dirs.set(locksZp, mr[1].Stat.Version)
			if mr[1].Stat.NumChildren == 1 {
				return &lockDesc{c: c, dir: dp, node: node, sess: sess}, nil
			}
		case topo.CodeOf(err) == 0 && len(mr) == 2:
			// (A *topo.Error means ctx ended: mr may still be written.)
			c.dirs.drop(locksZp) // stale or absent: the plain path
		default:
			return nil, c.convert(err, dp)
		}
	}
	for attempt := 0; node == ""; attempt++ {
		n, err := c.createEntry(ctx, dp, locksZp, func() (string, error) {
			return c.zk.Create(locksZp+"/", []byte(contents), zk.FlagEphemeralSequential, c.acl)
		})
		if err == nil {
			node = n
			break
		}
		if !errors.Is(err, zk.ErrNoNode) || attempt >= 10 {
			return nil, c.convert(err, dp)
		}
		// No locks znode yet.
		if mustExist {
			var exists bool
			var st *zk.Stat
			err := c.read(ctx, dp, func() error {
				var err error
				exists, st, err = c.zk.Exists(dirZp)
				return err
			})
			if err != nil {
				return nil, c.convert(err, dp)
			}
			if !exists || st.NumChildren == 0 {
				return nil, topo.NewError(topo.NoNode, dp)
			}
		}
		if err := c.makeDirs(ctx, dp, locksZp); err != nil {
			return nil, err
		}
	}

	l := &lockDesc{c: c, dir: dp, node: node, sess: sess}
	name := node[len(locksZp)+1:]
	for {
		var children []string
		var st *zk.Stat
		err := c.read(ctx, dp, func() error {
			var err error
			children, st, err = c.zk.Children(locksZp)
			return err
		})
		if err != nil {
			l.abandon()
			return nil, c.convert(err, dp)
		}
		if st.DataLength == 0 && st.EphemeralOwner == 0 {
			c.dirs.set(locksZp, st.Version) // for the next Lock's fast path
		}
		sort.Strings(children)
		idx := sort.SearchStrings(children, name)
		if idx >= len(children) || children[idx] != name {
			// Our entry vanished: the session expired.
			return nil, &topo.Error{Code: topo.Unavailable, Path: dp, Err: errors.New("zk2topo: lock entry lost while waiting (session expired)")}
		}
		if idx == 0 {
			return l, nil
		}
		if try {
			l.abandon()
			return nil, topo.NewError(topo.NodeExists, dp)
		}
		pred := locksZp + "/" + children[idx-1]
		var exists bool
		var ch <-chan zk.Event
		err = c.read(ctx, dp, func() error {
			var err error
			exists, _, ch, err = c.zk.ExistsW(pred)
			return err
		})
		if err != nil {
			l.abandon()
			return nil, c.convert(err, dp)
		}
		if !exists {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			l.abandon()
			return nil, topo.FromContext(ctx, dp)
		case <-sess.lost:
			return nil, &topo.Error{Code: topo.Unavailable, Path: dp, Err: zk.ErrSessionExpired}
		case <-c.closing:
			return nil, topo.NewError(topo.Closed, dp)
		}
	}
}

// lockDesc is a lock entry held (or being waited for) through a Conn.
type lockDesc struct {
	c    *Conn
	dir  string // canonical directory path
	node string // the entry's znode path
	sess *session

	mu       sync.Mutex
	released bool
}

// abandon removes the entry of a lock that is not taken, with a fresh
// context, so that it never blocks later lockers. It waits for the delete
// (one round trip) for at most abandonWait, so that a caller whose context
// ended is not held up long by a hung server; the delete then completes in
// the background (the Conn's later requests still run after it).
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
		c.deleteEntry(l.node)
	}()
	select {
	case <-done:
	case <-time.After(abandonWait):
	}
}

// abandonWait bounds how long a Lock whose context ended waits for the
// deletion of its entry.
const abandonWait = time.Second

// Check returns nil while the lock is held. It returns Interrupted after
// Unlock, and LockLost when the session that holds the entry expired (or
// the Conn has been disconnected for longer than the session timeout, or
// was closed) or the entry is gone or owned by another session. It asks the
// server (one round trip) unless the local session state already answers.
func (l *lockDesc) Check(ctx context.Context) error {
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if released {
		return topo.NewError(topo.Interrupted, l.dir)
	}
	if l.sess.isLost() || l.c.closed.Load() || l.c.surelyExpired() {
		return topo.NewError(topo.LockLost, l.dir)
	}
	if err := topo.CheckContext(ctx, l.dir); err != nil {
		return err
	}
	var exists bool
	var st *zk.Stat
	err := l.c.read(ctx, l.dir, func() error {
		var err error
		exists, st, err = l.c.zk.Exists(l.node)
		return err
	})
	if err != nil {
		if topo.IsErrType(err, topo.Closed) {
			return topo.NewError(topo.LockLost, l.dir)
		}
		return l.c.convert(err, l.dir)
	}
	if !exists || l.sess.isLost() || st.EphemeralOwner != l.c.zk.SessionID() {
		return topo.NewError(topo.LockLost, l.dir)
	}
	return nil
}

// Unlock deletes the lock entry (one round trip). A second Unlock returns
// Interrupted; LockLost when the session expired or the entry was already
// gone.
func (l *lockDesc) Unlock(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return topo.NewError(topo.Interrupted, l.dir)
	}
	l.released = true
	l.mu.Unlock()
	if l.sess.isLost() {
		return topo.NewError(topo.LockLost, l.dir)
	}
	if l.c.closed.Load() {
		return topo.NewError(topo.Closed, l.dir)
	}
	err := l.release(ctx)
	if err == nil || errors.Is(err, zk.ErrNoNode) {
		l.c.forgetEntry(l.node)
	}
	if errors.Is(err, zk.ErrNoNode) {
		return topo.NewError(topo.LockLost, l.dir)
	}
	if err != nil {
		if topo.CodeOf(err) == topo.Timeout || topo.CodeOf(err) == topo.Interrupted {
			// ctx ended: still remove the entry.
			l.abandon()
		}
		return l.c.convert(err, l.dir)
	}
	return nil
}

// release deletes the lock entry. When the versions of the locks znode and
// of the directory are known, the delete goes in one multi with rewrites of
// their (empty) data at those versions, whose Stats tell, without another
// round trip, whether the directory is left holding only an empty locks
// znode (its files were deleted while it was locked, or it is a named lock):
// then both are removed, with the parents left empty.
func (l *lockDesc) release(ctx context.Context) error {
	c := l.c
	locksZp := zkDir(l.node)
	dirZp := zkDir(locksZp)
	dv, dok := c.dirs.get(dirZp)
	lv, lok := c.dirs.get(locksZp)
	if !dok || !lok || dirZp == c.zkPath("") || dirZp == "/" {
		return c.do(ctx, l.dir, func() error { return c.zk.Delete(l.node, -1) })
	}
	var mr []zk.MultiResponse
	err := c.do(ctx, l.dir, func() error {
		var err error
		mr, err = c.zk.Multi(
			&zk.DeleteRequest{Path: l.node, Version: -1},
			&zk.SetDataRequest{Path: locksZp, Data: nil, Version: lv},
			&zk.SetDataRequest{Path: dirZp, Data: nil, Version: dv})
		return err
	})
	switch {
	case topo.CodeOf(err) != 0:
		return err // ctx ended (mr may still be written)
	case err == nil && len(mr) == 3 && mr[1].Stat != nil && mr[2].Stat != nil:
		lst, dst := mr[1].Stat, mr[2].Stat
		c.dirs.set(locksZp, lst.Version)
		c.dirs.set(dirZp, dst.Version)
		if dst.NumChildren == 1 && lst.NumChildren == 0 {
			if c.removeIfEmpty(ctx, dirZp, true, dst, true, lst) {
				c.cleanupDir(ctx, zkDir(dirZp))
			}
		}
		return nil
	case len(mr) == 3 && mr[0].Error != nil:
		return mr[0].Error
	case len(mr) == 3:
		// Another client wrote the directory or its locks znode.
		c.dirs.drop(locksZp)
		c.dirs.drop(dirZp)
		return c.do(ctx, l.dir, func() error { return c.zk.Delete(l.node, -1) })
	default:
		return err
	}
}

// errMulti is the error of a multi that failed: the first failed
// operation's error in case of a partial answer, so that callers can tell
// "no such znode" from the rest.
func errMulti(err error) error {
	if err == nil {
		return errors.New("zk2topo: malformed multi answer")
	}
	return err
}
