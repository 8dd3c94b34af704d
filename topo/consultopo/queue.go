package consultopo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
)

// The contenders' queue (issue 33). Consul's acquire is not a queue: every
// waiter blocks on the lock key and, when it is released, whoever sends
// its acquire first wins, so a contender that has just unlocked (or one on
// a fast path) wins again and again. topokit's contenders therefore queue
// beside the key Vitess locks on, and only the head of the queue tries the
// acquire:
//
//   - a contender that cannot take the key at once adds an entry
//     <queue>/<session id>-<random> locked by the Conn's shared, long-lived
//     session (also for a lock with a session of its own), so Consul
//     deletes it when the session ends ("delete" behaviour): a dead
//     contender's entry blocks the queue for at most twice the Conn's
//     SessionTTL. It does so in a
//     transaction that also reads the whole queue (get-tree): entries are
//     ordered by CreateIndex, the Raft index of the transaction that
//     created them, so the order is the order in which they queued;
//   - a waiter blocks (a consistent blocking query) on its predecessor's
//     entry alone; when that entry goes (its owner acquired the key, gave
//     up, or lost its session) it reads the queue again and either waits
//     for its new predecessor or is the head;
//   - the head waits for the key as every waiter did before (blocking
//     queries on it), and its acquire transaction deletes its entry, which
//     wakes the next waiter and no other: a handover costs a constant
//     number of requests whatever the queue's length;
//   - a contender that gives up deletes its entry (retried in the
//     background until it is gone or its session ends).
//
// The queue is an order only: exclusion is still the lock key's acquire
// transaction, unchanged, so safety does not depend on it. A contender
// that finds the key free tries it at once without an entry when the Conn
// has not seen the key contended (the uncontended Lock stays one round
// trip); that attempt also reads the queue in the same transaction, and one
// that took the key while others queued (a release's gap) gives it back
// at once and queues (TryLock then returns NodeExists). Vitess's contenders
// do not queue: they keep blocking on the key and race the head at each
// release.
//
// The queue of the lock on directory D is <root>/D/locks/queue/, that of
// election <name> is <root>/elections/<name>/locks/queue/. Both lie under a
// "locks" segment, which topokit reserves at any depth (no topokit file or
// lock can be there, and no election: names with a locks segment are
// refused), and which Vitess reads only on etcd, as the directory of a
// lock's entries. An election's published values live in the same locks
// directory, named by session id: "queue" is never one.

// queueDir is the directory, under a lock's or an election's locks
// directory, of its contenders' queue.
const queueDir = "queue"

// errMustQueue reports that a contender's attempt to take a key without
// queueing found it held, or found others queued: it must queue.
var errMustQueue = errors.New("the key is held or contended: queue")

// queuePrefixFor returns the queue prefix beside key: <dir>/locks/queue/
// for a lock key <dir>/Lock, <key>/locks/queue/ for an election key.
func queuePrefixFor(key string, election bool) string {
	if !election {
		key = strings.TrimSuffix(key, lockName)
		return key + valuesDir + "/" + queueDir + "/"
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

// enqueue adds an entry for sess at the tail of spec's queue and returns
// it with the entry just before it (nil when it is the head), read in the
// same transaction.
func (c *Conn) enqueue(ctx context.Context, spec lockSpec, sess *session) (entry, pred *api.KVPair, err error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	key := spec.queue + sess.id + "-" + hex.EncodeToString(b[:])
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	ok, resp, err := c.txn(rctx, api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: key, Flags: api.LockFlagValue, Session: sess.id}},
		{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: spec.queue}},
	})
	switch {
	case err != nil:
		if isInvalidSession(err) {
			return nil, nil, errInvalidSession
		}
		// The entry may have been written: delete it.
		c.dropEntry(key, sess)
		return nil, nil, err
	case !ok:
		if classifyRollback(resp) == rollbackBadSession {
			return nil, nil, errInvalidSession
		}
		return nil, nil, rollbackError(spec.path, resp)
	}
	var pairs api.KVPairs
	for _, r := range resp.Results {
		if r.KV != nil {
			if r.KV.Key == key && entry == nil {
				entry = r.KV
				continue
			}
			pairs = append(pairs, r.KV)
		}
	}
	if entry == nil {
		c.dropEntry(key, sess)
		return nil, nil, errors.New("queue transaction returned no entry")
	}
	return entry, predecessor(pairs, entry), nil
}

// predecessor returns the entry of pairs queued last before entry (the
// greatest CreateIndex below entry's), nil when none did.
func predecessor(pairs api.KVPairs, entry *api.KVPair) *api.KVPair {
	var pred *api.KVPair
	for _, p := range pairs {
		if p.Key == entry.Key || p.CreateIndex >= entry.CreateIndex {
			continue
		}
		if pred == nil || p.CreateIndex > pred.CreateIndex {
			pred = p
		}
	}
	return pred
}

// waitTurn returns once entry (on session qsess) heads spec's queue: it
// blocks on pred (the entry queued before it) until pred is gone, then
// reads the queue again (consistently) for a new predecessor, until none
// is left. It fails with the request's error, or errWaiterSessionLost when
// sess (the lock's) or qsess (the entry's) ends.
func (c *Conn) waitTurn(ctx context.Context, spec lockSpec, sess, qsess *session, entry, pred *api.KVPair) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(sess.ctx, cancel)
	defer stop()
	qstop := context.AfterFunc(qsess.ctx, cancel)
	defer qstop()
	ended := func(err error) error {
		if ctx.Err() == nil && c.ctx.Err() == nil && (sess.lost() || qsess.lost()) {
			return errWaiterSessionLost
		}
		return err
	}
	for pred != nil {
		index := pred.ModifyIndex
		for {
			cur, meta, err := c.kv.Get(pred.Key, c.consistentBlocking(wctx, index))
			if err != nil {
				return ended(err)
			}
			if cur == nil || cur.CreateIndex != pred.CreateIndex {
				break
			}
			index = nextIndex(index, meta.LastIndex)
		}
		pairs, _, err := c.kv.List(spec.queue, c.consistentOptions(wctx))
		if err != nil {
			return ended(err)
		}
		mine := false
		for _, p := range pairs {
			if p.Key == entry.Key {
				mine = p.CreateIndex == entry.CreateIndex
			}
		}
		if !mine {
			// Our own entry is gone: our session ended.
			return ended(errWaiterSessionLost)
		}
		pred = predecessor(pairs, entry)
	}
	return nil
}

// dropEntry deletes the queue entry key of sess, retrying in the
// background until it is gone, sess has ended (Consul then deletes it) or
// the Conn is closed (which destroys sess).
func (c *Conn) dropEntry(key string, sess *session) {
	c.spawn(func() {
		wait := 100 * time.Millisecond
		for {
			ctx, cancel := context.WithTimeout(c.ctx, requestTimeout)
			ok, resp, err := c.releaseKey(ctx, key, sess)
			cancel()
			switch {
			case ok:
				return
			case err == nil:
				switch classifyRollback(resp) {
				case rollbackNotHeld, rollbackMissing:
					return // gone already
				}
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
