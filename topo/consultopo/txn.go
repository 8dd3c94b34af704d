package consultopo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

const (
	// MaxTxnOps is the most operations Consul 1.13 takes in one
	// transaction. Txn's DeleteOp takes two, every other op one.
	MaxTxnOps = 64
	// DefaultTxnMaxRequestBytes is the default of
	// Options.TxnMaxRequestBytes: 512 KiB, Consul's default
	// limits.txn_max_req_len and kv_max_value_size.
	DefaultTxnMaxRequestBytes = 512 * 1024
)

// Txn implements topo.Conn.Txn as one Consul transaction (/v1/txn), one
// round trip, reading consistently. Consul evaluates operations in order,
// so the conditions come first, then the writes, each in op order: every
// condition sees the state before the transaction (each write touches its
// own key, and a DeleteOp's check comes right before its delete):
//
//   - IfVersion: check-index (NoNode when absent, BadVersion);
//   - IfAbsent: check-not-exists (NodeExists);
//   - IfPresent: get (NoNode; Consul has no existence check, so the value
//     travels back);
//   - IfHeld: check-index of the lock or election key on the claim's
//     token, then check-session of the claim's session (LockLost, two
//     operations). Every change of a key's entry, its session included,
//     and every re-creation gives it a new ModifyIndex, and every acquire
//     writes the key, so a key at the token is the claim's acquire, held
//     by its session, as long as the agent keeps its state; one that
//     lost it counts indexes again, and another's acquire can land at the
//     token: the session, never reused, tells them apart
//     (TestStaleGuardAcrossIndexReuse). A claim known released, lost or
//     past its session's deadline is checked on index 0: the transaction
//     fails on that op (LockLost) or an earlier one;
//   - CreateOp: check-and-set on index 0 (NodeExists);
//   - UpdateOp: a set, or a check-and-set on the version (on version 0, a
//     check-index), with a fresh write nonce (see writeNonce); a failed
//     check-and-set is explained by a consistent read (NoNode or
//     BadVersion), as for Update;
//   - DeleteOp: a get (NoNode), or a check-index on the version (NoNode,
//     BadVersion), then a delete.
//
// An UpdateOp or DeleteOp at a reserved place is planned from a read of
// its key, one request per key, and fails as Update and Delete do there
// (NodeExists, NoNode, ResourceExhausted; guard.go).
//
// Versions are the written keys' ModifyIndex. Consul 1.13 reports every
// failed operation of a rolled-back transaction; the op reported is the
// first in the caller's order owning one, its code read from Consul's
// message. An ACL refusal of any operation is PermissionDenied.
//
// Before anything is sent, in this order: CheckTxn's checks; for an IfHeld
// Fence of another backend, InvalidArgument (*topo.TxnError); for more
// than MaxTxnOps operations or a body (values in base64) above
// Options.TxnMaxRequestBytes, InvalidArgument (backendkit.TxnTooLarge: a
// value above about 380 KiB never fits); Closed after Close. A lost answer
// is Unavailable (Timeout or Interrupted when ctx ended): it may have been
// applied.
func (c *Conn) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	cops, err := backendkit.CheckTxn(ctx, ops)
	if err != nil {
		return nil, err
	}
	plan, err := c.planTxn(cops, nil)
	if err != nil {
		return nil, err
	}
	if n := len(plan.ops); n > MaxTxnOps {
		return nil, backendkit.TxnTooLarge("consul", n, MaxTxnOps, "Consul transaction operations")
	}
	if n := txnRequestBytes(plan.ops); n > c.opts.TxnMaxRequestBytes {
		return nil, backendkit.TxnTooLarge("consul", n, c.opts.TxnMaxRequestBytes, "request bytes")
	}
	if c.isClosed() {
		return nil, topo.NewError(topo.Closed, "")
	}
	vs, i, err := c.runTxn(ctx, cops, plan, "", func(ops api.TxnOps) (bool, *api.TxnResponse, error) {
		ok, resp, _, err := c.client.Txn().Txn(ops, c.consistentOptions(ctx))
		return ok, resp, err
	}, func(err error) error { return c.txnSendError(ctx, err) })
	if i >= 0 {
		err = backendkit.TxnOpError(cops[i], err)
	}
	return vs, err
}

// txnPlan is a transaction mapped onto Consul operations.
type txnPlan struct {
	ops   api.TxnOps
	owner []int // owner[i]: the index in the canonical ops of ops[i]
	// By op index, fences: each IfHeld op's claim's path, for errors;
	// refused: the error of each op planned to fail (a write at a reserved
	// place refused, guardedWrite; a claim known lost), checked on index 0;
	// at: the guarded writes made at the index read.
	fences  map[int]string
	refused map[int]error
	at      map[int]bool
}

// planTxn maps the canonical ops onto Consul KV operations (see Txn);
// ForeignFence's error for another backend's Fence. A guarded write is
// planned from states (readGuarded's), or as any other write when states
// is nil (runTxn plans it again).
func (c *Conn) planTxn(cops []backendkit.TxnOp, states map[string]*api.KVPair) (txnPlan, error) {
	plan := txnPlan{ops: make(api.TxnOps, 0, 2*len(cops)), owner: make([]int, 0, 2*len(cops)),
		fences: map[int]string{}, refused: map[int]error{}, at: map[int]bool{}}
	add := func(i int, op *api.KVTxnOp) {
		plan.ops = append(plan.ops, &api.TxnOp{KV: op})
		plan.owner = append(plan.owner, i)
	}
	for _, i := range backendkit.ConditionsFirst(cops, nil) {
		op := cops[i]
		key := c.key(op.Path)
		if states != nil && c.guardedWrite(op) {
			refused, index := guardedPlan(op, states[key])
			if refused != nil {
				plan.refused[i] = refused
				add(i, &api.KVTxnOp{Verb: api.KVCheckIndex, Key: key, Index: 0})
				continue
			}
			// Planned below as a write at the index read.
			plan.at[i], op.Version = true, int64(index)
		}
		switch op.Kind {
		case topo.TxnIfVersion:
			add(i, &api.KVTxnOp{Verb: api.KVCheckIndex, Key: key, Index: uint64(op.Version)})
		case topo.TxnIfAbsent:
			add(i, &api.KVTxnOp{Verb: api.KVCheckNotExists, Key: key})
		case topo.TxnIfPresent:
			add(i, &api.KVTxnOp{Verb: api.KVGet, Key: key})
		case topo.TxnIfHeld:
			g, ok := claims.FenceGuard(op.Fence)
			if ok {
				// Another backend's engine's claim has no storeKey.
				_, ok = g.Driver().(interface{ storeKey(claims.Queue) string })
			}
			if !ok || !g.Entry().Granted {
				return txnPlan{}, backendkit.ForeignFence(op, FactoryName)
			}
			// See Txn: the token, or 0 for a claim known lost.
			fkey, _ := splitGranted(g.Entry())
			token, why, sess := uint64(g.Entry().Token), "", sessionOf(g.Session())
			switch {
			case !g.Live():
				why = "the claim was released or lost"
			case !sess.alive():
				why = "the claim's session ended or was not renewed within its TTL"
			}
			if why != "" {
				token, plan.refused[i] = 0, backendkit.Wrap(topo.LockLost, g.Queue().Path, errors.New(why))
			}
			add(i, &api.KVTxnOp{Verb: api.KVCheckIndex, Key: fkey, Index: token})
			add(i, &api.KVTxnOp{Verb: api.KVCheckSession, Key: fkey, Session: sess.id})
			plan.fences[i] = g.Queue().Path
		case topo.TxnCreate:
			add(i, &api.KVTxnOp{Verb: api.KVCAS, Key: key, Value: op.Contents, Index: 0})
		case topo.TxnUpdate:
			switch {
			case op.Version == backendkit.AnyVersion:
				add(i, &api.KVTxnOp{Verb: api.KVSet, Key: key, Value: op.Contents, Flags: writeNonce()})
			case op.Version == 0 && !plan.at[i]: // a cas on 0 would create the key
				add(i, &api.KVTxnOp{Verb: api.KVCheckIndex, Key: key, Index: 0})
			default: // at a guarded write's index 0: only if still absent
				add(i, &api.KVTxnOp{Verb: api.KVCAS, Key: key, Value: op.Contents, Flags: writeNonce(), Index: uint64(op.Version)})
			}
		case topo.TxnDelete:
			if op.Version == backendkit.AnyVersion {
				add(i, &api.KVTxnOp{Verb: api.KVGet, Key: key})
			} else {
				add(i, &api.KVTxnOp{Verb: api.KVCheckIndex, Key: key, Index: uint64(op.Version)})
			}
			add(i, &api.KVTxnOp{Verb: api.KVDelete, Key: key})
		}
	}
	return plan, nil
}

// txnRequestBytes returns the size of the api package's body for ops:
// its JSON and a newline.
func txnRequestBytes(ops api.TxnOps) int {
	b, _ := json.Marshal(ops)
	return len(b) + 1
}

// txnSendError maps the error of a transaction that got no per-operation
// answer: Consul refusing it as too large (its limits are lower than
// Options says) is InvalidArgument, the rest as convertError.
func (c *Conn) txnSendError(ctx context.Context, err error) error {
	if ctx.Err() == nil && c.ctx.Err() == nil {
		msg := err.Error()
		if strings.Contains(msg, "too large") || strings.Contains(msg, "too many operations") {
			return backendkit.Wrap(topo.InvalidArgument, "", err)
		}
	}
	return c.convertError(ctx, err, "")
}

// rollbackCause returns the op of cops that made the transaction roll
// back (see firstFailed) and its error; or -1 with rollbackError's for an
// ACL refusal or a message that names no failed condition.
func (c *Conn) rollbackCause(ctx context.Context, cops []backendkit.TxnOp, plan txnPlan, resp *api.TxnResponse, path string) (int, error) {
	first := firstFailed(plan, resp)
	if first == nil || classifyRollback(resp) == rollbackDenied {
		return -1, rollbackError(path, resp)
	}
	i := plan.owner[first.OpIndex]
	if err := plan.refused[i]; err != nil {
		return i, err
	}
	op := cops[i]
	code, ok := failureCode(op.Kind, plan.ops[first.OpIndex].KV.Verb, first.What)
	path = op.Path
	if op.Kind == topo.TxnIfHeld {
		path = plan.fences[i]
	}
	if !ok {
		return -1, rollbackError(path, resp)
	}
	if code == topo.BadVersion && op.Kind == topo.TxnUpdate && plan.ops[first.OpIndex].KV.Verb == api.KVCAS {
		// Absent, or at another version: a consistent read tells.
		err := c.missingOrBadVersion(ctx, op.Path, op.Kind)
		if !topo.IsErrType(err, topo.NoNode) && !topo.IsErrType(err, topo.BadVersion) {
			return -1, err
		}
		return i, err
	}
	return i, backendkit.Wrap(code, path, errors.New(first.What))
}

// firstFailed returns the failed operation of resp (a rolled-back plan)
// with the lowest owner (of a DeleteOp's two, the earlier), or nil.
func firstFailed(plan txnPlan, resp *api.TxnResponse) *api.TxnError {
	var first *api.TxnError
	for _, e := range resp.Errors {
		if e == nil || e.OpIndex < 0 || e.OpIndex >= len(plan.ops) {
			continue
		}
		if first == nil || plan.owner[e.OpIndex] < plan.owner[first.OpIndex] ||
			(plan.owner[e.OpIndex] == plan.owner[first.OpIndex] && e.OpIndex < first.OpIndex) {
			first = e
		}
	}
	return first
}

// failureCode is the outcome of an operation of verb for an op of kind
// that failed with Consul's message what; false for a message that names
// no failed condition (a lock-delay, an internal error).
func failureCode(kind topo.TxnOpKind, verb api.KVOp, what string) (topo.ErrorCode, bool) {
	switch rb := rollbackOf(what); {
	case kind == topo.TxnIfHeld:
		return topo.LockLost, rb == rollbackMissing || rb == rollbackStale || rb == rollbackNotHeld
	case rb == rollbackMissing && (verb == api.KVCheckIndex || verb == api.KVGet):
		return topo.NoNode, true
	case rb == rollbackStale && verb == api.KVCAS && kind == topo.TxnCreate:
		return topo.NodeExists, true
	case rb == rollbackStale && (verb == api.KVCheckIndex || verb == api.KVCAS):
		// A versioned UpdateOp's cas: rollbackCause reads which.
		return topo.BadVersion, true
	case rb == rollbackExists && verb == api.KVCheckNotExists:
		return topo.NodeExists, true
	}
	return 0, false
}

// txnVersions returns each CreateOp's and UpdateOp's new version. Results
// carry no OpIndex: they are matched in order, by key; a mismatch is
// Unavailable (applied, versions unknown).
func txnVersions(cops []backendkit.TxnOp, plan txnPlan, resp *api.TxnResponse) ([]topo.Version, error) {
	out := make([]topo.Version, len(cops))
	k := 0
	for i, op := range plan.ops {
		if v := op.KV.Verb; v == api.KVCheckNotExists || v == api.KVDelete {
			continue // the verbs Txn uses that return no result
		}
		if k >= len(resp.Results) || resp.Results[k].KV == nil || resp.Results[k].KV.Key != op.KV.Key {
			return nil, backendkit.Wrap(topo.Unavailable, "", fmt.Errorf("the transaction was applied but its answer does not match its operations (result %d of %d)", k, len(resp.Results)))
		}
		if v := op.KV.Verb; v == api.KVSet || v == api.KVCAS {
			out[plan.owner[i]] = topo.NumericVersion(resp.Results[k].KV.ModifyIndex)
		}
		k++
	}
	return out, nil
}
