package consultopo

import (
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
	// requestTimeout bounds the store requests that run detached from the
	// caller's context: acquire transactions, releases, session renewals
	// and destroys.
	requestTimeout = 10 * time.Second
	// maxRetryWait caps the backoff between retries of an acquire refused
	// by a lock-delay.
	maxRetryWait = 500 * time.Millisecond
	// lateWindow is how long, after an acquire or an enqueue got no
	// answer, the Conn watches its key for it landing late (watchLate;
	// docs/layout-consul.md says why no read can settle it). A Consul
	// 1.13 server enqueues a write into Raft within 30 s or refuses it; a
	// request held longer is not caught: its key stays held until the
	// Conn's session ends.
	lateWindow = time.Minute
)

// errInvalidSession reports that Consul no longer knows the session an
// acquire was sent with.
var errInvalidSession = errors.New("consul session no longer exists")

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

// acquireReq is one acquire of a store key for a session.
type acquireReq struct {
	path     string // for errors
	key      string
	contents string
	sess     *session
	// election: the acquire also writes the session's value key (publish,
	// with value) or deletes it, so that a leader is never seen without
	// its value nor with an older one.
	election bool
	publish  bool
	value    []byte
	// entry is the queue entry the acquire removes ("" for none), first
	// checking that its session entrySession still holds it, and queue
	// the queue's prefix, read in the same transaction, after the removal
	// ("" not to read it).
	entry, entrySession, queue string
}

// condFor returns the condition under which r may acquire the key as cur
// shows it (nil: absent), or wait while any session holds it, this Conn's
// own included. A value without lock flags nor session was written by
// another tool: NodeExists with a ForeignKeyError, nothing written.
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
// which fails as operation 0). It runs detached from the caller's context
// (bounded by requestTimeout and the session), so that a caller giving up
// never leaves its outcome unknown; an unanswered one is resolved. It holds
// the key's stripe, so that resolve can tell this acquire from another of
// the same Conn and session. ok=false with resp is a rollback.
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
	case err != nil && isInvalidSession(err):
		return false, nil, errInvalidSession
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

// resolve finds out, after an acquire request of r that got no answer,
// whether it took the key (held by r's session at an index no grant of
// this Conn recorded), and if so deletes it (freeLate, retried in the
// background until the session ends). The caller holds the key's stripe.
// Since the request may still land after the read, the key is then
// watched for lateWindow (watchLate), freeLate running again under the
// stripe whenever the key shows up as an orphan.
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

// freeLate reads r's key (consistent) and deletes it, checking the index
// read, when it is an orphan of r's session. It reports whether that is
// done (also when the session ended), and the index of the read when the
// key was not r's to free (0 otherwise). The caller holds the key's
// stripe, so that no acquire of the Conn on the key is between its
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

// orphan reports whether pair, a lock or election key as read, is held by
// sess at an index no grant of this Conn recorded: taken by an acquire
// whose answer was lost, with no claim on it.
func (c *Conn) orphan(pair *api.KVPair, sess *session) bool {
	return pair != nil && pair.Session == sess.id && !c.grants.has(pair.ModifyIndex)
}

// watchLate watches key, in the background, with consistent blocking
// queries from index until the time until (or sess's end, or the Conn's
// close), for a write of sess that got no answer landing after all:
// whenever the key as read is stray, free runs (again at the next answer
// while it reports not done). Else a late acquire or enqueue would leave
// a key held by sess with no claim or waiter on it, and every other
// contender waiting, for as long as the Conn lives.
func (c *Conn) watchLate(sess *session, key string, index uint64, until time.Time, stray func(*api.KVPair) bool, free func() bool) {
	c.spawn(func() {
		ctx, cancel := context.WithDeadline(sess.ctx, until)
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

// retry runs try, which reports whether its work is done, and until it is,
// again in the background with a growing pause, holding key's stripe,
// until the session sess ends or the Conn closes.
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

// stripe returns the Conn's acquire lock of key (see send).
func (c *Conn) stripe(key string) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return &c.stripes[h.Sum32()%uint32(len(c.stripes))]
}

// take is Create's attempt without a queue entry: one transaction taking
// the key if absent and reading the queue. It returns the granted entry,
// or errMustQueue when the key is not free or others queue (a key taken in
// a release's gap is given back). With Exclusive (TryLock): *BusyError
// naming the holder a read of the key shows, NodeExists when others queue
// or a lock-delay outlasts the Conn's own plus a second. An Exclusive
// take whose condition failed reads the key and tries again, under the
// condition the read gives, when the key turns out free after all
// (released since the transaction, or held by no session).
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
			// Others queue for the key: give it back at once.
			d.release(q, key, kv, sess)
			if opts.Exclusive {
				return claims.Entry{}, backendkit.Wrap(topo.NodeExists, q.Path, errors.New("other contenders queue for the lock"))
			}
			return claims.Entry{}, errMustQueue
		}
		rb := classifyRollback(resp)
		switch {
		case rb == rollbackBadSession:
			return claims.Entry{}, errInvalidSession
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

// release gives back a key an acquire of sess took (kv: its result), with
// an election's value key, detached from any caller's context, retried in
// the background until done, the key is no longer at the acquire's index,
// or the session ends: given up, the key would stay held by the session
// with no claim on it.
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

// Acquire implements claims.Acquirer: once e heads the queue, one
// transaction conditioned on the key's state (condFor) and on e still
// being queued takes the key for v's session and removes e, which wakes
// the next waiter and no other. The first attempt assumes the key absent,
// unless Ahead has just seen it held. While another session holds the key
// (the predecessor, or a Vitess contender, which does not queue) it waits
// with consistent blocking queries on it; a lock-delay refusal is retried
// at most maxRetryWait apart. It returns the granted entry; ErrNotHeld when
// the session ended or e left the queue; NodeExists with a ForeignKeyError
// for a key another tool wrote.
func (d driver) Acquire(ctx context.Context, q claims.Queue, v *claims.Session, e claims.Entry) (claims.Entry, error) {
	c := d.c
	sess := sessionOf(v)
	key := d.storeKey(q)
	actx, cancel := backendkit.Linked(ctx, c.ctx)
	defer cancel()
	stop := context.AfterFunc(sess.ctx, cancel)
	defer stop()
	r := acquireReq{path: q.Path, key: key, contents: e.Contents, sess: sess, election: q.Election,
		publish: e.Value != nil, value: e.Value, entry: e.Key, entrySession: e.Session}
	lost := func(err error) (claims.Entry, error) {
		if sess.lost() || errors.Is(err, errInvalidSession) {
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
			for err == nil {
				var held bool
				if cond, held, err = r.condFor(cur); err != nil {
					return claims.Entry{}, err
				}
				if !held {
					break
				}
				// Held: block until the key changes.
				index := meta.LastIndex
				cur, meta, err = c.kv.Get(key, c.blocking(c.consistentOptions(actx), index))
				if err == nil && meta.LastIndex < index {
					// The store's index went back (a restarted dev agent):
					// read afresh.
					cur, meta, err = c.kv.Get(key, c.consistentOptions(actx))
				}
			}
			if err != nil {
				return lost(err)
			}
		}
		ok, resp, err := c.send(r, cond)
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
			// The key changed since it was read: look again.
		case rollbackLockDelay:
			// A lock-delay left by an invalidated session is in effect.
			if !backendkit.Sleep(actx, wait) {
				return lost(actx.Err())
			}
			wait = min(2*wait, maxRetryWait)
		case rollbackBadSession:
			return claims.Entry{}, claims.ErrNotHeld
		default:
			return claims.Entry{}, rollbackError(q.Path, resp)
		}
	}
}

// result returns the last result of a successful transaction for key, nil
// for none: for an acquired key the lock operation's (a check's comes
// before it).
func result(resp *api.TxnResponse, key string) *api.KVPair {
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
