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

// The contenders' queue (docs/layout-consul.md, "Fair order"): Consul's
// acquire is not fair (at a release the fastest acquire wins), so topokit's
// contenders queue in entries ordered by CreateIndex, each waiting on its
// predecessor's entry alone; only the head sends the acquire, whose
// transaction deletes its entry and so wakes the next waiter alone.

// queueDir is the queue's directory, in a locks directory.
const queueDir = "queue"

// errMustQueue reports that a take found the key held or others queued.
var errMustQueue = errors.New("the key is held or contended: queue")

// queuePrefix returns q's queue's prefix: <dir>/locks/queue/ or
// elections/<name>/locks/queue/.
func (d driver) queuePrefix(q claims.Queue) string {
	key := d.storeKey(q)
	if !q.Election {
		return strings.TrimSuffix(key, lockName) + valuesDir + "/" + queueDir + "/"
	}
	return key + "/" + valuesDir + "/" + queueDir + "/"
}

// tailName is the key beside a queue naming the entry queued last: its
// value is the entry's key, its ModifyIndex the entry's CreateIndex (an
// enqueue, and only it, writes both), and the entry's session holds it.
// It is deleted only while it names an entry that has just left the
// queue (checking its index), or with its session. Safety never rests on
// it.
const tailName = "tail"

// tailOf returns the tail key of the queue of the entry (or prefix) key.
func tailOf(key string) string {
	return strings.TrimSuffix(key[:strings.LastIndex(key, "/")+1], queueDir+"/") + tailName
}

// enqueue adds an entry for contents to q's queue on the long-lived
// session qsess, in one transaction that also reads and moves the tail
// key, so the entry learns its predecessor without a read (under a
// lock-delay on the tail, the entry alone). value, an election's value,
// rides in the entry for Acquire.
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
		if errors.Is(err, errSessionGone) {
			return claims.Entry{}, err
		}
		// The entry may have been written.
		d.dropEntry(ekey, qsess)
		return claims.Entry{}, err
	case !ok:
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

// namedTail returns the tail key resp read, if it names the entry key.
func namedTail(key string, resp *api.TxnResponse) *api.KVPair {
	tail := result(resp, tailOf(key))
	if tail == nil || string(tail.Value) != key {
		return nil
	}
	return tail
}

// dropTail deletes tail unless it changed since it was read, so that an
// empty queue leaves no key behind (else its session deletes it). The
// index alone does not prove the key is the one read: an agent that lost
// its state counts indexes again, and another client's write can land at
// it; the key's session is checked too (TestStaleTailDropAcrossIndexReuse).
func (c *Conn) dropTail(ctx context.Context, tail *api.KVPair) {
	ops := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: tail.Key, Index: tail.ModifyIndex}},
		{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: tail.Key, Session: tail.Session}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: tail.Key}},
	}
	if tail.Session == "" { // not written by an enqueue: the index alone
		ops = slices.Delete(ops, 1, 2)
	}
	_, _, _ = c.txn(ctx, ops)
}

// dropTailLater runs dropTail in the background (not to delay the grant)
// for the tail the acquire at token of the entry key read, when it names
// that entry. The release at token waits for it (awaitTailDrop). Drops are
// recorded by token, each removing only its own record: a restarted -dev
// agent may give a later acquire the same index.
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

// awaitTailDrop waits for the tail drops of the acquires at token, or ctx.
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

// dropEntry deletes the queue entry key of sess: a first attempt (at
// most dropWait) before it returns, so that a Lock given up while its
// enqueue was unanswered returns once its entry is gone (the next
// contender never waits on an entry nobody owns); then, unless that
// deleted it, in the background, retried until done, sess ends or Close.
// An entry not there (yet) is watched for lateWindow, for an unanswered
// enqueue landing late.
func (d driver) dropEntry(key string, sess *session) {
	c := d.c
	until := time.Now().Add(lateWindow)
	del := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(c.ctx, timeout)
		defer cancel()
		return c.deleteEntry(ctx, key, key, sess.id)
	}
	first := del(dropWait)
	if first == nil {
		return // deleted: the enqueue landed, and cannot again
	}
	c.spawn(func() {
		wait := 100 * time.Millisecond
		for err := first; ; err = del(requestTimeout) {
			switch {
			case err == nil:
				return // deleted: the enqueue landed, and cannot again
			case err == claims.ErrNotHeld:
				ours := func(pair *api.KVPair) bool { return pair != nil && pair.Session == sess.id }
				c.watchLate(sess, key, 0, until, ours, func() bool {
					err := del(requestTimeout)
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

// dropWait bounds dropEntry's first attempt, which its caller waits for.
const dropWait = 5 * time.Second

// waiter is what a Conn knows of one of its entries waiting in a queue
// (Conn.waiters, by the entry's key; Conn.preds, by its predecessor's).
type waiter struct {
	pred   claims.Entry // the entry just ahead, waited for (Key "": none)
	goneAt uint64       // the index that removed pred, once WaitGone saw it
	fresh  bool         // pred was read from the tail key by enqueue
	// key is the store key as Ahead read it when the waiter became the
	// head by its predecessor's acquire: Acquire blocks on its index
	// first (nil: not known).
	key *api.KVPair
}

// setWaiter records w for the entry key (nil: forget it).
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

// waiterOf returns the entry key's waiter (zero: none); take forgets it.
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

// List implements claims.Driver: one consistent read, by CreateIndex.
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

// Ahead implements claims.Aheader. Right after enqueue found a
// predecessor in the tail key, it is that predecessor behind an Entry with
// no Key (no read; see claims.Aheader). Once WaitGone saw the predecessor
// go at goneAt, one read of the store key decides: acquired at goneAt, or
// absent or acquired since, the predecessor went by its acquire, which
// only the head sends, so nothing is left ahead (one that gave up just
// before a handover is taken for an acquirer: its successor may overtake
// once; exclusion never rests on the order). Otherwise it is the entries
// List shows ahead of e; a list of e alone clears the key's contended
// mark. A read that fails transiently (transient: the agent restarting)
// is sent again, 20 ms to 500 ms apart, until ctx (the engine's, which
// ends with the claim, so with its session) or the Conn ends.
func (d driver) Ahead(ctx context.Context, q claims.Queue, e claims.Entry, most int) ([]claims.Entry, bool, error) {
	ahead, in, err := d.ahead(ctx, q, e, most)
	if !transient(err) {
		return ahead, in, err
	}
	lctx, cancel := backendkit.Linked(ctx, d.c.ctx)
	defer cancel()
	for pause := firstRetryWait; transient(err) && backendkit.Sleep(lctx, pause); pause = min(2*pause, maxRetryWait) {
		ahead, in, err = d.ahead(ctx, q, e, most)
	}
	return ahead, in, err
}

// ahead is one attempt of Ahead.
func (d driver) ahead(ctx context.Context, q claims.Queue, e claims.Entry, most int) ([]claims.Entry, bool, error) {
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
		c.contended.set(d.storeKey(q), false)
	}
	var w *waiter
	if in && len(ahead) > 0 {
		w = &waiter{pred: ahead[len(ahead)-1]}
	}
	c.setWaiter(e.Key, w)
	return ahead[max(0, len(ahead)-most):], in, nil
}

// WaitGone implements claims.Driver: consistent blocking queries listing
// e's key (so that the answer once it is gone carries the index that
// removed it, for Ahead) until it is gone, or (nil) until the long-lived
// session, on which the waiter's own entry lives, ends. A query that fails
// transiently (transient: the agent restarting) is sent again, 20 ms to
// 500 ms apart, until ctx or that session ends.
func (d driver) WaitGone(ctx context.Context, q claims.Queue, e claims.Entry) error {
	c := d.c
	wctx, cancel := backendkit.Linked(claimContext(ctx, uint64(e.Token)), c.ctx)
	defer cancel()
	if s := c.currentShared(); s != nil {
		stop := context.AfterFunc(s.ctx, cancel)
		defer stop()
	}
	// An entry is never rewritten: the first query blocks.
	index := uint64(e.Token)
	pause := firstRetryWait
	for {
		pairs, meta, err := c.kv.List(e.Key, c.blocking(c.consistentOptions(wctx), index))
		if err != nil && transient(err) && backendkit.Sleep(wctx, pause) {
			// The agent restarting, say: ask again, not blocking (the
			// index may have gone back).
			pause, index = min(2*pause, maxRetryWait), 0
			continue
		}
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
		pause, index = firstRetryWait, nextIndex(index, meta.LastIndex)
	}
}
