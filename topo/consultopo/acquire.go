package consultopo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

const (
	// requestTimeout bounds the store requests that run detached from the
	// caller's context: lock acquisitions finished after the caller gave
	// up, releases, session renewals and destroys.
	requestTimeout = 10 * time.Second
	// maxRetryWait caps the backoff between retries of a lock acquisition
	// refused by a lock-delay.
	maxRetryWait = 500 * time.Millisecond
)

var (
	// errInvalidSession reports that Consul no longer knows the session a
	// lock was being acquired with.
	errInvalidSession = errors.New("consul session no longer exists")
	// errWaiterSessionLost reports that the session of a locker that was
	// waiting for the key ended during the wait.
	errWaiterSessionLost = errors.New("the waiting locker's consul session ended")
)

// ForeignKeyError is the cause of the NodeExists error that Lock, TryLock,
// LockWithTTL, LockName and WaitForLeadership return when the key their
// lock or election lives in (<dir>/Lock, elections/<name>) holds a value
// another tool wrote: no session holds it and it lacks the lock flags
// (api.LockFlagValue). topokit never takes such a key over, overwrites or
// deletes it; List reports it with backendkit.ReservedFiles. Remove it with
// another tool to use the lock.
type ForeignKeyError struct {
	// Key is the full Consul KV key (with the Conn's root).
	Key string
}

// Error names the key.
func (e *ForeignKeyError) Error() string {
	return fmt.Sprintf("consul key %q holds a value that is not a lock (no session, no lock flags), written by another tool; it is left alone", e.Key)
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
	// valueKey, for an election, is the key of the candidate's published
	// value (see valueKeyFor): the acquire transaction writes it (publish)
	// or deletes it (no value) after the lock operation, so that the leader
	// is never seen without its value nor with an older one, and every undo
	// of the acquire deletes it with the election key.
	valueKey  func(sessionID string) string
	publish   bool
	published []byte // the value written with publish
	// queue is the prefix of the contenders' queue beside key (see
	// queue.go).
	queue string
	// fast makes acquire try once, without an entry, to take a free key:
	// errMustQueue when the key is not free or others queue.
	fast bool
	// entry is the key of the caller's queue entry, once it heads the
	// queue: the acquire transaction deletes it.
	entry string
}

// undo deletes what an acquire of spec by sess may have written: the key
// if sess holds it, and the value key of an election (best effort,
// detached from any caller's context).
func (c *Conn) undo(spec lockSpec, sess *session) {
	if spec.valueKey == nil {
		c.deleteIfHeld(spec.key, sess)
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
	defer cancel()
	cond := &api.KVTxnOp{Verb: api.KVCheckSession, Key: spec.key, Session: sess.id}
	if err := c.releaseElection(ctx, cond, spec.key, spec.valueKey(sess.id), sess); err != nil {
		slog.Debug("consultopo: undoing an election acquisition", "key", spec.key, "err", err)
	}
}

// releaseElection deletes an election key together with the value key
// beside it, in one transaction whose first operation, cond, checks that
// the key is still the caller's (check-session by sess while an acquire is
// undone, check-index on the term's token when a term ends), so that a
// leader is never seen without its value and a released leader never with
// one. When cond fails, the value key alone is deleted if sess holds it.
// Only the holder of the Conn's local claim on the election calls it, and
// only that holder writes the value key of its session, so it deletes
// nothing another participant wrote.
func (c *Conn) releaseElection(ctx context.Context, cond *api.KVTxnOp, key, valueKey string, sess *session) error {
	ok, _, err := c.txn(ctx, api.TxnOps{
		{KV: cond},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: key}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: valueKey}},
	})
	if err != nil || ok {
		return err
	}
	_, _, err = c.releaseKey(ctx, valueKey, sess)
	return err
}

// held is a lock key acquired by a session.
type held struct {
	cl        *claim
	sess      *session
	lockIndex uint64 // the key's LockIndex after the acquire
	// token is the key's ModifyIndex after the acquire: the Raft index of
	// the acquiring transaction, the claim's fencing token. Nothing writes
	// a held key (an acquire by the same session unlocks and locks it
	// again, see acquire), so while the claim lasts the key keeps it.
	token uint64
	// waited reports that the acquire waited (in the queue, or for the
	// key).
	waited bool
}

// holds reports whether pair, the lock key as a read returned it, is still
// the key h acquired: held by h's session, with the LockIndex and the
// ModifyIndex of the acquire.
func (h held) holds(pair *api.KVPair) bool {
	return pair != nil && pair.Session == h.sess.id && pair.LockIndex == h.lockIndex && pair.ModifyIndex == h.token
}

// lock claims spec.key locally and acquires it in Consul with a session of
// spec.ttl, waiting in the key's queue (see queue.go), then, at its head,
// with blocking queries while another session holds the key (or failing
// with NodeExists under try). On success the claim stays held. On failure
// everything taken is released, the queue entry included. A waiter whose
// session ends while it waits fails with LockLost.
func (c *Conn) lock(ctx context.Context, spec lockSpec) (held, error) {
	wctx, cancel := c.callCtx(ctx)
	defer cancel()
	spec.entry, spec.fast = "", false
	for attempt := 0; ; attempt++ {
		sess, err := c.sessionFor(wctx, spec.path, spec.ttl)
		if err != nil {
			return held{}, c.waitError(ctx, err, spec.path)
		}
		// fail ends the call with err: an own session is destroyed (which
		// also deletes a queue entry on it) unless a background undo owns it.
		fail := func(err error, handedOff bool) (held, error) {
			if !handedOff && sess.own {
				c.destroySession(sess)
			}
			return held{}, c.waitError(ctx, err, spec.path)
		}
		if spec.try || !c.isContended(spec.key) {
			// Take a free key at once, unless others queue for it.
			fspec := spec
			fspec.fast = !spec.try
			h, handedOff, err := c.lockOn(wctx, fspec, sess, nil, nil, nil)
			switch {
			case err == nil:
				return h, nil
			case errors.Is(err, errInvalidSession) && attempt < 3:
				// The session ended before this call could wait on it (for
				// example a shared session that expired while idle): retry
				// with a new one.
				c.forgetSession(sess, errSessionGone)
				continue
			case !errors.Is(err, errMustQueue):
				return fail(err, handedOff)
			case spec.try:
				return fail(backendkit.Wrap(topo.NodeExists, spec.path, errors.New("other contenders queue for the lock")), false)
			}
			c.setContended(spec.key, true)
		}
		// The queue entry lives on the Conn's shared session even for a
		// lock with a session of its own: an entry on LockName's 24 h
		// session would outlive a crashed waiter, and block the queue, for
		// up to twice that TTL; the shared session's TTL bounds it.
		qsess := sess
		if sess.own {
			qsess, err = c.sessionFor(wctx, spec.path, c.opts.SessionTTL)
			if err != nil {
				return fail(err, false)
			}
		}
		entry, pred, err := c.enqueue(wctx, spec, qsess)
		switch {
		case errors.Is(err, errInvalidSession) && attempt < 3:
			c.forgetSession(qsess, errSessionGone)
			if qsess != sess {
				c.destroySession(sess)
			}
			continue
		case err != nil:
			return fail(err, false)
		case pred != nil:
			c.setContended(spec.key, true)
		}
		qspec := spec
		qspec.entry = entry.Key
		h, handedOff, err := c.lockOn(wctx, qspec, sess, qsess, entry, pred)
		if err != nil {
			c.dropEntry(entry.Key, qsess)
			return fail(err, handedOff)
		}
		if pred == nil && !h.waited {
			// Nobody queued before us and the key was free: the next
			// contender of this Conn may try it at once again.
			c.setContended(spec.key, false)
		}
		return h, nil
	}
}

// lockOn waits, when queued (entry not nil, on session qsess), for the
// turn of entry behind pred, then claims spec.key locally and acquires it for sess. Unqueued, it
// fails with errMustQueue (spec.fast) or NodeExists (spec.try) when another
// locker of the Conn holds the local claim. On failure the claim is
// released unless handedOff (see acquire).
func (c *Conn) lockOn(ctx context.Context, spec lockSpec, sess, qsess *session, entry, pred *api.KVPair) (h held, handedOff bool, err error) {
	queued := entry != nil
	if queued {
		if err := c.waitTurn(ctx, spec, sess, qsess, entry, pred); err != nil {
			return held{}, false, err
		}
	}
	cl, err := c.claimKey(ctx, spec.path, spec.key, !queued)
	if err != nil {
		if spec.fast && topo.IsErrType(err, topo.NodeExists) {
			err = errMustQueue
		}
		return held{}, false, err
	}
	got, waited, handedOff, err := c.acquire(ctx, spec, sess, cl, queued)
	if err != nil {
		if !handedOff {
			c.releaseClaim(cl)
		}
		return held{}, handedOff, err
	}
	cl.sess.Store(sess)
	return held{cl: cl, sess: sess, lockIndex: got.LockIndex, token: got.ModifyIndex, waited: waited}, false, nil
}

// waitError turns an error from a wait under a merged context into the
// caller's error: ctx's own Timeout/Interrupted, Closed when the Conn
// closed, LockLost for a waiter whose session ended, or err itself
// converted.
func (c *Conn) waitError(ctx context.Context, err error, path string) error {
	switch {
	case ctx.Err() != nil:
		return backendkit.FromContext(ctx, path)
	case c.ctx.Err() != nil:
		return topo.NewError(topo.Closed, path)
	case errors.Is(err, errWaiterSessionLost):
		return backendkit.Wrap(topo.LockLost, path, err)
	case errors.Is(err, errInvalidSession):
		return backendkit.Wrap(topo.Unavailable, path, err)
	}
	return c.convertError(ctx, err, path)
}

// acquire takes spec.key for sess: it reads the key (consistently) and
// acquires it with a transaction conditioned on what it read, so that a
// key that changed in between is never taken over (the first attempt skips
// the read and assumes the key absent):
//
//   - absent: check-not-exists, then lock;
//   - a lock key no session holds (lock flags, e.g. released by the api
//     package's Lock): check-index, then lock;
//   - a lock key sess itself holds (an earlier acquire whose release
//     failed): check-index, unlock, then lock, so that the acquire writes
//     the key (a lock by the session that holds the key, with the same
//     value, changes nothing in Consul and keeps its ModifyIndex, which
//     would hand the new claim the old claim's fencing token);
//   - a value without lock flags that no session holds (written by
//     another tool): NodeExists with a ForeignKeyError, nothing written;
//   - held by another session: NodeExists under try, else a blocking
//     query until the key changes, then again.
//
// A lock-delay refusal is retried with a backoff (under try for at most
// the Conn's lock-delay plus a second). It returns the key as the lock
// operation left it (its LockIndex and ModifyIndex). handedOff reports that an acquire request was still in
// flight when ctx ended: a background goroutine then finishes it, undoes
// it, and releases the claim (and an own session). The wait also ends when
// sess ends: errWaiterSessionLost once this call has waited on the key,
// errInvalidSession before.
//
// Fencing tokens: the token of an acquire is the ModifyIndex its lock
// operation gives the key, the Raft index of the acquiring transaction
// (the lock operation always writes the key: a new key, a LockIndex one
// higher, or the unlock before it). Raft indexes only grow, across leader
// changes and restarts of servers that keep their data. A later holder's
// acquire can only commit once the earlier holder's claim ended (the key
// deleted by its release or session end, or unlocked), which is a later
// Raft entry than the earlier acquire; so its transaction, and its token,
// come later: strictly greater. TryLock and elections acquire the same way.
func (c *Conn) acquire(ctx context.Context, spec lockSpec, sess *session, cl *claim, queued bool) (got *api.KVPair, waited, handedOff bool, err error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(sess.ctx, cancel)
	defer stop()
	waited = queued
	sessionEnded := func(err error) error {
		if ctx.Err() == nil && c.ctx.Err() == nil && (sess.lost() || errors.Is(err, errInvalidSession)) {
			if waited {
				return errWaiterSessionLost
			}
			return errInvalidSession
		}
		return err
	}
	wait := 10 * time.Millisecond
	var delayUntil time.Time
	// The first attempt assumes the key is absent (Unlock deletes it), so
	// that an uncontended lock takes one round trip; check-not-exists makes
	// that assumption atomic.
	optimistic := true
	// seen is the key as a blocking query returned it: the next condition
	// is built on it without another read (the transaction's condition
	// makes a stale view roll back, never take the key over).
	var seen *api.KVPair
	var seenMeta *api.QueryMeta
	for {
		var cur *api.KVPair
		meta := &api.QueryMeta{}
		switch {
		case optimistic:
		case seenMeta != nil:
			cur, meta = seen, seenMeta
		default:
			cur, meta, err = c.kv.Get(spec.key, c.consistentOptions(actx))
			if err != nil {
				return nil, waited, false, sessionEnded(err)
			}
		}
		optimistic, seen, seenMeta = false, nil, nil
		var cond *api.KVTxnOp
		relock := false
		switch {
		case cur == nil:
			cond = &api.KVTxnOp{Verb: api.KVCheckNotExists, Key: spec.key}
		case cur.Session == "" && cur.Flags != api.LockFlagValue:
			return nil, waited, false, backendkit.Wrap(topo.NodeExists, spec.path, &ForeignKeyError{Key: spec.key})
		case cur.Session == "" || cur.Session == sess.id:
			cond = &api.KVTxnOp{Verb: api.KVCheckIndex, Key: spec.key, Index: cur.ModifyIndex}
			relock = cur.Session == sess.id
		case spec.try:
			return nil, waited, false, backendkit.LockHeld(spec.path, cur.Value, cur.Session)
		default:
			// Held by another session: block until the key changes.
			waited = true
			seen, seenMeta, err = c.kv.Get(spec.key, c.consistentBlocking(actx, meta.LastIndex))
			if err != nil {
				return nil, waited, false, sessionEnded(err)
			}
			if seenMeta.LastIndex < meta.LastIndex {
				// The store's index went back (a restarted dev agent): read
				// afresh rather than wait on a stale index.
				seen, seenMeta = nil, nil
			}
			continue
		}
		ok, resp, handedOff, err := c.acquireOnce(actx, spec, cond, relock, sess, cl)
		switch {
		case handedOff:
			return nil, waited, true, sessionEnded(err)
		case err != nil:
			return nil, waited, false, sessionEnded(err)
		case ok && (spec.fast || spec.try) && queueBusy(resp, spec.queue):
			// Others queue for the key (we took it in a release's gap):
			// give it back at once.
			c.undo(spec, sess)
			if spec.try {
				return nil, waited, false, backendkit.Wrap(topo.NodeExists, spec.path, errors.New("other contenders queue for the lock"))
			}
			return nil, waited, false, errMustQueue
		case ok:
			// check-not-exists reports no result; the lock's is the last
			// one of the key (a value key's or the queue's may follow).
			if kv := lockResult(resp, spec.key); kv != nil {
				return kv, waited, false, nil
			}
			c.undo(spec, sess)
			return nil, waited, false, backendkit.Wrap(topo.Unavailable, spec.path, errors.New("lock transaction returned no result"))
		}
		rb := classifyRollback(resp)
		if spec.fast && rb != rollbackBadSession && rb != rollbackDenied && rb != rollbackUnknown {
			// Not free: queue.
			return nil, waited, false, errMustQueue
		}
		switch rb {
		case rollbackStale, rollbackMissing, rollbackExists, rollbackHeld:
			// The key changed since it was read: look again.
		case rollbackLockDelay:
			// A lock-delay left by an invalidated session is in effect.
			if spec.try {
				if delayUntil.IsZero() {
					delayUntil = time.Now().Add(c.opts.LockDelay + time.Second)
				} else if time.Now().After(delayUntil) {
					return nil, waited, false, backendkit.Wrap(topo.NodeExists, spec.path, errors.New("a lock-delay is in effect"))
				}
			}
			if !sleepCtx(actx, wait) {
				return nil, waited, false, sessionEnded(actx.Err())
			}
			wait = min(2*wait, maxRetryWait)
		case rollbackBadSession:
			return nil, waited, false, sessionEnded(errInvalidSession)
		default:
			return nil, waited, false, rollbackError(spec.path, resp)
		}
	}
}

// acquireOnce sends one acquire transaction: cond, then (with relock, for
// a key sess holds) an unlock, then lock spec.key for sess with spec.value
// and the lock flags. When ctx can end, the request
// runs in a goroutine under a context of its own so that a caller giving up
// never leaves the key silently held: the goroutine undoes a request that
// may have succeeded. ok=false with resp is a rollback.
func (c *Conn) acquireOnce(ctx context.Context, spec lockSpec, cond *api.KVTxnOp, relock bool, sess *session, cl *claim) (ok bool, resp *api.TxnResponse, handedOff bool, err error) {
	ops := api.TxnOps{{KV: cond}}
	if relock {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVUnlock, Key: spec.key, Value: spec.value, Flags: api.LockFlagValue, Session: sess.id}})
	}
	ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVLock, Key: spec.key, Value: spec.value, Flags: api.LockFlagValue, Session: sess.id}})
	if spec.valueKey != nil {
		ops = append(ops, valueOp(spec.valueKey(sess.id), spec.published, spec.publish, sess))
	}
	if spec.entry != "" {
		// The head of the queue leaves it as it acquires, which wakes the
		// next waiter.
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: spec.entry}})
	}
	if spec.fast || spec.try {
		// Read the queue: a contender that did not queue gives the key
		// back when others do.
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: spec.queue}})
	}
	if ctx.Done() == nil || !spec.detach {
		rctx, cancel := context.WithTimeout(sess.ctx, requestTimeout)
		defer cancel()
		ok, resp, err := c.txn(rctx, ops)
		if err == nil && ctx.Err() != nil && ok {
			c.undo(spec, sess)
			return false, nil, false, ctx.Err()
		}
		return ok, resp, false, c.acquireError(spec, sess, err)
	}
	type result struct {
		ok   bool
		resp *api.TxnResponse
		err  error
	}
	done := make(chan result, 1)
	rctx, cancel := context.WithTimeout(sess.ctx, requestTimeout)
	go func() {
		ok, resp, err := c.txn(rctx, ops)
		cancel()
		done <- result{ok, resp, err}
	}()
	select {
	case r := <-done:
		return r.ok, r.resp, false, c.acquireError(spec, sess, r.err)
	case <-ctx.Done():
	}
	c.spawn(func() {
		if r := <-done; r.ok || r.err != nil {
			c.undo(spec, sess)
		}
		if sess.own {
			c.destroySession(sess)
		}
		c.releaseClaim(cl)
	})
	return false, nil, true, ctx.Err()
}

// acquireError classifies a failed acquire request. A request that may
// have reached the store is undone.
func (c *Conn) acquireError(spec lockSpec, sess *session, err error) error {
	if err == nil {
		return nil
	}
	if isInvalidSession(err) {
		return errInvalidSession
	}
	c.undo(spec, sess)
	return err
}

// lockResult returns the last result of a successful acquire transaction
// for key: the lock operation's (an unlock's or a check's comes before it,
// a value key's after it).
func lockResult(resp *api.TxnResponse, key string) *api.KVPair {
	if resp == nil {
		return nil
	}
	for i := len(resp.Results) - 1; i >= 0; i-- {
		if kv := resp.Results[i].KV; kv != nil && kv.Key == key {
			return kv
		}
	}
	return nil
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
// holds it, so it never removes a key another holder acquired, nor a value
// another tool wrote. ok=false with resp is a rollback (see
// classifyRollback: rollbackNotHeld or rollbackMissing when sess did not
// hold it).
func (c *Conn) releaseKey(ctx context.Context, key string, sess *session) (ok bool, resp *api.TxnResponse, err error) {
	return c.txn(ctx, api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: key, Session: sess.id}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: key}},
	})
}

// dirHasEntries reports whether dir has entries other than a lock key and
// its queue: any key under it but <dir>/Lock and <dir>/locks/..., or a <dir>/Lock that is not a lock (a value
// another tool wrote, which Lock then refuses with a ForeignKeyError rather
// than NoNode). It reads consistently.
func (c *Conn) dirHasEntries(ctx context.Context, dir string) (bool, error) {
	prefix := c.dirPrefix(dir)
	keys, _, err := c.kv.Keys(prefix, "/", c.consistentOptions(ctx))
	if err != nil {
		return false, c.convertError(ctx, err, dir)
	}
	lockKey := false
	for _, k := range keys {
		switch {
		case k == prefix:
		case k == prefix+lockName:
			lockKey = true
		case k == prefix+valuesDir+"/":
			// The lock's queue (see queue.go): contenders, not entries.
		case strings.HasPrefix(k, prefix):
			return true, nil
		}
	}
	if !lockKey {
		return false, nil
	}
	pair, _, err := c.kv.Get(prefix+lockName, c.consistentOptions(ctx))
	if err != nil {
		return false, c.convertError(ctx, err, dir)
	}
	return pair != nil && !isLockPair(pair), nil
}
