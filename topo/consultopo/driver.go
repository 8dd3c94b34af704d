package consultopo

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// driver is the claims engine's view of a Conn's Consul store. A queue
// entry's token is its CreateIndex. The store key decides who holds:
// Create takes it when free and nobody queues, else the queue's head in
// Acquire; a granted entry's token is the key's ModifyIndex at the
// acquire.
type driver struct{ c *Conn }

var (
	_ claims.Driver   = driver{}
	_ claims.Aheader  = driver{}
	_ claims.Acquirer = driver{}
	_ claims.Monitor  = driver{}
)

// storeKey returns q's key: <dir>/Lock, or elections/<name>.
func (d driver) storeKey(q claims.Queue) string {
	if q.Election {
		return d.c.key(backendkit.JoinPath(electionsDir, q.Path))
	}
	return d.c.dirPrefix(q.Path) + lockName
}

// grantedKey is the Entry.Key of a granted entry: the store key, a NUL
// (which no Consul key holds) and the acquire's LockIndex (for ResumeInfo,
// which older releases check).
func grantedKey(key string, lockIndex uint64) string {
	return key + "\x00" + strconv.FormatUint(lockIndex, 10)
}

// splitGranted returns the store key and LockIndex of a granted entry.
func splitGranted(e claims.Entry) (string, uint64) {
	key, idx, _ := strings.Cut(e.Key, "\x00")
	n, _ := strconv.ParseUint(idx, 10, 64)
	return key, n
}

// grantedEntry is the entry of a key pair acquired by sessionID (a lock
// result carries no value: contents).
func grantedEntry(pair *api.KVPair, sessionID, contents string) claims.Entry {
	return claims.Entry{Token: int64(pair.ModifyIndex), Key: grantedKey(pair.Key, pair.LockIndex),
		Session: sessionID, Contents: contents, Granted: true}
}

// sessionOf returns the consultopo session behind an engine session.
func sessionOf(v *claims.Session) *session {
	s, _ := v.Ref().(*session)
	return s
}

// Create implements claims.Driver: requireFiles (with RequireFiles), the
// session, then take, unless this Conn recently found the key contended
// (Exclusive always takes); else, or on errMustQueue, enqueue.
func (d driver) Create(ctx context.Context, q claims.Queue, contents string, opts claims.CreateOptions) (claims.Entry, *claims.Session, error) {
	c := d.c
	if q.Election && len(opts.Value) > maxTxnValue {
		return claims.Entry{}, nil, errLeaderValueSize(q.Path)
	}
	if opts.RequireFiles {
		if err := c.requireFiles(ctx, q.Path); err != nil {
			return claims.Entry{}, nil, err
		}
	}
	ttl := c.opts.SessionTTL
	switch {
	case q.Election:
	case opts.TTL > 0:
		ttl = c.opts.clampTTL(opts.TTL)
	case !opts.RequireFiles: // LockName
		ttl = MaxSessionTTL
	}
	key := d.storeKey(q)
	for attempt := 0; ; attempt++ {
		sess, err := c.sessionFor(ctx, q.Path, ttl)
		if err != nil {
			return claims.Entry{}, nil, err
		}
		fail := func(err error) (claims.Entry, *claims.Session, error) {
			if sess.own {
				c.destroySession(context.Background(), sess)
			}
			return claims.Entry{}, nil, err
		}
		if opts.Exclusive || !c.contended.has(key) {
			e, err := d.take(ctx, q, key, contents, opts, sess)
			switch {
			case err == nil:
				return e, sess.view, nil
			case errors.Is(err, errSessionGone) && attempt < 3:
				// A shared session that expired while idle: a new one.
				c.forgetSession(sess, errSessionGone)
				continue
			case !errors.Is(err, errMustQueue):
				return fail(err)
			}
			c.contended.set(key, true)
		}
		// The entry lives on the long-lived session (see the package doc).
		qsess := sess
		if sess.own {
			if qsess, err = c.sessionFor(ctx, q.Path, c.opts.SessionTTL); err != nil {
				return fail(err)
			}
		}
		e, err := d.enqueue(ctx, q, key, contents, opts.Value, qsess)
		if errors.Is(err, errSessionGone) && attempt < 3 {
			c.forgetSession(qsess, errSessionGone)
			if qsess != sess {
				c.destroySession(context.Background(), sess)
			}
			continue
		}
		if err != nil {
			return fail(err)
		}
		return e, sess.view, nil
	}
}

// requireFiles returns nil when dir has entries other than its lock key
// and queue, or a <dir>/Lock that is not a lock (for the ForeignKeyError);
// else backendkit.LockNeedsFiles' error. It reads consistently.
func (c *Conn) requireFiles(ctx context.Context, dir string) error {
	prefix := c.dirPrefix(dir)
	keys, _, err := c.kv.Keys(prefix, "/", c.consistentOptions(ctx))
	if err != nil {
		return c.convertError(ctx, err, dir)
	}
	lockKey := false
	for _, k := range keys {
		switch {
		case k == prefix:
		case k == prefix+lockName:
			lockKey = true
		case k == prefix+valuesDir+"/": // the lock's queue
		case strings.HasPrefix(k, prefix):
			return nil
		}
	}
	if lockKey {
		pair, _, err := c.kv.Get(prefix+lockName, c.consistentOptions(ctx))
		switch {
		case err != nil:
			return c.convertError(ctx, err, dir)
		case pair != nil && !isLockPair(pair):
			return nil
		}
	}
	isFile := false
	if dir != "" {
		_, _, gerr := c.Get(ctx, dir)
		isFile = gerr == nil
	}
	return backendkit.LockNeedsFiles(dir, isFile)
}

// Delete implements claims.Driver: deleteKey (after awaitTailDrop; on
// ErrNotHeld, freeOverwritten) or deleteEntry, then the destroy of a
// claim's own session.
func (d driver) Delete(ctx context.Context, q claims.Queue, v *claims.Session, e claims.Entry) error {
	c := d.c
	sess := sessionOf(v)
	var err error
	if e.Granted {
		key, _ := splitGranted(e)
		c.awaitTailDrop(ctx, uint64(e.Token))
		err = c.deleteKey(ctx, q, key, uint64(e.Token), sess, tailOf(d.queuePrefix(q)))
		if err == claims.ErrNotHeld {
			c.freeOverwritten(q, key, uint64(e.Token), sess)
		}
	} else {
		c.setWaiter(e.Key, nil)
		err = c.deleteEntry(ctx, q.Path, e.Key, e.Session)
	}
	if err != nil && err != claims.ErrNotHeld {
		return err
	}
	if sess.own {
		c.destroySession(context.Background(), sess)
	}
	return err
}

// deleteKey deletes the key of q (with an election's value key) in one
// transaction checking that sess holds it and that it is still at token
// (delete-cas), so that a key acquired or written since is never deleted;
// ErrNotHeld when not. With a tail ("" for none) it reads the tail key
// too, unless the key is marked contended already: a tail means others
// queue, so the key is marked contended and the Conn's next contender
// queues rather than take the key in the gap before the head's acquire,
// naming a holder nobody was granted (TestReleaseThenRetryQueues). A
// release is on the path of every handover: it carries no operation the
// outcome does not need (each one costs the agent 20-35 µs of CPU).
func (c *Conn) deleteKey(ctx context.Context, q claims.Queue, key string, token uint64, sess *session, tail string) error {
	// The index alone does not prove the key is the claim's: an agent
	// that lost its state counts indexes again, and another's acquire can
	// land at the token (TestStaleUnlockAcrossIndexReuse). A delete-cas
	// of an absent key succeeds; the session check refuses that first.
	ops := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: key, Session: sess.id}},
		{KV: &api.KVTxnOp{Verb: api.KVDeleteCAS, Key: key, Index: token}},
	}
	if q.Election {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: valueKey(key, sess.id)}})
	}
	if tail != "" && c.contended.has(key) {
		tail = "" // marked already
	}
	if tail != "" {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: tail}})
	}
	resp, err := c.checkedTxn(ctx, q.Path, ops)
	if err == nil || err == claims.ErrNotHeld {
		c.grants.set(token, false)
	}
	if err == nil && tail != "" && slices.ContainsFunc(resp.Results, func(r *api.TxnResult) bool {
		return r.KV != nil && r.KV.Key == tail
	}) {
		c.contended.set(key, true)
	}
	return err
}

// claimOps is a check that key is at index, then op on it, and for an
// election the deletion of sess's value key.
func claimOps(key string, index uint64, op *api.KVTxnOp, election bool, sess *session) api.TxnOps {
	ops := api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: key, Index: index}}, {KV: op}}
	if election {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: valueKey(key, sess.id)}})
	}
	return ops
}

// freeOverwritten frees a claim's key that another tool's PUT rewrote,
// which keeps sess on it (docs/layout-consul.md): while a consistent read
// shows it bound to sess, not re-created since token and at an index no
// claim of the Conn acquired (so still the claim's: no acquire takes a
// key its own session holds), one transaction checking that index unlocks
// it, keeping the value, with the lock flags. Retried until sess ends.
func (c *Conn) freeOverwritten(q claims.Queue, key string, token uint64, sess *session) {
	c.retry(sess, key, func() bool {
		ctx, cancel := context.WithTimeout(sess.ctx, requestTimeout)
		defer cancel()
		for {
			pair, _, err := c.kv.Get(key, c.consistentOptions(ctx))
			if err != nil {
				return sess.lost()
			}
			if pair == nil || pair.Session != sess.id || pair.CreateIndex > token ||
				pair.ModifyIndex <= token || c.grants.has(pair.ModifyIndex) {
				return true
			}
			unlock := &api.KVTxnOp{Verb: api.KVUnlock, Key: key, Value: pair.Value, Flags: api.LockFlagValue, Session: sess.id}
			ok, resp, err := c.txn(ctx, claimOps(key, pair.ModifyIndex, unlock, q.Election, sess))
			switch {
			case err != nil:
				return sess.lost()
			case !ok && classifyRollback(resp) == rollbackStale:
				continue // written again since the read
			}
			return true
		}
	})
}

// deleteEntry deletes the queue entry key if the session sessionID holds
// it (else ErrNotHeld), then the tail key if it names the entry.
func (c *Conn) deleteEntry(ctx context.Context, path, key, sessionID string) error {
	resp, err := c.checkedTxn(ctx, path, api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: key, Session: sessionID}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: key}},
		{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: tailOf(key)}},
	})
	if err == nil {
		if tail := namedTail(key, resp); tail != nil {
			c.dropTail(ctx, tail)
		}
	}
	return err
}

// checkedTxn runs ops, a session's write whose first is a check of its
// claim: ErrNotHeld when the check fails, and when the session is gone in
// Consul: unknown to the agent (errSessionGone), or invalidated (a
// lock-delay: ops lock only keys the session alone locks).
func (c *Conn) checkedTxn(ctx context.Context, path string, ops api.TxnOps) (*api.TxnResponse, error) {
	ok, resp, err := c.txn(ctx, ops)
	switch {
	case errors.Is(err, errSessionGone):
		return nil, claims.ErrNotHeld
	case err != nil || ok:
		return resp, err
	}
	switch classifyRollback(resp) {
	case rollbackStale, rollbackMissing, rollbackNotHeld, rollbackLockDelay:
		return nil, claims.ErrNotHeld
	}
	return nil, rollbackError(path, resp)
}

// Held implements claims.Driver: the session is alive and holds is true
// of a consistent read bounded by its deadline. A failed read is an
// error (Unavailable, PermissionDenied), not a loss.
func (d driver) Held(ctx context.Context, q claims.Queue, v *claims.Session, e claims.Entry) (bool, error) {
	sess := sessionOf(v)
	if !e.Granted || !sess.alive() {
		return false, nil
	}
	key, _ := splitGranted(e)
	rctx, cancel := context.WithDeadline(ctx, sess.validUntil())
	defer cancel()
	pair, _, err := d.c.kv.Get(key, d.c.consistentOptions(rctx))
	switch {
	case !sess.alive():
		return false, nil
	case err != nil:
		return false, err
	}
	return holds(pair, sess.id, e.Token), nil
}

// holds reports whether pair is still the acquire at token by sessionID:
// no topokit request writes a held key, so it keeps that ModifyIndex.
func holds(pair *api.KVPair, sessionID string, token int64) bool {
	return pair != nil && pair.Session == sessionID && int64(pair.ModifyIndex) == token
}

// MapError implements claims.Driver: convertError (a session Consul no
// longer knows is Unavailable, as any error it does not name).
func (d driver) MapError(ctx context.Context, err error, path string) error {
	return d.c.convertError(ctx, err, path)
}
