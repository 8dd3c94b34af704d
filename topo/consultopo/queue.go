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

	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// The contenders' queue (docs/layout-consul.md, "Fair order: the
// contenders' queue", says each step and what it costs). Consul's acquire
// is not a queue: at a release whoever sends its acquire first wins, so a
// contender that has just unlocked wins again and again. topokit's
// contenders therefore queue beside the key Vitess locks on, in entries
// <queue>/<session id>-<random> on the Conn's long-lived session, ordered
// by CreateIndex, with a tail key naming the entry queued last; each
// waiter blocks on its predecessor's entry alone, and only the head sends
// the acquire, whose transaction deletes its entry and so wakes the next
// waiter and no other. The queue is an order only: exclusion is the key's
// acquire transaction. Vitess's contenders do not queue: they race the
// head at each release.

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

// tailName is the key, beside a queue (<dir>/locks/tail,
// elections/<name>/locks/tail), that names the entry queued last: its
// value is that entry's key, its ModifyIndex that entry's CreateIndex (both
// are written by the one enqueue transaction), and it is locked by that
// entry's session, so that Consul deletes it with the session.
const tailName = "tail"

// tailOf returns the tail key of the queue holding the entry key (or
// whose prefix is key).
func tailOf(key string) string {
	return strings.TrimSuffix(key[:strings.LastIndex(key, "/")+1], queueDir+"/") + tailName
}

// enqueue adds an entry for contents at the tail of q's queue, on the
// long-lived session qsess, in one transaction that also reads and moves
// the tail key, so the entry learns its predecessor without reading the
// queue (see Ahead); under a lock-delay on the tail key the entry is
// created alone. value (an election's value to publish) rides along in
// the entry for Acquire; it is not written to the store.
func (d driver) enqueue(ctx context.Context, q claims.Queue, key, contents string, value []byte, qsess *session) (claims.Entry, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	prefix := d.queuePrefix(q)
	ekey := prefix + qsess.id + "-" + hex.EncodeToString(b[:])
	tail := tailOf(prefix)
	ops := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: tail}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: tail}},
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: tail, Value: []byte(ekey), Session: qsess.id}},
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: ekey, Flags: api.LockFlagValue, Session: qsess.id}},
	}
	ok, resp, err := d.c.txn(ctx, ops)
	if err == nil && !ok && classifyRollback(resp) == rollbackLockDelay {
		ok, resp, err = d.c.txn(ctx, ops[3:])
	}
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
	kv := result(resp, ekey)
	if kv == nil {
		d.dropEntry(ekey, qsess)
		return claims.Entry{}, errors.New("queue transaction returned no entry")
	}
	w := &waiter{fresh: true}
	if old := resp.Results[0].KV; old != nil && old.Key == tail && old.ModifyIndex < kv.CreateIndex && strings.HasPrefix(string(old.Value), prefix) {
		w.pred = claims.Entry{Token: int64(old.ModifyIndex), Key: string(old.Value)}
	}
	d.c.setWaiter(ekey, w)
	return claims.Entry{Token: int64(kv.CreateIndex), Key: ekey, Session: qsess.id, Contents: contents, Value: value}, nil
}

// namedTail returns the tail key of the queue of the entry key as resp (a
// transaction that read it) shows it, when it names that entry; nil when
// it does not.
func namedTail(key string, resp *api.TxnResponse) *api.KVPair {
	tail := result(resp, tailOf(key))
	if tail == nil || string(tail.Value) != key {
		return nil
	}
	return tail
}

// dropTail deletes tail (see namedTail) unless it changed since it was
// read, so that a queue left empty leaves no key behind. A failure is
// left alone: the tail's session deletes it in the end.
func (c *Conn) dropTail(ctx context.Context, tail *api.KVPair) {
	_, _, _ = c.txn(ctx, api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: tail.Key, Index: tail.ModifyIndex}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: tail.Key}},
	})
}

// dropTailLater runs dropTail in the background for the tail that the
// acquire at token of the entry key read (resp), when it names that entry:
// sent before the grant returned, it cost a waiter that was last in the
// queue one round trip more. The release of that grant waits for it
// (awaitTailDrop), so that a released claim's empty queue has left no
// key. Drops are recorded by token, each removing only its own record: an
// acquire given the same index later (a restarted -dev agent reuses
// indexes) records its own drop beside the first, and a release of that
// token waits for both, whichever ends first.
func (c *Conn) dropTailLater(key string, token uint64, resp *api.TxnResponse) {
	tail := namedTail(key, resp)
	if tail == nil {
		return
	}
	done := make(chan struct{})
	c.mu.Lock()
	c.tailDrops[token] = append(c.tailDrops[token], done)
	c.mu.Unlock()
	c.spawn(func() {
		defer func() {
			c.mu.Lock()
			rest := slices.DeleteFunc(slices.Clone(c.tailDrops[token]), func(ch chan struct{}) bool { return ch == done })
			if len(rest) == 0 {
				delete(c.tailDrops, token)
			} else {
				c.tailDrops[token] = rest
			}
			c.mu.Unlock()
			close(done)
		}()
		ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
		defer cancel()
		c.dropTail(ctx, tail)
	})
}

// awaitTailDrop waits until the tail drops that the acquires at token
// started (dropTailLater), if any, are over, or ctx ends.
func (c *Conn) awaitTailDrop(ctx context.Context, token uint64) {
	c.mu.Lock()
	drops := c.tailDrops[token]
	c.mu.Unlock()
	for _, done := range drops {
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
	}
}

// dropEntry deletes the queue entry key of sess in the background,
// retried until it is gone, sess has ended or the Conn is closed. An entry
// not there (yet) is watched for lateWindow (watchLate), for an enqueue
// that got no answer landing after the delete.
func (d driver) dropEntry(key string, sess *session) {
	c := d.c
	until := time.Now().Add(lateWindow)
	del := func() error {
		ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
		defer cancel()
		return c.deleteEntry(ctx, key, key, sess.id)
	}
	c.spawn(func() {
		wait := 100 * time.Millisecond
		for {
			err := del()
			switch {
			case err == nil:
				return // deleted: the enqueue landed, and cannot again
			case err == claims.ErrNotHeld:
				ours := func(pair *api.KVPair) bool { return pair != nil && pair.Session == sess.id }
				c.watchLate(sess, key, 0, until, ours, func() bool {
					err := del()
					return err == nil || err == claims.ErrNotHeld
				})
				return
			case isPermanent(err):
				slog.Warn("consultopo: deleting a queue entry", "key", key, "err", err)
				return
			}
			if !backendkit.Sleep(sess.ctx, wait) || c.ctx.Err() != nil {
				return
			}
			wait = min(2*wait, watchRetryMax)
		}
	})
}

// waiter is what a Conn knows of one of its entries waiting in a queue
// (Conn.waiters, by the entry's key; Conn.preds, by its predecessor's).
type waiter struct {
	// pred is the entry just ahead of the waiter as last known (Key ""
	// for none), which it waits for; goneAt is the index of the
	// transaction that removed it, once WaitGone saw it go (0 before).
	// fresh: pred is what enqueue read from the tail key, and nothing is
	// known of the entries ahead of it.
	pred   claims.Entry
	goneAt uint64
	fresh  bool
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
	if old := c.waiters[key]; old != nil && old.pred.Key != "" {
		delete(c.preds, old.pred.Key)
	}
	delete(c.waiters, key)
	if w != nil {
		c.waiters[key] = w
		if w.pred.Key != "" {
			c.preds[w.pred.Key] = w
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

// Ahead implements claims.Aheader. A granted entry has nothing ahead.
// Right after enqueue found a predecessor in the tail key, it is that
// predecessor behind an Entry with no Key (no read; see claims.Aheader):
// what is ahead of the predecessor is not known, so the engine asks again
// once it goes. Once WaitGone saw the predecessor go, at index goneAt, one
// consistent read of the store key decides: acquired at goneAt, or
// released or acquired again since (absent, or a later ModifyIndex), the
// predecessor went by its acquire, which only the head sends, so nothing
// is left ahead; a key unchanged since before goneAt shows that the
// predecessor gave up or lost its session while others held the key.
// Then, and the first time without a predecessor, it is the entries List
// shows ahead of e. (A predecessor that gave up or died just before a
// handover is taken for an acquirer: its successor may then overtake the
// entries that were ahead of it, once; exclusion never rests on the
// order.) A list that shows e alone in the queue clears the key's
// contended mark (see Conn.contended).
func (d driver) Ahead(ctx context.Context, q claims.Queue, e claims.Entry, most int) ([]claims.Entry, bool, error) {
	if e.Granted {
		return nil, true, nil
	}
	c := d.c
	switch w := c.waiterOf(e.Key, false); {
	case w.fresh && w.pred.Key != "":
		c.setWaiter(e.Key, &waiter{pred: w.pred})
		return []claims.Entry{{}, w.pred}, true, nil
	case w.goneAt != 0:
		cur, _, err := c.kv.Get(d.storeKey(q), c.consistentOptions(ctx))
		if err != nil {
			return nil, false, err
		}
		switch {
		case cur != nil && cur.Session != "" && cur.ModifyIndex == w.goneAt:
			c.setWaiter(e.Key, &waiter{key: cur})
			return nil, true, nil
		case cur == nil || cur.ModifyIndex > w.goneAt:
			c.setWaiter(e.Key, nil)
			return nil, true, nil
		}
	}
	list, err := d.List(ctx, q)
	if err != nil {
		return nil, false, err
	}
	i := slices.IndexFunc(list, func(x claims.Entry) bool { return x.Key == e.Key })
	in := i >= 0
	ahead := list[:max(i, 0)]
	if in && len(list) == 1 {
		// Nobody else queues: the Conn's next contender may try the key
		// at once again.
		c.contended.set(d.storeKey(q), false)
	}
	var w *waiter
	if in && len(ahead) > 0 {
		w = &waiter{pred: ahead[len(ahead)-1]}
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
	wctx, cancel := backendkit.Linked(ctx, c.ctx)
	defer cancel()
	if s := c.currentShared(); s != nil {
		stop := context.AfterFunc(s.ctx, cancel)
		defer stop()
	}
	// A queue entry is never written after its creation: while it lives,
	// its index is its CreateIndex, the token, so the first query blocks.
	index := uint64(e.Token)
	for {
		pairs, meta, err := c.kv.List(e.Key, c.blocking(c.consistentOptions(wctx), index))
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
