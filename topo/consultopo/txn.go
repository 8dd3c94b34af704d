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
	// MaxTxnOps is the most operations Consul takes in one transaction
	// (fixed in Consul 1.13's /v1/txn endpoint). Txn counts the Consul
	// operations its ops map to (see Conn.Txn): a DeleteOp takes two,
	// every other op one.
	MaxTxnOps = 64
	// DefaultTxnMaxRequestBytes is the default of
	// Options.TxnMaxRequestBytes: 512 KiB, the default of Consul's
	// limits.txn_max_req_len (and of kv_max_value_size; the txn endpoint
	// takes the larger of the two).
	DefaultTxnMaxRequestBytes = 512 * 1024
)

// Txn implements topo.Conn.Txn as one Consul transaction (/v1/txn), one
// round trip. Each op becomes one KV operation (a DeleteOp two). Consul
// evaluates its operations in order, each on the state the earlier ones
// left, so the transaction holds first the operations of the conditions
// (IfVersion, IfAbsent, IfPresent, IfHeld), in op order, then those of
// the writes (CreateOp, UpdateOp, DeleteOp), in op order: no condition
// sees a write of the transaction, and no write's implied condition does
// either, since each write touches its own key only (CheckTxn refuses two
// writes of one path) and a DeleteOp's check comes right before its
// delete. Every condition is thus evaluated against the state before the
// transaction, as topo.Conn.Txn says. The operations are:
//
//   - IfVersion: check-index on the key (NoNode when absent, BadVersion
//     when its ModifyIndex differs);
//   - IfAbsent: check-not-exists (NodeExists);
//   - IfPresent: get (NoNode; Consul has no existence check, so the
//     file's value travels back in the answer);
//   - IfHeld: check-index on the lock (or election) key with the claim's
//     fencing token, its ModifyIndex at the acquire (LockLost when it
//     fails). That alone proves the claim: Consul gives a key a new
//     ModifyIndex (the Raft index of the write) on every change of its
//     entry, the session included (an unlock, a release by an ending
//     session, another acquire), and a key deleted (by Unlock, or by
//     Consul when the session ends) and created again gets a new one; so
//     a key still at the token is the entry the claim's acquire wrote,
//     held by its session. A stale descriptor of the same session (an
//     earlier lock of the same directory through the same Conn) never
//     passes: every acquire writes the key (see acquire). A check-session
//     would add nothing but a Consul operation, which costs latency
//     (BenchmarkGuardedUpdate; docs/layout-consul.md);
//   - CreateOp: a check-and-set on index 0 with Flags 0, as Create
//     (NodeExists);
//   - UpdateOp: without a version a set, with one a check-and-set on it
//     (version 0, which no key has, a check-index instead); both store a
//     fresh nonce in Flags, as Update does, so every update yields a new
//     version. A failed check-and-set says neither NoNode nor BadVersion:
//     as for Update, a consistent read after the rollback tells which;
//   - DeleteOp: without a version a get (NoNode) then a delete, with one
//     a check-index (NoNode, BadVersion) then a delete, as Delete.
//
// An UpdateOp or DeleteOp of a key at a reserved place (a "locks", "Lock"
// or "elections" segment in its KV path; see Update and guard.go) is
// planned from a consistent read of its key made before the transaction
// (one request per such key): on a lock or election key it is a
// check-index on index 0, which always fails, reported as NodeExists
// (UpdateOp) or NoNode (DeleteOp); otherwise a cas, or a check-index
// before the delete, at the ModifyIndex read (a versioned op whose
// version is not that index is NoNode or BadVersion the same way). When
// such an operation is the first to fail, the key changed since the
// read, and the keys are read and the transaction sent again (at most
// guardedAttempts times; then ResourceExhausted, nothing applied).
//
// A write is therefore applied exactly as the Conn method of the same name
// would apply it, and the versions returned are the ModifyIndex of the
// written keys (the transaction's Raft index). Consul answers a rolled-back
// transaction with per-operation errors carrying their OpIndex, one for
// every failed operation (Consul 1.13's state store evaluates them all
// before rolling back), each evaluated on the state before the
// transaction by the order above. The first failing op in the caller's
// order is the op owning a failed operation that comes first in op order,
// whatever its OpIndex (an IfPresent after a failing CreateOp has the
// lower OpIndex, but the CreateOp is reported); that operation's message
// gives the code, without another read (but for the failed check-and-set
// above, read after the rollback). An ACL refusal of any operation is
// PermissionDenied.
//
// Before anything is sent, in this order: CheckTxn's checks of the context
// and the ops; Closed after Close; InvalidArgument (*topo.TxnError) for an
// IfHeld Fence not issued by this backend; InvalidArgument
// (backendkit.TxnTooLarge) when the ops map to more than MaxTxnOps Consul
// operations or the request body's size (values travel in base64, 4/3
// of their size) exceeds Options.TxnMaxRequestBytes (512 KiB by default):
// a single value above about 380 KiB never fits, so files larger than
// that, which Update writes through the KV endpoint (see writeLarge),
// cannot be written in a transaction. An IfHeld claim already released,
// lost, or past its session's deadline (see session) here is sent as a
// check-index on index 0, which no key has: the transaction cannot apply
// whatever the store still says of the claim, and Consul's answer names
// the first failing op in op order, that one (LockLost) or an earlier one.
//
// A transaction whose answer is lost returns Unavailable (Timeout or
// Interrupted when ctx ended): it may have been applied. Reads within the
// transaction are consistent (a transaction of conditions only is sent
// with ?consistent; one with writes goes through Raft).
func (c *Conn) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	cops, err := backendkit.CheckTxn(ctx, ops)
	if err != nil {
		return nil, err
	}
	// backendkit's order: the ops (CheckTxn), their Fences (planTxn) and
	// the size limits, and only then whether c is closed.
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
	plan, ok, resp, err := c.runTxn(ctx, cops, plan, func(ops api.TxnOps) (bool, *api.TxnResponse, error) {
		ok, resp, _, err := c.client.Txn().Txn(ops, c.consistentOptions(ctx))
		return ok, resp, err
	}, func(err error) error { return c.txnSendError(ctx, err) })
	switch {
	case err != nil:
		return nil, err
	case !ok:
		i, err := c.rollbackCause(ctx, cops, plan, resp, "")
		if i >= 0 {
			err = backendkit.TxnOpError(cops[i], err)
		}
		return nil, err
	}
	return txnVersions(cops, plan, resp)
}

// txnPlan is a transaction mapped onto Consul operations.
type txnPlan struct {
	ops   api.TxnOps
	owner []int // owner[i]: the index in the canonical ops of ops[i]
	// fences are the IfHeld ops' claims, by op index.
	fences map[int]txnFence

	// guarded: some op is a write at a reserved place (guardedKey). By op
	// index, refused holds the error of each guarded write its read
	// refused (sent as a check-index on index 0, which always fails), at
	// the guarded writes made at the index read (their operation failing
	// means the key changed since: see runTxn).
	guarded bool
	refused map[int]error
	at      map[int]bool
}

type txnFence struct {
	path string // the claim's path, for errors
	// lostWhy says why the claim was known lost or released when the
	// transaction was planned ("" if it may be held).
	lostWhy string
}

// planTxn maps the canonical ops onto Consul KV operations (see Txn). It
// returns the *topo.TxnError of ForeignFence for an IfHeld Fence this
// backend did not issue. A guarded write (see guardedKey) marks the plan
// guarded; with states nil it is planned as any other write (runTxn plans
// it again), else from states, the pairs readGuarded read of the keys
// (see guardedPlan).
func (c *Conn) planTxn(cops []backendkit.TxnOp, states map[string]*api.KVPair) (txnPlan, error) {
	plan := txnPlan{ops: make(api.TxnOps, 0, 2*len(cops)), owner: make([]int, 0, 2*len(cops)),
		fences: map[int]txnFence{}, refused: map[int]error{}, at: map[int]bool{}}
	add := func(i int, op *api.KVTxnOp) {
		plan.ops = append(plan.ops, &api.TxnOp{KV: op})
		plan.owner = append(plan.owner, i)
	}
	// The conditions first, then the writes, each in op order (see Txn).
	for _, i := range backendkit.ConditionsFirst(cops, nil) {
		op := cops[i]
		key := c.key(op.Path)
		if c.guardedWrite(op) {
			plan.guarded = true
			if states != nil {
				refused, index := guardedPlan(op, states[key])
				switch {
				case refused != nil:
					plan.refused[i] = refused
					add(i, &api.KVTxnOp{Verb: api.KVCheckIndex, Key: key, Index: 0})
					continue
				case op.Kind == topo.TxnUpdate:
					add(i, &api.KVTxnOp{Verb: api.KVCAS, Key: key, Value: op.Contents, Flags: writeNonce(), Index: index})
				default:
					add(i, &api.KVTxnOp{Verb: api.KVCheckIndex, Key: key, Index: index})
					add(i, &api.KVTxnOp{Verb: api.KVDelete, Key: key})
				}
				plan.at[i] = true
				continue
			}
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
			if !ok {
				return txnPlan{}, backendkit.ForeignFence(op, FactoryName)
			}
			if _, ok := g.Driver().(interface{ storeKey(claims.Queue) string }); !ok || !g.Entry().Granted {
				// Another backend's engine's claim.
				return txnPlan{}, backendkit.ForeignFence(op, FactoryName)
			}
			// check-index on the token alone proves the claim: see Txn.
			// A claim known lost or released here checks index 0, which no
			// key is at: the transaction rolls back whatever the store says
			// of the claim, and Consul still names the first failing op.
			fkey, _ := splitGranted(g.Entry())
			token, why := uint64(g.Entry().Token), ""
			switch sess := sessionOf(g.Session()); {
			case !g.Live():
				token, why = 0, "the claim was released or lost"
			case !sess.alive():
				token, why = 0, "the claim's session ended or was not renewed within its TTL"
			}
			add(i, &api.KVTxnOp{Verb: api.KVCheckIndex, Key: fkey, Index: token})
			plan.fences[i] = txnFence{path: g.Queue().Path, lostWhy: why}
		case topo.TxnCreate:
			add(i, &api.KVTxnOp{Verb: api.KVCAS, Key: key, Value: op.Contents, Index: 0})
		case topo.TxnUpdate:
			if op.Version == backendkit.AnyVersion {
				add(i, &api.KVTxnOp{Verb: api.KVSet, Key: key, Value: op.Contents, Flags: writeNonce()})
				continue
			}
			if op.Version == 0 {
				// A cas on 0 would create the key: see Txn.
				add(i, &api.KVTxnOp{Verb: api.KVCheckIndex, Key: key, Index: 0})
				continue
			}
			add(i, &api.KVTxnOp{Verb: api.KVCAS, Key: key, Value: op.Contents, Flags: writeNonce(), Index: uint64(op.Version)})
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

// txnRequestBytes returns the size of the JSON body the api package sends
// for ops (its encoder ends it with a newline).
func txnRequestBytes(ops api.TxnOps) int {
	b, _ := json.Marshal(ops)
	return len(b) + 1
}

// txnSendError maps the error of a transaction request that got no
// per-operation answer: Consul's refusal of an oversized transaction (HTTP
// 413: its limits are lower than the Conn's Options say) is
// InvalidArgument; everything else as convertError (Unavailable for a
// lost answer: the outcome is unknown).
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
// back, the lowest (in the caller's order) owning a failed Consul
// operation, and its error; or -1 with rollbackError's (for path) for an
// ACL refusal (PermissionDenied) or an error that names no failed
// condition (Unavailable).
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
		f := plan.fences[op.Index]
		path = f.path
		if f.lostWhy != "" {
			return i, backendkit.Wrap(topo.LockLost, path, errors.New(f.lostWhy))
		}
	}
	if !ok {
		return -1, rollbackError(path, resp)
	}
	if code == topo.BadVersion && op.Kind == topo.TxnUpdate && plan.ops[first.OpIndex].KV.Verb == api.KVCAS {
		// Consul's failed check-and-set does not say whether the key is
		// absent: a consistent read tells, as for Update.
		err := c.missingOrBadVersion(ctx, op.Path, op.Kind)
		if !topo.IsErrType(err, topo.NoNode) && !topo.IsErrType(err, topo.BadVersion) {
			return -1, err
		}
		return i, err
	}
	return i, backendkit.Wrap(code, path, errors.New(first.What))
}

// firstFailed returns the failed operation of resp (a rolled-back
// transaction of plan) of the lowest owner (of a DeleteOp's two, the
// earlier), whatever its OpIndex (see Txn), or nil if none names one.
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

// failureCode is the condition outcome of a Consul operation of verb,
// generated for an op of kind, failing with Consul's message what (see
// rollbackOf). It reports false for a message that names no failed
// condition (a lock-delay, an internal error).
func failureCode(kind topo.TxnOpKind, verb api.KVOp, what string) (topo.ErrorCode, bool) {
	switch rb := rollbackOf(what); {
	case kind == topo.TxnIfHeld:
		// check-index on the token: gone, or acquired again or written
		// since the token's acquire.
		return topo.LockLost, rb == rollbackMissing || rb == rollbackStale
	case rb == rollbackMissing && (verb == api.KVCheckIndex || verb == api.KVGet):
		return topo.NoNode, true
	case rb == rollbackStale && verb == api.KVCAS && kind == topo.TxnCreate:
		return topo.NodeExists, true
	case rb == rollbackStale && (verb == api.KVCheckIndex || verb == api.KVCAS):
		// A versioned UpdateOp's check-and-set: absent or at another
		// version; rollbackCause reads which.
		return topo.BadVersion, true
	case rb == rollbackExists && verb == api.KVCheckNotExists:
		return topo.NodeExists, true
	}
	return 0, false
}

// txnVersions returns, for each op, the new version of a CreateOp or
// UpdateOp (the ModifyIndex of its write's result) and nil for the others.
// Results carry no OpIndex: they are matched in order to the operations
// that return one, by key; a mismatch is Unavailable (applied, versions
// unknown).
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
