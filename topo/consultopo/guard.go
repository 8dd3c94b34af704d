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

// Writes at the claims' places (docs/layout-consul.md, "A root at a
// reserved place"). A Conn rooted at <root>/elections, inside a "locks"
// directory or above another Conn's root can name a claim's key, and
// Consul's set and cas keep a key's session while its delete frees it: a
// write would rewrite a held claim or free it for a second holder. So a
// write of a key with a "locks", "Lock" or "elections" segment reads the
// key first, refuses a lock or election key (NodeExists for an update,
// NoNode for a delete), and makes any other write at the ModifyIndex
// read, which every acquire changes, so the refusal is atomic.

// guardedAttempts bounds a guarded write's read-and-write attempts.
const guardedAttempts = 10

// errEntry is the cause of a write refused on a lock or election key.
var errEntry = errors.New("consultopo: the key is a lock or election key (held by a session, or carrying the lock flags): not a file")

// ErrGuardedContention is the cause of the ResourceExhausted error of an
// Update, Delete or Txn write of a key with a "locks", "Lock" or
// "elections" segment whose key changed between each of its ten reads and
// writes; nothing was applied, and a later retry may succeed.
var ErrGuardedContention = errors.New("consultopo: the key changed between every read and write of a write at a reserved place; nothing was written")

// guardedKey reports whether a segment of the KV key key is "locks",
// "Lock" or "elections".
func guardedKey(key string) bool {
	return slices.ContainsFunc(strings.Split(key, "/"), func(seg string) bool {
		return seg == valuesDir || seg == lockName || seg == electionsDir
	})
}

// guardedWrite reports whether op is an update or delete of a guardedKey.
func (c *Conn) guardedWrite(op backendkit.TxnOp) bool {
	return (op.Kind == topo.TxnUpdate || op.Kind == topo.TxnDelete) && guardedKey(c.key(op.Path))
}

// readGuarded reads the key of every guarded write of cops (each writes
// its own key: backendkit.CheckTxn), by KV key, for the attempt-th time:
// at guardedAttempts, ResourceExhausted (ErrGuardedContention) instead.
func (c *Conn) readGuarded(ctx context.Context, cops []backendkit.TxnOp, attempt int) (map[string]*api.KVPair, error) {
	if attempt == guardedAttempts {
		p := cops[slices.IndexFunc(cops, c.guardedWrite)].Path
		return nil, backendkit.Wrap(topo.ResourceExhausted, p, ErrGuardedContention)
	}
	out := map[string]*api.KVPair{}
	for _, op := range cops {
		if !c.guardedWrite(op) {
			continue
		}
		pair, _, err := c.kv.Get(c.key(op.Path), c.consistentOptions(ctx))
		if err != nil {
			return nil, c.convertError(ctx, err, op.Path)
		}
		out[c.key(op.Path)] = pair
	}
	return out, nil
}

// entryError is the error of a write of kind refused on a lock key.
func entryError(kind topo.TxnOpKind, p string) error {
	if kind == topo.TxnUpdate {
		return backendkit.Wrap(topo.NodeExists, p, errEntry)
	}
	return backendkit.Wrap(topo.NoNode, p, errEntry)
}

// guardedPlan returns a guarded write's refusal, or the index to write it
// at, given the pair read (nil: absent).
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

// runTxn sends plan with send and returns the versions (txnVersions), or
// an error and the index in cops of the op it is about (-1: none; path
// names a rollback no op explains, see rollbackCause). A plan with a
// guarded write is planned again from readGuarded first, and again while
// a guarded write's own operation is what failed (its key changed since
// the read), at most guardedAttempts times. sendErr converts send's error.
func (c *Conn) runTxn(ctx context.Context, cops []backendkit.TxnOp, plan txnPlan, path string,
	send func(api.TxnOps) (bool, *api.TxnResponse, error), sendErr func(error) error) ([]topo.Version, int, error) {
	guarded := slices.ContainsFunc(cops, c.guardedWrite)
	for attempt := 0; ; attempt++ {
		if guarded {
			states, err := c.readGuarded(ctx, cops, attempt)
			if err != nil {
				return nil, -1, err
			}
			if plan, err = c.planTxn(cops, states); err != nil {
				return nil, -1, err
			}
		}
		ok, resp, err := send(plan.ops)
		if err != nil {
			return nil, -1, sendErr(err)
		}
		if ok {
			vs, err := txnVersions(cops, plan, resp)
			return vs, -1, err
		}
		if guarded && classifyRollback(resp) != rollbackDenied {
			if first := firstFailed(plan, resp); first != nil && plan.at[plan.owner[first.OpIndex]] {
				continue
			}
		}
		i, err := c.rollbackCause(ctx, cops, plan, resp, path)
		return nil, i, err
	}
}
