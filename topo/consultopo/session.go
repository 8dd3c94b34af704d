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

// Causes of a session's end (context.Cause of session.ctx); errSessionGone
// is also txn's error for a session Consul refused as unknown.
var (
	errSessionExpiredLocally = errors.New("consul session not renewed within its TTL; given up before Consul can invalidate it")
	errSessionGone           = errors.New("consul session no longer exists")
	errSessionDenied         = errors.New("consul session renewal refused by ACL")
	errSessionClosed         = errors.New("consul session destroyed by its connection")
)

// session is one Consul session of a Conn ("delete" behaviour).
//
// It is valid for the holder until its deadline, one TTL after the send
// time of the last renewal Consul acknowledged (or of the create). Consul
// resets its timer after that time, invalidates an unrenewed session only
// after twice the TTL, then keeps its keys for the lock-delay, so the
// deadline passes at least a TTL plus the lock-delay before anyone else
// can acquire (docs/layout-consul.md). At the deadline the session is
// declared lost (markLost), without a request.
type session struct {
	id   string
	ttl  time.Duration
	own  bool            // carries a single claim; destroyed by its release
	view *claims.Session // the claims engine's view

	// ctx ends, with an errSession* cause, once the session's claims ended.
	ctx      context.Context
	endCtx   context.CancelCauseFunc
	lostOnce sync.Once // markLost's

	mu       sync.Mutex
	deadline time.Time
	timer    *time.Timer // fires at deadline
}

// startSession makes the session id, created or renewed at sent, the
// Conn's, renewed in the background; Closed after Close.
func (c *Conn) startSession(path, id string, ttl time.Duration, own bool, sent time.Time) (*session, error) {
	s := &session{id: id, ttl: ttl, own: own, deadline: sent.Add(ttl)}
	s.view = claims.NewSession(id, s)
	s.ctx, s.endCtx = context.WithCancelCause(context.Background())
	s.mu.Lock()
	s.timer = time.AfterFunc(time.Until(s.deadline), s.expire)
	s.mu.Unlock()
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		s.markLost(errSessionClosed)
		return nil, topo.NewError(topo.Closed, path)
	}
	c.sessions[s] = struct{}{}
	c.wg.Go(func() { c.renew(s) })
	c.mu.Unlock()
	return s, nil
}

// markLost declares the session lost with cause (the first call's wins):
// it ends every claim on it, then ctx. When it returns, in every caller,
// every claim on the session has ended (concurrent calls wait for the
// first, and Lost returns once the claims' contexts are cancelled).
func (s *session) markLost(cause error) {
	s.lostOnce.Do(func() {
		s.view.Lost()
		s.endCtx(cause)
	})
}

func (s *session) lost() bool { return s.ctx.Err() != nil }

// validUntil returns the session's deadline.
func (s *session) validUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// alive reports whether the holder may still act on the session. A
// passed deadline declares it lost at once (before the timer may), so
// that a caller answering "lost" never leaves a claim on it live.
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

// renewed moves the deadline to sent+TTL after an acknowledged renewal.
func (s *session) renewed(sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := sent.Add(s.ttl); d.After(s.deadline) {
		s.deadline = d
		s.timer.Reset(time.Until(d))
	}
}

// expire runs at the deadline timer: lost, unless a renewal moved it.
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

// newSession creates a session with ttl and the Conn's lock-delay, renewed
// in the background (ctx bounds only the creation). PermissionDenied when
// the ACL token may not create sessions.
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

// renew renews s every half TTL, at least every half SessionTTL (so that
// the end of LockName's 24 h session is seen within seconds), retrying
// failures every second until the deadline. Consul saying the session is
// gone, or an ACL refusal, ends it at once. A session that expired
// locally or was refused is destroyed.
func (c *Conn) renew(s *session) {
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
				c.forgetSession(s, errSessionClosed)
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

// forgetSession marks s lost with cause and drops it.
func (c *Conn) forgetSession(s *session, cause error) {
	s.markLost(cause)
	c.mu.Lock()
	delete(c.sessions, s)
	if c.shared == s {
		c.shared = nil
	}
	c.mu.Unlock()
}

// destroySession forgets s and destroys it in Consul (best effort).
func (c *Conn) destroySession(parent context.Context, s *session) {
	c.forgetSession(s, errSessionClosed)
	ctx, cancel := context.WithTimeout(parent, requestTimeout)
	defer cancel()
	if _, err := c.client.Session().Destroy(s.id, c.writeOptions(ctx)); err != nil {
		slog.Debug("consultopo: destroying a session", "session", s.id, "err", err)
	}
}

// currentShared returns the Conn's long-lived session, or nil.
func (c *Conn) currentShared() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shared
}

// sessionFor returns the session of a claim with ttl: for SessionTTL the
// long-lived one (created when there is none alive), else a new one.
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
