package consultopo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

const (
	// requestTimeout bounds the requests detached from the caller's
	// context: acquires, releases, session renewals and destroys.
	requestTimeout = 10 * time.Second
	// closeTimeout bounds Close's destroy of the sessions.
	closeTimeout = 5 * time.Second
	// maxRetryWait caps the backoff of an acquire refused by a lock-delay,
	// and of a waiter's read sent again after a transient failure
	// (transient).
	maxRetryWait = 500 * time.Millisecond
	// firstRetryWait is the first pause before a waiter's read that failed
	// transiently is sent again.
	firstRetryWait = 20 * time.Millisecond
	// lateWindow is how long the key of an acquire or enqueue that got no
	// answer is watched for it landing late (watchLate; no read settles
	// it: docs/layout-consul.md). Consul 1.13 enqueues a write into Raft
	// within 30 s or refuses it; one held longer is not caught.
	lateWindow = time.Minute
)

// ForeignKeyError is the cause of the NodeExists error of Lock, TryLock,
// LockWithTTL, LockName and WaitForLeadership when their key (<dir>/Lock,
// elections/<name>) holds another tool's value: no session and no lock
// flags (api.LockFlagValue). topokit never takes over, overwrites or
// deletes it (List reports it with backendkit.ReservedFiles); remove it
// with another tool to use the lock.
type ForeignKeyError struct {
	// Key is the full Consul KV key (with the Conn's root).
	Key string
}

// Error names the key.
func (e *ForeignKeyError) Error() string {
	return fmt.Sprintf("consul key %q holds a value that is not a lock (no session, no lock flags), written by another tool; it is left alone", e.Key)
}

// acquireReq is one acquire of a store key for a session.
type acquireReq struct {
	path     string // for errors
	key      string
	contents string
	sess     *session
	// election: the acquire also writes (publish) or deletes the session's
	// value key, so a leader is never seen without its value or with an
	// older one.
	election bool
	publish  bool
	value    []byte
	// entry: the queue entry the acquire removes, checking that
	// entrySession holds it; queue: the queue's prefix, read after (""
	// for none).
	entry, entrySession, queue string
}

// condFor returns the condition to acquire the key as cur shows it (nil:
// absent), wait when a session holds it, or the ForeignKeyError.
func (r acquireReq) condFor(cur *api.KVPair) (cond *api.KVTxnOp, wait bool, err error) {
	switch {
	case cur == nil:
		return &api.KVTxnOp{Verb: api.KVCheckNotExists, Key: r.key}, false, nil
	case cur.Session == "" && cur.Flags != api.LockFlagValue:
		return nil, false, backendkit.Wrap(topo.NodeExists, r.path, &ForeignKeyError{Key: r.key})
	case cur.Session == "":
		return &api.KVTxnOp{Verb: api.KVCheckIndex, Key: r.key, Index: cur.ModifyIndex}, false, nil
	}
	return nil, true, nil
}

// send sends one acquire transaction under cond (after an entry's check,
// operation 0), detached from the caller's context, so that a caller
// giving up never leaves its outcome unknown; an unanswered one is
// resolved. It holds the key's stripe, so that resolve can tell this
// acquire from another of the Conn. ok=false with resp is a rollback.
func (c *Conn) send(r acquireReq, cond *api.KVTxnOp) (ok bool, resp *api.TxnResponse, err error) {
	var ops api.TxnOps
	if r.entry != "" {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: r.entry, Session: r.entrySession}})
	}
	ops = append(ops, &api.TxnOp{KV: cond}, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVLock, Key: r.key, Value: []byte(r.contents), Flags: api.LockFlagValue, Session: r.sess.id}})
	if r.election {
		ops = append(ops, valueOp(valueKey(r.key, r.sess.id), r.value, r.publish, r.sess))
	}
	if r.entry != "" {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: r.entry}},
			&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: tailOf(r.entry)}})
	}
	if r.queue != "" {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: r.queue}})
	}
	mu := c.stripe(r.key)
	mu.Lock()
	defer mu.Unlock()
	rctx, cancel := context.WithTimeout(r.sess.ctx, requestTimeout)
	defer cancel()
	ok, resp, err = c.txn(rctx, ops)
	switch {
	case errors.Is(err, errSessionGone):
		return false, nil, err
	case err != nil:
		c.resolve(r)
		return false, nil, err
	case ok:
		if kv := result(resp, r.key); kv != nil {
			c.grants.set(kv.ModifyIndex, true)
		}
	}
	return ok, resp, nil
}

// resolve frees the key an unanswered acquire of r may have taken
// (freeLate, retried until the session ends), then, since the request may
// land after the read, watches it for lateWindow, freeing it whenever it
// shows up an orphan. The caller holds the key's stripe.
func (c *Conn) resolve(r acquireReq) {
	until := time.Now().Add(lateWindow)
	c.retry(r.sess, r.key, func() bool {
		index, done := c.freeLate(r)
		if done && index != 0 {
			orphan := func(pair *api.KVPair) bool { return c.orphan(pair, r.sess) }
			c.watchLate(r.sess, r.key, index, until, orphan, func() bool {
				mu := c.stripe(r.key)
				mu.Lock()
				defer mu.Unlock()
				_, done := c.freeLate(r)
				return done
			})
		}
		return done
	})
}

// freeLate deletes r's key at the index read when it is an orphan of r's
// session. It reports whether that is done (or the session ended), and
// the read's index when the key was not r's to free (else 0). The caller
// holds the key's stripe: no acquire of the Conn is between its
// transaction and the record of its grant.
func (c *Conn) freeLate(r acquireReq) (index uint64, done bool) {
	ctx, cancel := context.WithTimeout(r.sess.ctx, requestTimeout)
	defer cancel()
	pair, meta, err := c.kv.Get(r.key, c.consistentOptions(ctx))
	if err != nil {
		return 0, r.sess.lost()
	}
	if !c.orphan(pair, r.sess) {
		return meta.LastIndex, true
	}
	_, _, err = c.txn(ctx, claimOps(r.key, pair.ModifyIndex, &api.KVTxnOp{Verb: api.KVDelete, Key: r.key}, r.election, r.sess))
	return 0, err == nil || r.sess.lost()
}

// orphan reports whether pair is held by sess at an index no grant of
// this Conn recorded: an acquire whose answer was lost.
func (c *Conn) orphan(pair *api.KVPair, sess *session) bool {
	return pair != nil && pair.Session == sess.id && !c.grants.has(pair.ModifyIndex)
}

// watchLate watches key in the background from index until until (or
// sess's end, or Close), for an unanswered write of sess landing after
// all, which would leave the key held with no claim on it while the Conn
// lives: whenever it reads stray, free runs (again while not done).
func (c *Conn) watchLate(sess *session, key string, index uint64, until time.Time, stray func(*api.KVPair) bool, free func() bool) {
	c.spawn(func() {
		ctx, cancel := context.WithDeadline(claimContext(sess.ctx, prioClaimOther), until)
		defer cancel()
		stop := context.AfterFunc(c.ctx, cancel)
		defer stop()
		wait := 100 * time.Millisecond
		for ctx.Err() == nil {
			pair, meta, err := c.kv.Get(key, c.blocking(c.consistentOptions(ctx), index))
			if err == nil && stray(pair) && !free() {
				err = errors.New("not freed")
			}
			if err != nil {
				if !backendkit.Sleep(ctx, wait) {
					return
				}
				wait = min(2*wait, watchRetryMax)
				continue
			}
			index = nextIndex(index, meta.LastIndex)
		}
	})
}

// retry runs try until it reports done: at once, then in the background
// with a growing pause, under key's stripe, until sess ends or Close.
func (c *Conn) retry(sess *session, key string, try func() bool) {
	if try() {
		return
	}
	c.spawn(func() {
		mu := c.stripe(key)
		for wait := 100 * time.Millisecond; ; wait = min(2*wait, watchRetryMax) {
			if !backendkit.Sleep(sess.ctx, wait) || c.ctx.Err() != nil {
				return
			}
			mu.Lock()
			done := try()
			mu.Unlock()
			if done {
				return
			}
		}
	})
}

// stripe returns the Conn's acquire lock of key.
func (c *Conn) stripe(key string) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return &c.stripes[h.Sum32()%uint32(len(c.stripes))]
}

// take is Create's attempt without a queue entry: one transaction taking
// the key if absent and reading the queue. It returns the granted entry,
// or errMustQueue when the key is held or others queue (a key so taken is
// given back). With Exclusive (TryLock): *BusyError naming the holder a
// read shows, NodeExists when others queue or a lock-delay outlasts the
// Conn's own plus a second; a key the read shows free is tried again.
func (d driver) take(ctx context.Context, q claims.Queue, key, contents string, opts claims.CreateOptions, sess *session) (claims.Entry, error) {
	c := d.c
	r := acquireReq{path: q.Path, key: key, contents: contents, sess: sess, election: q.Election,
		publish: opts.Value != nil, value: opts.Value, queue: d.queuePrefix(q)}
	cond := &api.KVTxnOp{Verb: api.KVCheckNotExists, Key: key}
	var delayUntil time.Time
	wait := 10 * time.Millisecond
	for {
		ok, resp, err := c.send(r, cond)
		if err != nil {
			return claims.Entry{}, err
		}
		if ok {
			kv := result(resp, key)
			queued := slices.ContainsFunc(resp.Results, func(x *api.TxnResult) bool {
				return x.KV != nil && strings.HasPrefix(x.KV.Key, r.queue)
			})
			if kv != nil && !queued {
				return grantedEntry(kv, sess.id, r.contents), nil
			}
			// Others queue: give it back.
			d.release(q, key, kv, sess)
			if opts.Exclusive {
				return claims.Entry{}, backendkit.Wrap(topo.NodeExists, q.Path, errors.New("other contenders queue for the lock"))
			}
			return claims.Entry{}, errMustQueue
		}
		rb := classifyRollback(resp)
		switch {
		case rb == rollbackDenied || rb == rollbackUnknown:
			return claims.Entry{}, rollbackError(q.Path, resp)
		case !opts.Exclusive:
			return claims.Entry{}, errMustQueue
		case rb == rollbackLockDelay:
			if delayUntil.IsZero() {
				delayUntil = time.Now().Add(c.opts.LockDelay + time.Second)
			} else if time.Now().After(delayUntil) {
				return claims.Entry{}, backendkit.Wrap(topo.NodeExists, q.Path, errors.New("a lock-delay is in effect"))
			}
			if !backendkit.Sleep(ctx, wait) {
				return claims.Entry{}, ctx.Err()
			}
			wait = min(2*wait, maxRetryWait)
			continue
		}
		cur, _, err := c.kv.Get(key, c.consistentOptions(ctx))
		if err != nil {
			return claims.Entry{}, err
		}
		next, held, err := r.condFor(cur)
		switch {
		case err != nil:
			return claims.Entry{}, err
		case held:
			return claims.Entry{}, &claims.BusyError{Head: claims.Entry{Contents: string(cur.Value), Session: cur.Session}}
		}
		cond = next
	}
}

// release gives back a key an acquire of sess took (kv: its result),
// retried in the background until done or the session ends (else the key
// would stay held with no claim on it).
func (d driver) release(q claims.Queue, key string, kv *api.KVPair, sess *session) {
	if kv == nil {
		return
	}
	d.c.retry(sess, key, func() bool {
		ctx, cancel := context.WithTimeout(d.c.ctx, requestTimeout)
		defer cancel()
		err := d.c.deleteKey(ctx, q, key, kv.ModifyIndex, sess, "")
		if err != nil && err != claims.ErrNotHeld {
			slog.Debug("consultopo: giving a key back", "key", key, "err", err)
		}
		return err == nil || err == claims.ErrNotHeld || isPermanent(err) || sess.lost()
	})
}

// Acquire implements claims.Acquirer: one transaction conditioned on the
// key's state (condFor; at first "absent", unless Ahead saw it held) and
// on e still queued takes the key and removes e, waking the next waiter
// alone. While another session holds the key (the predecessor, or a
// Vitess contender) it waits with consistent blocking queries, a read
// that fails transiently (transient: the agent restarting) sent again
// 20 ms to 500 ms apart while the session and ctx live; a lock-delay is
// retried at most maxRetryWait apart; its queries take a
// slot of the claims' bound, ahead of waiters (claimContext). Its
// transaction is sent detached from ctx (send), so ctx is checked before
// each one: once ctx has ended (the caller gave up, or the engine ended
// the claim), nothing is sent and Acquire returns ctx's error. ErrNotHeld
// when the session ended or e left the queue; NodeExists with a
// ForeignKeyError.
func (d driver) Acquire(ctx context.Context, q claims.Queue, v *claims.Session, e claims.Entry) (claims.Entry, error) {
	c := d.c
	sess := sessionOf(v)
	key := d.storeKey(q)
	actx, cancel := backendkit.Linked(claimContext(ctx, prioAcquire), c.ctx)
	defer cancel()
	stop := context.AfterFunc(sess.ctx, cancel)
	defer stop()
	r := acquireReq{path: q.Path, key: key, contents: e.Contents, sess: sess, election: q.Election,
		publish: e.Value != nil, value: e.Value, entry: e.Key, entrySession: e.Session}
	lost := func(err error) (claims.Entry, error) {
		if sess.lost() || errors.Is(err, errSessionGone) {
			return claims.Entry{}, claims.ErrNotHeld
		}
		return claims.Entry{}, err
	}
	known := c.waiterOf(e.Key, true).key
	var cond *api.KVTxnOp
	if known == nil {
		cond = &api.KVTxnOp{Verb: api.KVCheckNotExists, Key: key} // sent at once
	}
	wait := 10 * time.Millisecond
	for {
		if cond == nil {
			cur, meta, err := known, &api.QueryMeta{}, error(nil)
			if known == nil {
				cur, meta, err = c.kv.Get(key, c.consistentOptions(actx))
			} else {
				meta.LastIndex, known = known.ModifyIndex, nil
			}
			for pause := firstRetryWait; ; {
				if err != nil {
					// The agent restarting, say: while the session and
					// ctx live, read again (not blocking: the index may
					// have gone back) after a pause. Nothing is granted
					// but by the transaction below.
					if !transient(err) {
						return lost(err)
					}
					if !backendkit.Sleep(actx, pause) {
						return lost(actx.Err())
					}
					pause = min(2*pause, maxRetryWait)
					cur, meta, err = c.kv.Get(key, c.consistentOptions(actx))
					continue
				}
				pause = firstRetryWait
				var held bool
				if cond, held, err = r.condFor(cur); err != nil {
					return claims.Entry{}, err
				}
				if !held {
					break
				}
				index := meta.LastIndex
				cur, meta, err = c.kv.Get(key, c.blocking(c.consistentOptions(actx), index))
				if err == nil && meta.LastIndex < index {
					// The index went back (a restarted dev agent).
					cur, meta, err = c.kv.Get(key, c.consistentOptions(actx))
				}
			}
		}
		if actx.Err() != nil {
			// send is detached from ctx: sent now, it would take the key
			// for a caller that gave up, or a claim that ended (the
			// engine's ctx ends with it). Nothing is sent.
			return lost(cmp.Or(ctx.Err(), actx.Err()))
		}
		ok, resp, err := c.send(r, cond)
		if err != nil && !errors.Is(err, errSessionGone) && transient(err) {
			// Unanswered (send resolves it: a key it took is freed, and
			// an entry it removed makes the next attempt ErrNotHeld):
			// read again after a pause.
			if !backendkit.Sleep(actx, firstRetryWait) {
				return lost(actx.Err())
			}
			cond = nil
			continue
		}
		if err != nil {
			return lost(err)
		}
		if ok {
			if kv := result(resp, key); kv != nil {
				c.dropTailLater(e.Key, kv.ModifyIndex, resp)
				return grantedEntry(kv, sess.id, r.contents), nil
			}
			return claims.Entry{}, backendkit.Wrap(topo.Unavailable, q.Path, errors.New("lock transaction returned no result"))
		}
		cond = nil
		if slices.ContainsFunc(resp.Errors, func(e *api.TxnError) bool { return e.OpIndex == 0 }) {
			return claims.Entry{}, claims.ErrNotHeld // e left the queue
		}
		switch classifyRollback(resp) {
		case rollbackStale, rollbackMissing, rollbackExists, rollbackHeld:
			// The key changed since it was read.
		case rollbackLockDelay:
			if !backendkit.Sleep(actx, wait) {
				return lost(actx.Err())
			}
			wait = min(2*wait, maxRetryWait)
		default:
			return claims.Entry{}, rollbackError(q.Path, resp)
		}
	}
}

// transient reports whether a waiter's read that failed with err is sent
// again (while its session and context live) rather than ending the wait:
// the agent unreachable or answering with a server error (Unavailable),
// or limiting the rate (ResourceExhausted). A context's end and a refusal
// (PermissionDenied, InvalidArgument, ...) are not, nor is nil.
func transient(err error) bool {
	if err == nil {
		return false
	}
	switch codeOf(err) {
	case topo.Unavailable, topo.ResourceExhausted:
		return true
	}
	return false
}

// result returns the last result for key in an answer (after a check's), or nil.
func result(resp *api.TxnResponse, key string) *api.KVPair {
	for i := len(resp.Results) - 1; i >= 0; i-- {
		if kv := resp.Results[i].KV; kv != nil && kv.Key == key {
			return kv
		}
	}
	return nil
}
