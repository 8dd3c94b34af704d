package consultopo

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Writes at the claims' places (the package doc's first invariant;
// docs/layout-consul.md, "A root at a reserved place"). The path rule
// (topo.IsReserved) is relative to the Conn's root, so a Conn rooted at
// <root>/elections, inside a "locks" directory or above another Conn's
// root can name a lock, election, queue or value key. Consul's set and
// cas keep the session of a key they rewrite, and its delete removes a
// held key: such a write would rewrite a claim under its holder (who
// keeps its session and Check) or free it for a second holder while the
// first one's context is live. So a write of a key with a "locks", "Lock"
// or "elections" segment (guardedKey) reads the key first, refuses a lock
// or election key (isLockPair), and makes any other write at the
// ModifyIndex read, which every acquire changes: the refusal is atomic.

// guardedAttempts bounds the reads and writes one guarded write makes
// when the key keeps changing between its read and its write.
const guardedAttempts = 10

// errEntry is the cause of the error of a write that would land on a lock
// or election key (held by a session, or carrying the lock flags).
var errEntry = errors.New("consultopo: the key is a lock or election key (held by a session, or carrying the lock flags): not a file")

// ErrGuardedContention is the cause (errors.Is) of the ResourceExhausted
// error of a write at a reserved place (an Update, Delete or Txn write of
// a key with a "locks", "Lock" or "elections" segment: see above) whose
// key changed between each of its reads and its write, ten times;
// nothing of it was applied, and retrying later may succeed.
var ErrGuardedContention = errors.New("consultopo: the key changed between every read and write of a write at a reserved place; nothing was written")

// guardedKey reports whether the KV key key is at a place where lock or
// election keys live: one of its segments is "locks", "Lock" or
// "elections" (see the comment above).
func guardedKey(key string) bool {
	return slices.ContainsFunc(strings.Split(key, "/"), func(seg string) bool {
		return seg == valuesDir || seg == lockName || seg == electionsDir
	})
}

// guardedWrite reports whether op is a write that must leave lock and
// election keys alone (see guardedKey).
func (c *Conn) guardedWrite(op backendkit.TxnOp) bool {
	return (op.Kind == topo.TxnUpdate || op.Kind == topo.TxnDelete) && guardedKey(c.key(op.Path))
}

// readGuarded reads, consistently, the key of every guarded write of
// cops: by KV key, the pair, or nil when the key is absent.
func (c *Conn) readGuarded(ctx context.Context, cops []backendkit.TxnOp) (map[string]*api.KVPair, error) {
	out := map[string]*api.KVPair{}
	for _, op := range cops {
		if !c.guardedWrite(op) {
			continue
		}
		key := c.key(op.Path)
		if _, ok := out[key]; ok {
			continue
		}
		pair, _, err := c.kv.Get(key, c.consistentOptions(ctx))
		if err != nil {
			return nil, c.convertError(ctx, err, op.Path)
		}
		out[key] = pair
	}
	return out, nil
}

// entryError is the error of a write of kind on p refused because the key
// is a lock or election key: NodeExists for an update (the key is there),
// NoNode for a delete (it is no file).
func entryError(kind topo.TxnOpKind, p string) error {
	if kind == topo.TxnUpdate {
		return backendkit.Wrap(topo.NodeExists, p, errEntry)
	}
	return backendkit.Wrap(topo.NoNode, p, errEntry)
}

// guardedPlan is how planTxn maps a guarded write given what readGuarded
// read of its key (pair, nil if absent): the refusal, or the index its
// write is made at.
func guardedPlan(op backendkit.TxnOp, pair *api.KVPair) (refused error, index uint64) {
	switch {
	case pair != nil && isLockPair(pair):
		return entryError(op.Kind, op.Path), 0
	case pair == nil && (op.Kind == topo.TxnDelete || op.Version != backendkit.AnyVersion):
		return topo.NewError(topo.NoNode, op.Path), 0
	case pair == nil:
		return nil, 0 // an Update of an absent key: only if still absent
	case op.Version != backendkit.AnyVersion && uint64(op.Version) != pair.ModifyIndex:
		return topo.NewError(topo.BadVersion, op.Path), 0
	}
	return nil, pair.ModifyIndex
}

// runTxn sends plan (planned from cops without reads) with send and
// returns what it answered; a plan with guarded writes is planned again
// from readGuarded's reads first, and sent again, after reading again,
// while a guarded write's own operation is what failed (its key changed
// since the read), up to guardedAttempts times. The plan returned is the
// one sent. sendErr converts the error of send; the error returned is
// final.
func (c *Conn) runTxn(ctx context.Context, cops []backendkit.TxnOp, plan txnPlan,
	send func(api.TxnOps) (bool, *api.TxnResponse, error), sendErr func(error) error) (txnPlan, bool, *api.TxnResponse, error) {
	if !plan.guarded {
		ok, resp, err := send(plan.ops)
		if err != nil {
			return plan, false, nil, sendErr(err)
		}
		return plan, ok, resp, nil
	}
	for range guardedAttempts {
		states, err := c.readGuarded(ctx, cops)
		if err != nil {
			return plan, false, nil, err
		}
		if plan, err = c.planTxn(cops, states); err != nil {
			return plan, false, nil, err
		}
		ok, resp, err := send(plan.ops)
		if err != nil {
			return plan, false, nil, sendErr(err)
		}
		if ok || classifyRollback(resp) == rollbackDenied {
			return plan, ok, resp, nil
		}
		if first := firstFailed(plan, resp); first == nil || !plan.at[plan.owner[first.OpIndex]] {
			return plan, ok, resp, nil
		}
	}
	path := ""
	for _, op := range cops {
		if c.guardedWrite(op) {
			path = op.Path
			break
		}
	}
	return plan, false, nil, backendkit.Wrap(topo.ResourceExhausted, path, ErrGuardedContention)
}
