package consultopo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
)

const (
	// requestTimeout bounds the store requests that run detached from the
	// caller's context: lock acquisitions finished after the caller gave
	// up, releases, session renewals and destroys.
	requestTimeout = 10 * time.Second
	// maxRetryWait caps the backoff between retries of a lock acquisition
	// refused by a lock-delay, and of waits interrupted by store errors.
	maxRetryWait = 500 * time.Millisecond
)

// errInvalidSession reports that Consul no longer knows the session a lock
// was being acquired with; the caller retries with a new one.
var errInvalidSession = errors.New("consul session no longer exists")

// session is one Consul session created by a Conn, with the "delete"
// behaviour: when it ends, Consul deletes the keys it holds. Its ctx ends
// when the session is known to be lost (destroyed, expired, not renewed for
// a TTL, or the Conn closed).
type session struct {
	id  string
	ttl time.Duration
	own bool // carries a single lock; destroyed by its Unlock

	ctx       context.Context
	markLost  context.CancelFunc
	lastRenew atomic.Int64 // unix nanoseconds of the last confirmed renewal
}

func (s *session) lost() bool { return s.ctx.Err() != nil }

// recentlyRenewed reports whether the session was confirmed alive less than
// a TTL ago, so a store error cannot yet mean it expired.
func (s *session) recentlyRenewed() bool {
	return time.Since(time.Unix(0, s.lastRenew.Load())) < s.ttl
}

// newSession creates a session with ttl and the Conn's lock-delay and
// starts renewing it in the background, independently of ctx (which bounds
// only the creation).
func (c *Conn) newSession(ctx context.Context, path string, ttl time.Duration, own bool) (*session, error) {
	body := map[string]any{
		"Name":       "topokit",
		"TTL":        fmt.Sprintf("%ds", int64(ttl/time.Second)),
		"LockDelay":  c.opts.LockDelay.String(),
		"Behavior":   api.SessionBehaviorDelete,
		"NodeChecks": []string{},
	}
	var out struct{ ID string }
	if _, err := c.client.Raw().Write("/v1/session/create", body, &out, c.writeOptions(ctx)); err != nil {
		return nil, c.convertError(ctx, err, path)
	}
	sctx, cancel := context.WithCancel(c.ctx)
	s := &session{id: out.ID, ttl: ttl, own: own, ctx: sctx, markLost: cancel}
	s.lastRenew.Store(time.Now().UnixNano())

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.destroySession(s)
		return nil, topo.NewError(topo.Closed, path)
	}
	c.sessions[s] = struct{}{}
	c.wg.Add(1)
	c.mu.Unlock()
	go c.renew(s)
	return s, nil
}

// renew renews s every half TTL until it is lost. Store errors are retried
// every second; only when no renewal succeeded for a whole TTL, or Consul
// says the session is gone, is the session lost.
func (c *Conn) renew(s *session) {
	defer c.wg.Done()
	t := time.NewTimer(s.ttl / 2)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(s.ctx, min(requestTimeout, s.ttl/2))
		entry, _, err := c.client.Session().Renew(s.id, c.writeOptions(ctx))
		cancel()
		switch {
		case s.ctx.Err() != nil:
			return
		case err == nil && entry == nil:
			c.forgetSession(s)
			return
		case err != nil:
			if !s.recentlyRenewed() {
				c.destroySession(s)
				return
			}
			t.Reset(time.Second)
		default:
			s.lastRenew.Store(time.Now().UnixNano())
			t.Reset(s.ttl / 2)
		}
	}
}

// forgetSession marks s lost and drops it from the Conn.
func (c *Conn) forgetSession(s *session) {
	s.markLost()
	c.mu.Lock()
	delete(c.sessions, s)
	if c.shared == s {
		c.shared = nil
	}
	c.mu.Unlock()
}

// destroySession forgets s and destroys it in Consul (best effort, for at
// most requestTimeout), which deletes the keys it holds.
func (c *Conn) destroySession(s *session) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	c.destroySessionCtx(ctx, s)
}

func (c *Conn) destroySessionCtx(ctx context.Context, s *session) {
	c.forgetSession(s)
	if _, err := c.client.Session().Destroy(s.id, c.writeOptions(ctx)); err != nil {
		slog.Debug("consultopo: destroying a session", "session", s.id, "err", err)
	}
}

// sessionFor returns the session a lock with ttl uses: the Conn's shared
// long-lived session for the Conn's SessionTTL (created on first use, and
// again after it is lost), otherwise a new session of its own.
func (c *Conn) sessionFor(ctx context.Context, path string, ttl time.Duration) (*session, error) {
	if ttl != c.opts.SessionTTL {
		return c.newSession(ctx, path, ttl, true)
	}
	c.mu.Lock()
	s := c.shared
	c.mu.Unlock()
	if s != nil && !s.lost() {
		return s, nil
	}
	c.sessionMu.Lock()
	defer c.sessionMu.Unlock()
	c.mu.Lock()
	s = c.shared
	c.mu.Unlock()
	if s != nil && !s.lost() {
		return s, nil
	}
	s, err := c.newSession(ctx, path, ttl, false)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.shared = s
	c.mu.Unlock()
	return s, nil
}

// sessionIDs returns the ids of the Conn's live sessions (tests destroy
// them to simulate session loss).
func (c *Conn) sessionIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.sessions))
	for s := range c.sessions {
		ids = append(ids, s.id)
	}
	return ids
}

// claim reserves a lock key within one Conn. Consul lets a session
// re-acquire a key it holds, and one session carries all of a Conn's
// default-TTL locks, so exclusion between lockers of one Conn is local: a
// locker first claims the key, and waits while another locker of the same
// Conn holds the claim.
type claim struct {
	key  string
	done chan struct{}
	once sync.Once
	sess atomic.Pointer[session] // the session holding the lock, once taken
}

// claimKey claims key for the caller. With try it fails with NodeExists
// when the key is claimed; otherwise it waits until the claim is released
// (or its holder's session is lost), or ctx ends.
func (c *Conn) claimKey(ctx context.Context, path, key string, try bool) (*claim, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, topo.NewError(topo.Closed, path)
		}
		cur, held := c.claims[key]
		if !held {
			cl := &claim{key: key, done: make(chan struct{})}
			c.claims[key] = cl
			c.mu.Unlock()
			return cl, nil
		}
		c.mu.Unlock()
		if try {
			return nil, topo.Wrap(topo.NodeExists, path, errors.New("the lock is held through this connection"))
		}
		var lost <-chan struct{}
		if s := cur.sess.Load(); s != nil {
			lost = s.ctx.Done()
		}
		select {
		case <-cur.done:
		case <-lost:
			c.releaseClaim(cur)
		case <-ctx.Done():
			return nil, c.ctxError(ctx, path)
		}
	}
}

// releaseClaim releases cl; it is idempotent.
func (c *Conn) releaseClaim(cl *claim) {
	cl.once.Do(func() {
		c.mu.Lock()
		if c.claims[cl.key] == cl {
			delete(c.claims, cl.key)
		}
		c.mu.Unlock()
		close(cl.done)
	})
}

// ctxError is the error for a wait under ctx (a caller's context merged
// with the Conn's) that ended: Closed when the Conn closed, else Timeout or
// Interrupted.
func (c *Conn) ctxError(ctx context.Context, path string) error {
	if c.ctx.Err() != nil {
		return topo.NewError(topo.Closed, path)
	}
	if err := topo.FromContext(ctx, path); err != nil {
		return err
	}
	return topo.NewError(topo.Interrupted, path)
}

// lockSpec describes one acquisition.
type lockSpec struct {
	path  string // for errors
	key   string
	value []byte
	ttl   time.Duration
	try   bool
	// detach lets a caller whose ctx ends during the acquire request return
	// at once, the request finishing (and being undone) in the background.
	// Without it the request runs to completion (bounded by requestTimeout)
	// and is undone before returning.
	detach bool
}

// lock claims spec.key locally and acquires it in Consul with a session of
// spec.ttl, waiting with blocking queries while another session holds it
// (or failing with NodeExists under try). On success the claim stays held
// and is returned with the session; on failure everything taken is
// released.
func (c *Conn) lock(ctx context.Context, spec lockSpec) (*claim, *session, error) {
	wctx, cancel := c.callCtx(ctx)
	defer cancel()
	cl, err := c.claimKey(wctx, spec.path, spec.key, spec.try)
	if err != nil {
		if c.ctx.Err() == nil && ctx.Err() != nil {
			return nil, nil, topo.FromContext(ctx, spec.path)
		}
		return nil, nil, err
	}
	for attempt := 0; ; attempt++ {
		sess, err := c.sessionFor(wctx, spec.path, spec.ttl)
		if err != nil {
			c.releaseClaim(cl)
			return nil, nil, c.waitError(ctx, err, spec.path)
		}
		handedOff, err := c.acquire(wctx, spec, sess, cl)
		if err == nil {
			cl.sess.Store(sess)
			return cl, sess, nil
		}
		if errors.Is(err, errInvalidSession) && attempt < 3 {
			c.forgetSession(sess)
			continue
		}
		if !handedOff {
			if sess.own {
				c.destroySession(sess)
			}
			c.releaseClaim(cl)
		}
		return nil, nil, c.waitError(ctx, err, spec.path)
	}
}

// waitError turns an error from a wait under a merged context into the
// caller's error: ctx's own Timeout/Interrupted, Closed, or err itself.
func (c *Conn) waitError(ctx context.Context, err error, path string) error {
	if errors.Is(err, errInvalidSession) {
		return topo.Wrap(topo.Unavailable, path, err)
	}
	if ctx.Err() != nil {
		return topo.FromContext(ctx, path)
	}
	if c.ctx.Err() != nil {
		return topo.NewError(topo.Closed, path)
	}
	return c.convertError(ctx, err, path)
}

// acquire takes spec.key for sess. handedOff reports that an acquire
// request was still in flight when ctx ended: a background goroutine then
// finishes it, undoes it, and releases the claim (and an own session).
func (c *Conn) acquire(ctx context.Context, spec lockSpec, sess *session, cl *claim) (handedOff bool, err error) {
	pair := &api.KVPair{Key: spec.key, Value: spec.value, Flags: api.LockFlagValue, Session: sess.id}
	wait := 10 * time.Millisecond
	var delayUntil time.Time
	for {
		ok, handedOff, err := c.acquireOnce(ctx, spec, pair, sess, cl)
		if err != nil || handedOff {
			return handedOff, err
		}
		if ok {
			return false, nil
		}
		// Refused: another session holds the key, or a lock-delay left by
		// an invalidated session is in effect.
		cur, meta, err := c.kv.Get(spec.key, c.queryOptions(ctx))
		if err != nil {
			return false, err
		}
		held := cur != nil && cur.Session != "" && cur.Session != sess.id
		if held && spec.try {
			return false, topo.Wrap(topo.NodeExists, spec.path, errors.New("the lock is held by session "+cur.Session))
		}
		for held {
			// Block until the key changes, then look again.
			index := meta.LastIndex
			q := &api.QueryOptions{WaitIndex: index, WaitTime: c.opts.WatchPollDuration}
			cur, meta, err = c.kv.Get(spec.key, q.WithContext(ctx))
			if err != nil {
				return false, err
			}
			held = cur != nil && cur.Session != "" && cur.Session != sess.id
			if meta.LastIndex < index {
				meta.LastIndex = 0 // the store was reset; start over
			}
		}
		if cur == nil || cur.Session == "" {
			// Free, yet refused before: a lock-delay. TryLock waits it out
			// for at most our own lock-delay.
			if spec.try {
				if delayUntil.IsZero() {
					delayUntil = time.Now().Add(c.opts.LockDelay + time.Second)
				} else if time.Now().After(delayUntil) {
					return false, topo.Wrap(topo.NodeExists, spec.path, errors.New("a lock-delay is in effect"))
				}
			}
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(wait):
			}
			wait = min(2*wait, maxRetryWait)
		}
	}
}

// acquireOnce sends one acquire request for pair. When ctx can end, the
// request runs in a goroutine under a context of its own so that a caller
// giving up never leaves the key silently held: the goroutine undoes a
// request that may have succeeded.
func (c *Conn) acquireOnce(ctx context.Context, spec lockSpec, pair *api.KVPair, sess *session, cl *claim) (ok, handedOff bool, err error) {
	if ctx.Done() == nil || !spec.detach {
		rctx, cancel := context.WithTimeout(sess.ctx, requestTimeout)
		defer cancel()
		ok, _, err := c.kv.Acquire(pair, c.writeOptions(rctx))
		if err == nil && ctx.Err() != nil && ok {
			c.deleteIfHeld(spec.key, sess)
			return false, false, ctx.Err()
		}
		return ok, false, c.acquireError(spec.key, sess, err)
	}
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	rctx, cancel := context.WithTimeout(sess.ctx, requestTimeout)
	go func() {
		ok, _, err := c.kv.Acquire(pair, c.writeOptions(rctx))
		cancel()
		done <- result{ok, err}
	}()
	select {
	case r := <-done:
		return r.ok, false, c.acquireError(spec.key, sess, r.err)
	case <-ctx.Done():
	}
	c.spawn(func() {
		if r := <-done; r.ok || r.err != nil {
			c.deleteIfHeld(spec.key, sess)
		}
		if sess.own {
			c.destroySession(sess)
		}
		c.releaseClaim(cl)
	})
	return false, true, ctx.Err()
}

// acquireError classifies a failed acquire request. A request that may
// have reached the store is undone.
func (c *Conn) acquireError(key string, sess *session, err error) error {
	if err == nil {
		return nil
	}
	if isInvalidSession(err) {
		return errInvalidSession
	}
	c.deleteIfHeld(key, sess)
	return err
}

// deleteIfHeld deletes key if sess holds it (best effort, detached from any
// caller's context).
func (c *Conn) deleteIfHeld(key string, sess *session) {
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	if _, _, err := c.releaseKey(ctx, key, sess); err != nil {
		slog.Debug("consultopo: undoing a lock acquisition", "key", key, "err", err)
	}
}

// releaseKey deletes key in one transaction that first checks that sess
// holds it, so it never removes a key another holder just acquired. held
// reports whether sess held it.
func (c *Conn) releaseKey(ctx context.Context, key string, sess *session) (held bool, resp *api.TxnResponse, err error) {
	return c.txn(ctx, api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: key, Session: sess.id}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: key}},
	})
}

// dirHasEntries reports whether anything but dir's own lock key is under
// dir.
func (c *Conn) dirHasEntries(ctx context.Context, dir string) (bool, error) {
	prefix := c.dirPrefix(dir)
	keys, _, err := c.kv.Keys(prefix, "/", c.queryOptions(ctx))
	if err != nil {
		return false, c.convertError(ctx, err, dir)
	}
	for _, k := range keys {
		if k != prefix && k != prefix+lockName {
			return true, nil
		}
	}
	return false, nil
}

// Lock implements topo.Conn.Lock: it acquires the key <dir>/Lock with the
// Conn's long-lived session (TTL Options.SessionTTL), storing contents with
// the api package's lock flags, and waits with blocking queries while
// another session holds it. It returns NoNode if dirPath has no entries,
// Timeout/Interrupted when ctx ends first (nothing stays held), Closed after
// Close, InvalidPath for a bad path and Unavailable when the agent cannot
// be reached. Locks taken through one Conn exclude each other like locks of
// different Conns.
func (c *Conn) Lock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lockDir(ctx, dirPath, contents, c.opts.SessionTTL, false, true)
}

// LockWithTTL implements topo.Conn.LockWithTTL: Lock with a session TTL of
// ttl, rounded up to whole seconds and to MinSessionTTL (10 s), at most
// MaxSessionTTL. When that equals the Conn's SessionTTL the long-lived
// session is used; otherwise the lock gets a session of its own, destroyed
// by Unlock. ttl <= 0 gives InvalidArgument; other errors as for Lock.
func (c *Conn) LockWithTTL(ctx context.Context, dirPath, contents string, ttl time.Duration) (topo.LockDescriptor, error) {
	if ttl <= 0 {
		p, err := topo.CleanDirPath(dirPath)
		if err != nil {
			return nil, err
		}
		return nil, topo.Wrap(topo.InvalidArgument, p, fmt.Errorf("lock TTL %v is not positive", ttl))
	}
	return c.lockDir(ctx, dirPath, contents, clampTTL(ttl), false, true)
}

// LockName implements topo.Conn.LockName: a lock on the key <dirPath>/Lock
// that does not require dirPath to exist, on a session of its own with
// Consul's longest TTL (MaxSessionTTL, 24 h). Errors as for Lock, except
// NoNode.
func (c *Conn) LockName(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lockDir(ctx, dirPath, contents, MaxSessionTTL, false, false)
}

// TryLock implements topo.Conn.TryLock: Lock, but it returns NodeExists at
// once while another holder (of this or another Conn) has the lock. When
// the lock is free but a lock-delay left by an invalidated session is in
// effect, it retries for up to the Conn's own lock-delay before giving up
// with NodeExists. Other errors as for Lock.
func (c *Conn) TryLock(ctx context.Context, dirPath, contents string) (topo.LockDescriptor, error) {
	return c.lockDir(ctx, dirPath, contents, c.opts.SessionTTL, true, true)
}

func (c *Conn) lockDir(ctx context.Context, dirPath, contents string, ttl time.Duration, try, needDir bool) (topo.LockDescriptor, error) {
	dir, err := topo.CleanDirPath(dirPath)
	if err != nil {
		return nil, err
	}
	if err := c.begin(ctx, dir); err != nil {
		return nil, err
	}
	if needDir {
		ok, err := c.dirHasEntries(ctx, dir)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, topo.NewError(topo.NoNode, dir)
		}
	}
	spec := lockSpec{path: dir, key: c.dirPrefix(dir) + lockName, value: []byte(contents), ttl: ttl, try: try, detach: true}
	cl, sess, err := c.lock(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &lockDescriptor{c: c, path: dir, key: spec.key, sess: sess, cl: cl}, nil
}

// lockDescriptor is a lock held through a session.
type lockDescriptor struct {
	c    *Conn
	path string
	key  string
	sess *session
	cl   *claim

	mu       sync.Mutex
	unlocked bool
	lost     bool
}

// Check implements topo.LockDescriptor.Check. It returns Interrupted after
// Unlock, LockLost when the lock's session is known lost (destroyed,
// expired, or the Conn closed) and otherwise reads the lock key: LockLost
// when the key is gone or held by another session. When the agent cannot
// be reached it returns nil while the session was renewed less than a TTL
// ago (short outages are ridden out), and Unavailable after that. A ctx
// that ended gives Timeout/Interrupted.
func (l *lockDescriptor) Check(ctx context.Context) error {
	if err := topo.CheckContext(ctx, l.path); err != nil {
		return err
	}
	l.mu.Lock()
	unlocked, lost := l.unlocked, l.lost
	l.mu.Unlock()
	switch {
	case unlocked:
		return topo.Wrap(topo.Interrupted, l.path, errors.New("the lock was released"))
	case lost || l.sess.lost():
		return l.markLost("the lock's session ended")
	}
	pair, _, err := l.c.kv.Get(l.key, l.c.queryOptions(ctx))
	if err != nil {
		if ctx.Err() == nil && isTransient(err) && l.sess.recentlyRenewed() && !l.sess.lost() {
			return nil
		}
		if l.sess.lost() {
			return l.markLost("the lock's session ended")
		}
		return l.c.convertError(ctx, err, l.path)
	}
	if pair == nil || pair.Session != l.sess.id {
		return l.markLost("the lock key was deleted or taken over")
	}
	return nil
}

// markLost records the loss, frees the local claim so other lockers of the
// Conn may proceed, and returns LockLost.
func (l *lockDescriptor) markLost(why string) error {
	l.mu.Lock()
	l.lost = true
	l.mu.Unlock()
	l.c.releaseClaim(l.cl)
	return topo.Wrap(topo.LockLost, l.path, errors.New(why))
}

// Unlock implements topo.LockDescriptor.Unlock: one transaction checks that
// the lock's session still holds <dir>/Lock and deletes the key (so no
// leftover keeps an emptied directory listed), then a lock-specific
// session is destroyed. It returns LockLost when the lock had been lost,
// Interrupted on a second Unlock, and Timeout/Interrupted when ctx ends
// first (the release then completes in the background).
func (l *lockDescriptor) Unlock(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unlocked {
		return topo.Wrap(topo.Interrupted, l.path, errors.New("the lock was already released"))
	}
	l.unlocked = true
	if l.lost || l.sess.lost() {
		l.finish()
		return topo.Wrap(topo.LockLost, l.path, errors.New("the lock's session ended"))
	}
	type result struct {
		held bool
		err  error
	}
	done := make(chan result, 1)
	release := func() {
		rctx, cancel := context.WithTimeout(l.c.ctx, requestTimeout)
		defer cancel()
		held, _, err := l.c.releaseKey(rctx, l.key, l.sess)
		l.finish()
		done <- result{held, err}
	}
	if ctx.Done() == nil {
		release()
	} else {
		l.c.spawn(release)
	}
	select {
	case r := <-done:
		switch {
		case r.err != nil:
			return l.c.convertError(ctx, r.err, l.path)
		case !r.held:
			return topo.Wrap(topo.LockLost, l.path, errors.New("the lock key was deleted or taken over"))
		}
		return nil
	case <-ctx.Done():
		return topo.FromContext(ctx, l.path)
	}
}

// finish releases the local claim and destroys a lock-specific session.
func (l *lockDescriptor) finish() {
	l.c.releaseClaim(l.cl)
	if l.sess.own {
		l.c.destroySession(l.sess)
	}
}

// String describes the lock for logs.
func (l *lockDescriptor) String() string {
	return fmt.Sprintf("consul lock %s (session %s)", strings.TrimSuffix(l.key, "/"+lockName), l.sess.id)
}
