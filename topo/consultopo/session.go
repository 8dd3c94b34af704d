package consultopo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// Causes of a session's end (context.Cause of session.ctx).
var (
	// errSessionExpiredLocally: no renewal was acknowledged within the
	// safety margin (one TTL since the last acknowledged renewal was sent).
	errSessionExpiredLocally = errors.New("consul session not renewed within its TTL; given up before Consul can invalidate it")
	// errSessionGone: Consul says the session no longer exists (destroyed
	// by someone, or invalidated).
	errSessionGone = errors.New("consul session no longer exists")
	// errSessionDenied: the ACL token may not renew the session.
	errSessionDenied = errors.New("consul session renewal refused by ACL")
	// errSessionClosed: the Conn destroyed the session (Unlock of a lock's
	// own session, Close).
	errSessionClosed = errors.New("consul session destroyed by its connection")
)

// session is one Consul session created by a Conn, with the "delete"
// behaviour: when it ends, Consul deletes the keys it holds.
//
// The safety margin (docs/layout-consul.md): the session is valid for the
// holder only until its deadline, one TTL after the send time of the last
// renewal Consul acknowledged (or of the create request). Consul resets
// its TTL timer after that send time and invalidates an unrenewed session
// only after twice the TTL, then holds its keys for the lock-delay, so
// the deadline passes at least one TTL plus the lock-delay before anyone
// else can acquire. At the deadline (seen by a timer, or by alive first)
// the session is declared lost, without any request to Consul.
//
// Declaring it lost (markLost) ends every claim on it (claims.Session.Lost:
// Done closes, leadership contexts are cancelled) before ctx, which lost
// reads, ends: no one sees the session lost and a claim on it live.
type session struct {
	id  string
	ttl time.Duration
	own bool // carries a single lock; destroyed by its Unlock

	// view is the claims engine's view of the session.
	view *claims.Session

	// ctx ends, with one of the errSession* causes, when the session is
	// known or declared lost (or the Conn closed), once claims has ended.
	ctx      context.Context
	endCtx   context.CancelCauseFunc
	lostOnce sync.Once // markLost's

	mu       sync.Mutex
	deadline time.Time   // see the type's doc
	timer    *time.Timer // fires at deadline
}

// startSession makes the session id, whose create (or renewal) request
// was sent at sent, a session of the Conn: valid until sent+ttl, renewed in
// the background, its claims ended when the Conn closes. It returns Closed
// (and declares it lost) when the Conn is closed.
func (c *Conn) startSession(path, id string, ttl time.Duration, own bool, sent time.Time) (*session, error) {
	s := &session{id: id, ttl: ttl, own: own, deadline: sent.Add(ttl)}
	s.view = claims.NewSession(id, s)
	s.ctx, s.endCtx = context.WithCancelCause(context.Background())
	s.mu.Lock()
	s.timer = time.AfterFunc(time.Until(s.deadline), s.expire)
	s.mu.Unlock()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		s.markLost(errSessionClosed)
		return nil, topo.NewError(topo.Closed, path)
	}
	c.sessions[s] = struct{}{}
	c.wg.Add(1)
	c.mu.Unlock()
	go c.renew(s)
	return s, nil
}

// markLost declares the session lost with cause (the first call's cause
// wins): it ends every claim on the session, then ctx. When it returns,
// in every caller, every claim on the session has ended: concurrent calls
// wait for the first, and cancelling claims returns only once its
// children (the claims' contexts) are cancelled, even when the Conn's
// context is cancelling it at the same time.
func (s *session) markLost(cause error) {
	s.lostOnce.Do(func() {
		s.view.Lost()
		s.endCtx(cause)
	})
}

func (s *session) lost() bool { return s.ctx.Err() != nil }

// validUntil returns the session's deadline (see the type's doc).
func (s *session) validUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// alive reports whether the holder may still act on the session: it is not
// known lost and its deadline has not passed. A passed deadline declares
// the session lost at once (the timer may not have fired yet), so that a
// caller answering "lost" never leaves a claim on the session live.
func (s *session) alive() bool {
	if s.lost() {
		return false
	}
	if time.Now().Before(s.validUntil()) {
		return true
	}
	s.markLost(errSessionExpiredLocally)
	return false
}

// renewed moves the deadline to sent+TTL, sent being the send time of a
// renewal Consul acknowledged.
func (s *session) renewed(sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := sent.Add(s.ttl); d.After(s.deadline) {
		s.deadline = d
		s.timer.Reset(time.Until(d))
	}
}

// expire runs at the deadline timer: it declares the session lost unless a
// renewal moved the deadline meanwhile.
func (s *session) expire() {
	s.mu.Lock()
	left := time.Until(s.deadline)
	if left > 0 {
		s.timer.Reset(left)
	}
	s.mu.Unlock()
	if left <= 0 {
		s.markLost(errSessionExpiredLocally)
	}
}

// newSession creates a session with ttl and the Conn's lock-delay and
// starts renewing it in the background, independently of ctx (which bounds
// only the creation). It returns PermissionDenied when the ACL token may
// not create sessions.
func (c *Conn) newSession(ctx context.Context, path string, ttl time.Duration, own bool) (*session, error) {
	body := map[string]any{
		"Name":       "topokit",
		"TTL":        fmt.Sprintf("%ds", int64(ttl/time.Second)),
		"LockDelay":  c.opts.LockDelay.String(),
		"Behavior":   api.SessionBehaviorDelete,
		"NodeChecks": []string{},
	}
	var out struct{ ID string }
	sent := time.Now()
	if _, err := c.client.Raw().Write("/v1/session/create", body, &out, c.writeOptions(ctx)); err != nil {
		return nil, c.convertError(ctx, err, path)
	}
	s, err := c.startSession(path, out.ID, ttl, own, sent)
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		_, _ = c.client.Session().Destroy(out.ID, c.writeOptions(ctx))
	}
	return s, err
}

// renew renews s every half TTL, but at least every half of the Conn's
// SessionTTL, so that the end of a long-lived lock session (LockName's
// 24 h) is seen within seconds. Failed renewals are retried every second
// until the deadline timer declares the session lost; Consul saying the
// session is gone, or an ACL refusal, ends it at once. A session that
// ended but by the Conn's own destroy is forgotten and destroyed.
func (c *Conn) renew(s *session) {
	defer c.wg.Done()
	every := min(s.ttl, c.opts.SessionTTL) / 2
	t := time.NewTimer(every)
	defer t.Stop()
	defer func() {
		s.mu.Lock()
		s.timer.Stop()
		s.mu.Unlock()
	}()
	for {
		select {
		case <-s.ctx.Done():
			switch context.Cause(s.ctx) {
			case errSessionExpiredLocally, errSessionDenied:
				c.destroySession(c.ctx, s)
			default:
				c.forgetSession(s, nil)
			}
			return
		case <-t.C:
		}
		sent := time.Now()
		limit := sent.Add(requestTimeout)
		if d := s.validUntil(); d.Before(limit) {
			limit = d
		}
		ctx, cancel := context.WithDeadline(s.ctx, limit)
		entry, _, err := c.client.Session().Renew(s.id, c.writeOptions(ctx))
		cancel()
		switch {
		case s.ctx.Err() != nil:
		case err == nil && entry == nil:
			s.markLost(errSessionGone)
		case isPermanent(err):
			s.markLost(errSessionDenied)
		case err != nil:
			t.Reset(time.Second)
		default:
			s.renewed(sent)
			t.Reset(every)
		}
	}
}

// forgetSession marks s lost (with cause, or errSessionClosed when nil) and
// drops it from the Conn.
func (c *Conn) forgetSession(s *session, cause error) {
	if cause == nil {
		cause = errSessionClosed
	}
	s.markLost(cause)
	c.mu.Lock()
	delete(c.sessions, s)
	if c.shared == s {
		c.shared = nil
	}
	c.mu.Unlock()
}

// destroySession forgets s and destroys it in Consul (best effort, for at
// most requestTimeout within parent), which deletes the keys it holds.
func (c *Conn) destroySession(parent context.Context, s *session) {
	c.forgetSession(s, nil)
	ctx, cancel := context.WithTimeout(parent, requestTimeout)
	defer cancel()
	if _, err := c.client.Session().Destroy(s.id, c.writeOptions(ctx)); err != nil {
		slog.Debug("consultopo: destroying a session", "session", s.id, "err", err)
	}
}

// currentShared returns the Conn's long-lived session, nil when it has
// none now.
func (c *Conn) currentShared() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shared
}

// sessionFor returns the session a lock with ttl uses: the Conn's shared
// long-lived session for the Conn's SessionTTL (created on first use, and
// again after it is lost), otherwise a new session of its own.
func (c *Conn) sessionFor(ctx context.Context, path string, ttl time.Duration) (*session, error) {
	if ttl != c.opts.SessionTTL {
		return c.newSession(ctx, path, ttl, true)
	}
	c.sessionMu.Lock()
	defer c.sessionMu.Unlock()
	if s := c.currentShared(); s != nil && s.alive() {
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
