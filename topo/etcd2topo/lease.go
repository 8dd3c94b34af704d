package etcd2topo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// MinSafetyMargin is the smallest safety margin (see SafetyMargin).
const MinSafetyMargin = 500 * time.Millisecond

// SafetyMargin returns how long before the earliest possible expiry of a
// lease of ttl the Conn gives up the claims on it: a fifth of the TTL, at
// least MinSafetyMargin, and less than the TTL. With the default 30 s it
// is 6 s: lost 24 s after its last acknowledged renewal was sent; renewals
// come every third of the TTL, so about two in a row must go unanswered.
func SafetyMargin(ttl time.Duration) time.Duration {
	m := max(ttl/5, MinSafetyMargin)
	if m >= ttl {
		m = ttl / 2
	}
	return m
}

// lease is an etcd lease renewed by the Conn until it is revoked, it
// expires, the Conn gives it up, or the Conn closes.
type lease struct {
	id  clientv3.LeaseID
	ttl time.Duration // as granted by etcd
	// lostCtx ends once the lease is lost; requests on its behalf are
	// linked to it, and the claims' contexts are its children.
	lostCtx context.Context
	lostNow context.CancelFunc
	once    sync.Once

	sess *claims.Session // the engine's view; markLost declares it lost
	own  bool            // one entry's own: removing the entry revokes it

	mu       sync.Mutex
	deadline time.Time   // proven-until: lost from then on unless renewed
	timer    *time.Timer // fires at deadline
}

// newLease returns the lease id granted with ttl by a grant request sent
// at sent, proven until sent+ttl-margin: etcd sets a lease's expiry, when
// it applies a grant or renewal, to that moment plus the TTL, and the
// moment comes after the request was sent, so etcd cannot have expired
// the lease before sent+ttl, whatever became of the reply.
func newLease(id clientv3.LeaseID, ttl time.Duration, sent time.Time) *lease {
	l := &lease{id: id, ttl: ttl}
	l.sess = claims.NewSession(leaseName(int64(id)), l)
	l.lostCtx, l.lostNow = context.WithCancel(context.Background())
	l.deadline = sent.Add(ttl - SafetyMargin(ttl))
	// Under mu: a slow grant fires the timer at once, and markLost reads it.
	l.mu.Lock()
	l.timer = time.AfterFunc(time.Until(l.deadline), l.markLost)
	l.mu.Unlock()
	return l
}

// lost reports whether the lease is known or presumed gone (past its
// proven-until time included).
func (l *lease) lost() bool {
	if l.lostCtx.Err() != nil {
		return true
	}
	l.mu.Lock()
	past := !time.Now().Before(l.deadline)
	l.mu.Unlock()
	if past {
		l.markLost()
	}
	return past
}

// markLost declares the lease lost, for good.
func (l *lease) markLost() {
	l.once.Do(func() {
		l.mu.Lock()
		l.timer.Stop()
		l.mu.Unlock()
		// Claims first: whoever sees lostCtx ended sees them ended too.
		l.sess.Lost()
		l.lostNow()
	})
}

// renewed records a renewal sent at sent that etcd acknowledged with ttl.
// A lease already lost stays lost.
func (l *lease) renewed(sent time.Time, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostCtx.Err() != nil {
		return
	}
	if d := sent.Add(ttl - SafetyMargin(ttl)); d.After(l.deadline) {
		l.deadline = d
		l.timer.Reset(time.Until(d))
	}
}

func (l *lease) provenUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// ttlSeconds rounds d up to whole seconds, the unit of etcd lease TTLs.
func ttlSeconds(d time.Duration) int64 {
	return max(int64((d+time.Second-1)/time.Second), 1)
}

// grant creates a lease of ttl seconds (with own, an entry's own), kept
// alive for the Conn's life (ctx bounds only the grant).
func (c *Conn) grant(ctx context.Context, ttl int64, path string, own bool) (*lease, error) {
	sent := time.Now()
	resp, err := c.cli.Grant(ctx, ttl)
	if err != nil {
		return nil, c.convertError(ctx, err, path)
	}
	l := newLease(resp.ID, time.Duration(resp.TTL)*time.Second, sent)
	l.own = own
	if err := c.keep(l, path); err != nil {
		c.revokeAsync(l, false)
		return nil, err
	}
	return l, nil
}

// keep tracks l and keeps it alive until it is lost; else it declares l
// lost and returns Closed after Close, or NodeExists when c keeps l's id
// alive already (Resume twice): the first of two participations on one
// lease to end would revoke it while the other leads. Check and tracking
// are one step under c.mu.
func (c *Conn) keep(l *lease, path string) error {
	c.mu.Lock()
	closed, held := c.isClosed(), c.holdsLease(l.id)
	if !closed && !held {
		c.leases[l] = struct{}{}
	}
	c.mu.Unlock()
	switch {
	case closed:
		l.markLost()
		return topo.NewError(topo.Closed, path)
	case held:
		l.markLost() // not revoked: the lease is the other holder's
		return errLeaseHeld(path)
	}
	go c.keepAlive(l)
	return nil
}

// keepAlive renews l every third of its TTL, one KeepAliveOnce at a time,
// retrying failures 50 ms to 1 s apart. Each attempt asks for a member
// with a leader and gets a third of the proven time left (renewDeadline),
// so one stuck on a cut-off connection or a leaderless member leaves time
// for others. It ends when the lease is lost: gone in etcd, refused for
// good, past its proven-until time, dropped, or the Conn closed.
func (c *Conn) keepAlive(l *lease) {
	defer func() {
		l.markLost()
		if c.untrack(l) && !c.isClosed() {
			// Given up, not dropped: revoke it rather than leave its
			// entries to block others until etcd expires it.
			c.revokeAsync(l, true)
		}
	}()
	wait := l.ttl / 3
	backoff := 50 * time.Millisecond
	for c.sleep(l.lostCtx, wait) {
		sent := time.Now()
		ctx, cancel := context.WithDeadline(clientv3.WithRequireLeader(c.ctx), renewDeadline(sent, l.provenUntil()))
		resp, err := c.cli.KeepAliveOnce(ctx, l.id)
		cancel()
		switch {
		case err == nil:
			l.renewed(sent, time.Duration(resp.TTL)*time.Second)
			wait, backoff = l.ttl/3, 50*time.Millisecond
		case errors.Is(err, rpctypes.ErrLeaseNotFound), isPermanent(err):
			c.log.Debug("lease lost", "lease", int64(l.id), "err", err)
			return
		default:
			wait, backoff = backoff, min(2*backoff, time.Second)
		}
	}
}

// minRenewAttempt is the least time a renewal attempt is given.
const minRenewAttempt = 100 * time.Millisecond

// renewDeadline returns the deadline of a renewal sent at now: a third of
// the proven time left, at least minRenewAttempt, never past provenUntil.
func renewDeadline(now, provenUntil time.Time) time.Time {
	left := provenUntil.Sub(now)
	return now.Add(min(max(left/3, minRenewAttempt), left))
}

// maxSharedLeases bounds the Conn's shared leases (package doc).
const maxSharedLeases = 32

// sharedLease returns the i-th of the Conn's shared leases, granting one
// if there is no live i-th: contenders of one queue through one Conn each
// take a lease once, not a grant and a revoke per lock.
func (c *Conn) sharedLease(ctx context.Context, path string, i int) (*lease, error) {
	live := func() *lease {
		c.mu.Lock()
		defer c.mu.Unlock()
		if i < len(c.shared) && !c.shared[i].lost() {
			return c.shared[i]
		}
		return nil
	}
	if l := live(); l != nil {
		return l, nil
	}
	if i == 0 {
		// Concurrent first lockers share one lease.
		c.grantMu.Lock()
		defer c.grantMu.Unlock()
		if l := live(); l != nil {
			return l, nil
		}
	}
	l, err := c.grant(ctx, ttlSeconds(c.opts.LockTTL), path, false)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if !c.isClosed() {
		c.shared = append(c.shared, l)
	}
	c.mu.Unlock()
	return l, nil
}

// untrack stops tracking l and declares it lost, without revoking it;
// it reports whether l was tracked.
func (c *Conn) untrack(l *lease) bool {
	c.mu.Lock()
	_, tracked := c.leases[l]
	delete(c.leases, l)
	c.shared = slices.DeleteFunc(c.shared, func(x *lease) bool { return x == l })
	c.mu.Unlock()
	l.markLost()
	return tracked
}

func (c *Conn) revokeAsync(l *lease, async bool) {
	c.untilDone(fmt.Sprintf("revoking lease %d", int64(l.id)), async, func(ctx context.Context) error {
		_, err := c.cli.Revoke(ctx, l.id)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return nil // gone already
		}
		return err
	})
}

// defaultCleanupTimeout bounds one attempt at a cleanup (delete, revoke).
const defaultCleanupTimeout = 2 * time.Second

// untilDone runs a cleanup op now (with async, in the background) and,
// if it fails, retries in the background until it succeeds, fails for
// good or the Conn closes (Close revokes every lease anyway): a stale key
// on the shared lease would block other lockers for the Conn's life.
func (c *Conn) untilDone(what string, async bool, op func(ctx context.Context) error) {
	if async {
		go func() { c.retry(c.ctx, what, op, c.attempt(c.ctx, what, op)) }()
		return
	}
	if err := c.attempt(c.ctx, what, op); err != nil && !c.isClosed() {
		c.log.Warn("cleanup failed; retrying in the background", "op", what, "err", err)
		go c.retry(c.ctx, what, op, err)
	}
}

// attempt runs op once, bounded by defaultCleanupTimeout; a refusal for
// good is logged and counts as done (nil).
func (c *Conn) attempt(ctx context.Context, what string, op func(ctx context.Context) error) error {
	actx, cancel := context.WithTimeout(ctx, defaultCleanupTimeout)
	defer cancel()
	err := op(actx)
	if isPermanent(err) {
		c.log.Warn("cleanup refused; not retrying", "op", what, "err", err)
		return nil
	}
	return err
}

// retry attempts op again after err (nil: done), 50 ms to 2 s apart,
// until it is done, ctx ends or the Conn closes.
func (c *Conn) retry(ctx context.Context, what string, op func(ctx context.Context) error, err error) {
	backoff := 50 * time.Millisecond
	for err != nil && !c.isClosed() && backendkit.Sleep(ctx, backoff) {
		err = c.attempt(ctx, what, op)
		backoff = min(2*backoff, 2*time.Second)
	}
}
