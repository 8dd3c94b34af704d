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
//     entry alone; when that entry goes (its owner acquired the key, gave
//     up, or lost its session) it reads the queue again and either waits
//     for its new predecessor or is the head;
//   - the head waits for the key (blocking queries on it), and its acquire
//     transaction deletes its entry, which wakes the next waiter and no
//     other: a handover costs a constant number of requests whatever the
//     queue's length;
//   - a contender that gives up deletes its entry (retried in the
//     background until it is gone or its session ends).
//
// The queue is an order only: exclusion is still the lock key's acquire
// transaction, so safety does not depend on it. A contender that finds the
// key free tries it at once without an entry when the Conn has not seen
// the key contended (the uncontended Lock stays one transaction); that
// attempt also reads the queue in the same transaction, and one that took
// the key while others queued (a release's gap) gives it back at once and
// queues (TryLock then returns NodeExists). Vitess's contenders do not
// queue: they keep blocking on the key and race the head at each release.
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
