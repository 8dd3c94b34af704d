package consultopo

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo/claims"
)

// The contenders' queue. Consul's acquire is not a queue: every waiter
// blocks on the lock key and, when it is released, whoever sends its
// acquire first wins, so a contender that has just unlocked (or one on a
// fast path) wins again and again. topokit's contenders therefore queue
// beside the key Vitess locks on, and only the head of the queue tries the
// acquire (the claims engine's queue, over driver's List, WaitGone and
// Acquire):
//
//   - a contender that cannot take the key at once adds an entry
//     <queue>/<session id>-<random> locked by the Conn's shared, long-lived
//     session (also for a lock with a session of its own), so Consul
//     deletes it when the session ends ("delete" behaviour): a dead
//     contender's entry blocks the queue for at most twice the Conn's
//     SessionTTL. Entries are ordered by CreateIndex, the Raft index of the
//     transaction that created them, so the order is the order in which
//     they queued;
//   - a waiter blocks (a consistent blocking query) on its predecessor's
//     entry alone. When that entry goes, the query answers with the index
//     of the transaction that removed it; when the lock key was acquired at
//     that same index, the predecessor removed its entry by acquiring, so
//     nothing is left ahead and the waiter heads the queue (one read of the
//     key, whatever the queue's length). Otherwise (the predecessor gave
//     up or lost its session) it reads the queue again and either waits
//     for its new predecessor or is the head (driver.Ahead);
//   - the head waits for the key (blocking queries on it, from the read
//     that showed it the head), and its acquire transaction deletes its
//     entry, which wakes the next waiter and no other: a handover costs a
//     constant number of requests, of a constant size, whatever the
//     queue's length;
//   - a contender that gives up deletes its entry (retried in the
//     background until it is gone or its session ends).
//
// The queue is an order only: exclusion is still the lock key's acquire
// transaction, so safety does not depend on it. A contender may first try
// the key without an entry (see driver.take). Vitess's contenders do not
// queue: they keep blocking on the key and race the head at each release.
//
// The queue of the lock on directory D is <root>/D/locks/queue/, that of
// election <name> is <root>/elections/<name>/locks/queue/: under a "locks"
// segment, which topokit reserves at any depth and Vitess reads only on
// etcd; an election's published values, named by session id, live beside
// it ("queue" is never one).

// queueDir is the directory, under a lock's or an election's locks
// directory, of its contenders' queue.
const queueDir = "queue"

// errMustQueue reports that a contender's attempt to take a key without
// queueing found it held, or found others queued: it must queue.
var errMustQueue = errors.New("the key is held or contended: queue")

// queuePrefix returns the prefix of q's queue, beside its store key:
// <dir>/locks/queue/ for a lock, elections/<name>/locks/queue/ for an
// election.
func (d driver) queuePrefix(q claims.Queue) string {
	key := d.storeKey(q)
	if !q.Election {
		return strings.TrimSuffix(key, lockName) + valuesDir + "/" + queueDir + "/"
	}
	return key + "/" + valuesDir + "/" + queueDir + "/"
}

// isContended reports whether a contender of this Conn recently found key
// held or queued for, so that the next one queues at once rather than
// trying the key first (a contender that has just unlocked would otherwise
// take it back in the release's gap, then give it back).
func (c *Conn) isContended(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.contended[key]
	return ok
}

// setContended records whether key is contended.
func (c *Conn) setContended(key string, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if on {
		c.contended[key] = struct{}{}
	} else {
		delete(c.contended, key)
	}
}

// queueBusy reports whether the results of a transaction that read the
// queue (get-tree of prefix) show an entry.
func queueBusy(resp *api.TxnResponse, prefix string) bool {
	if resp == nil {
		return false
	}
	for _, r := range resp.Results {
		if r.KV != nil && strings.HasPrefix(r.KV.Key, prefix) {
			return true
		}
	}
	return false
}

// enqueue adds an entry for contents at the tail of q's queue, locked by
// the long-lived session qsess, in one transaction, and returns it. value
// (an election's value to publish, nil for none) rides along in the entry
// for Acquire; it is not written to the store.
func (d driver) enqueue(ctx context.Context, q claims.Queue, key, contents string, value []byte, qsess *session) (claims.Entry, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	ekey := d.queuePrefix(q) + qsess.id + "-" + hex.EncodeToString(b[:])
	ok, resp, err := d.c.txn(ctx, api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: ekey, Flags: api.LockFlagValue, Session: qsess.id}},
	})
	switch {
	case err != nil:
		if isInvalidSession(err) {
			return claims.Entry{}, errInvalidSession
		}
		// The entry may have been written: delete it.
		d.dropEntry(ekey, qsess)
		return claims.Entry{}, err
	case !ok:
		if classifyRollback(resp) == rollbackBadSession {
			return claims.Entry{}, errInvalidSession
		}
		return claims.Entry{}, rollbackError(q.Path, resp)
	}
	kv := lockResult(resp, ekey)
	if kv == nil {
		d.dropEntry(ekey, qsess)
		return claims.Entry{}, errors.New("queue transaction returned no entry")
	}
	return claims.Entry{Token: int64(kv.CreateIndex), Key: ekey, Session: qsess.id, Contents: contents, Value: value}, nil
}

// dropEntry deletes the queue entry key of sess, retrying in the
// background until it is gone, sess has ended (Consul then deletes it) or
// the Conn is closed (which destroys sess).
func (d driver) dropEntry(key string, sess *session) {
	c := d.c
	c.spawn(func() {
		wait := 100 * time.Millisecond
		for {
			ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
			err := c.deleteEntry(ctx, key, key, sess.id)
			cancel()
			switch {
			case err == nil, err == claims.ErrNotHeld:
				return // deleted, or gone already
			case isPermanent(err):
				slog.Warn("consultopo: deleting a queue entry", "key", key, "err", err)
				return
			}
			if !sleepCtx(sess.ctx, wait) || c.ctx.Err() != nil {
				return
			}
			wait = min(2*wait, watchRetryMax)
		}
	})
}

// waiter is what a Conn knows of one of its entries waiting in a queue
// (Conn.waiters, by the entry's key; Conn.preds, by its predecessor's).
type waiter struct {
	// ahead are the entries ahead of the waiter at its last list, oldest
	// first: it waits for the last, its predecessor; goneAt is the index
	// of the transaction that removed that one, once WaitGone saw it go (0
	// before).
	ahead  []claims.Entry
	goneAt uint64
	// key is the store key as Ahead read it when the waiter became the
	// head by its predecessor's acquire: held by the predecessor, at the
	// index Acquire first blocks on. nil when not known.
	key *api.KVPair
}

// setWaiter records w as what the Conn knows of its waiting entry key
// (nil: nothing).
func (c *Conn) setWaiter(key string, w *waiter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.waiters[key]; old != nil && len(old.ahead) > 0 {
		delete(c.preds, old.ahead[len(old.ahead)-1].Key)
	}
	delete(c.waiters, key)
	if w != nil {
		c.waiters[key] = w
		if len(w.ahead) > 0 {
			c.preds[w.ahead[len(w.ahead)-1].Key] = w
		}
	}
}

// waiterOf returns what the Conn knows of its waiting entry key (the zero
// waiter: nothing), and with take forgets it.
func (c *Conn) waiterOf(key string, take bool) waiter {
	c.mu.Lock()
	var w waiter
	if p := c.waiters[key]; p != nil {
		w = *p
	}
	c.mu.Unlock()
	if take {
		c.setWaiter(key, nil)
	}
	return w
}

// List implements claims.Driver: the queue's entries by CreateIndex, in
// one consistent read.
func (d driver) List(ctx context.Context, q claims.Queue) ([]claims.Entry, error) {
	pairs, _, err := d.c.kv.List(d.queuePrefix(q), d.c.consistentOptions(ctx))
	if err != nil {
		return nil, err
	}
	out := make([]claims.Entry, 0, len(pairs))
	for _, p := range pairs {
		out = append(out, claims.Entry{Token: int64(p.CreateIndex), Key: p.Key, Session: p.Session})
	}
	slices.SortFunc(out, func(a, b claims.Entry) int { return cmp.Compare(a.Token, b.Token) })
	return out, nil
}

// Ahead implements claims.Aheader. A granted entry has nothing ahead. The
// first time, it is the entries List shows ahead of e. Once WaitGone saw
// the one just ahead go: when the store key was acquired at the index of
// that removal (one consistent read of the key), that transaction was the
// predecessor's acquire, which only the head sends, so nothing is left
// ahead; otherwise it is the entries ahead at the last list whose names
// are still in the queue (a read of the names alone: no entry joins a
// queue ahead of an older one). A read that shows e alone in the queue
// clears the key's contended mark (see isContended).
func (d driver) Ahead(ctx context.Context, q claims.Queue, e claims.Entry, most int) ([]claims.Entry, bool, error) {
	if e.Granted {
		return nil, true, nil
	}
	c := d.c
	var ahead []claims.Entry
	in, alone := false, false
	if w := c.waiterOf(e.Key, false); w.goneAt != 0 {
		cur, _, err := c.kv.Get(d.storeKey(q), c.consistentOptions(ctx))
		if err != nil {
			return nil, false, err
		}
		if cur != nil && cur.Session != "" && cur.ModifyIndex == w.goneAt {
			c.setWaiter(e.Key, &waiter{key: cur})
			return nil, true, nil
		}
		keys, _, err := c.kv.Keys(d.queuePrefix(q), "", c.consistentOptions(ctx))
		if err != nil {
			return nil, false, err
		}
		queued := make(map[string]bool, len(keys))
		for _, k := range keys {
			queued[k] = true
		}
		in, alone = queued[e.Key], len(keys) == 1
		for _, x := range w.ahead[:len(w.ahead)-1] {
			if queued[x.Key] {
				ahead = append(ahead, x)
			}
		}
	} else {
		list, err := d.List(ctx, q)
		if err != nil {
			return nil, false, err
		}
		i := slices.IndexFunc(list, func(x claims.Entry) bool { return x.Key == e.Key })
		in, alone = i >= 0, len(list) == 1
		ahead = list[:max(i, 0)]
	}
	if in && alone {
		// Nobody else queues: the Conn's next contender may try the key
		// at once again.
		c.setContended(d.storeKey(q), false)
	}
	var w *waiter
	if in && len(ahead) > 0 {
		w = &waiter{ahead: ahead}
	}
	c.setWaiter(e.Key, w)
	return ahead[max(0, len(ahead)-most):], in, nil
}

// WaitGone implements claims.Driver: consistent blocking queries on e's
// key alone (listing its own name, so that the answer once it is gone
// carries the index of the transaction that removed it, which Ahead
// compares with the store key's), until it is gone. The wait also ends
// (with nil, the caller then lists again) when the Conn's long-lived
// session ends, since the waiter's own entry lives on it.
func (d driver) WaitGone(ctx context.Context, q claims.Queue, e claims.Entry) error {
	c := d.c
	wctx, cancel := c.callCtx(ctx)
	defer cancel()
	if s := c.currentShared(); s != nil {
		stop := context.AfterFunc(s.ctx, cancel)
		defer stop()
	}
	// A queue entry is never written after its creation: while it lives,
	// its index is its CreateIndex, the token, so the first query blocks.
	index := uint64(e.Token)
	for {
		pairs, meta, err := c.kv.List(e.Key, c.consistentBlocking(wctx, index))
		if err != nil {
			if wctx.Err() != nil && ctx.Err() == nil && c.ctx.Err() == nil {
				return nil // the shared session ended: look again
			}
			return err
		}
		if !slices.ContainsFunc(pairs, func(p *api.KVPair) bool { return p.Key == e.Key && int64(p.CreateIndex) == e.Token }) {
			c.mu.Lock()
			if w := c.preds[e.Key]; w != nil {
				w.goneAt = meta.LastIndex
			}
			c.mu.Unlock()
			return nil
		}
		index = nextIndex(index, meta.LastIndex)
	}
}
