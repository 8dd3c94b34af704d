package etcd2topo

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Transactions: Conn.Txn as one etcd Txn.

// DefaultMaxTxnOps is the most compares, and the most requests in each
// branch, of one transaction when Options.MaxTxnOps is zero: etcd's
// default --max-txn-ops.
const DefaultMaxTxnOps = 128

// DefaultMaxRequestBytes is the largest transaction request, in bytes,
// when Options.MaxRequestBytes is zero: etcd's default
// --max-request-bytes (1.5 MiB).
const DefaultMaxRequestBytes = 3 << 19

// requestOverheadBytes bounds what etcd adds to a transaction before it
// compares its size with --max-request-bytes (the Raft request's header:
// request id, auth revision, field tags; the user name is added apart).
const requestOverheadBytes = 64

// Txn applies ops as one etcd transaction, in one round trip: the
// conditions (and the implied conditions of the writes) are the
// transaction's compares and the writes its Success branch; it has no
// Failure branch. When a compare fails, a second request reads every
// compared key (keys only; a native term's key, and every key of a Conn
// rooted at a reserved place, with its value) at the failed
// transaction's revision, the snapshot etcd evaluated the compares on,
// and the first op whose condition does not hold there is reported.
// If that revision was compacted before the read, the diagnosis after
// compaction is from the current state: the first op whose condition
// does not hold now, or, if every one holds now, the first op that has a
// condition, with the code of its kind (BadVersion, NoNode, NodeExists or
// LockLost). Either way the transaction was not applied and is never
// re-sent. The ops map as follows,
// k being the file's key and e the key of a Fence's entry:
//
//	IfVersion(p, v)    ModRevision(k) = v
//	IfAbsent(p)        CreateRevision(k) = 0
//	IfPresent(p)       CreateRevision(k) > 0
//	IfHeld(f)          ModRevision(e) = f.Token() (the entry is still there, never rewritten)
//	CreateOp(p, b)     CreateRevision(k) = 0; put k
//	UpdateOp(p, b, nil) put k (creates the file)
//	UpdateOp(p, b, v)  ModRevision(k) = v; put k
//	DeleteOp(p, nil)   CreateRevision(k) > 0; delete k
//	DeleteOp(p, v)     ModRevision(k) = v; delete k
//
// A transaction of conditions only carries one linearizable count-only
// range of its first key as its Success branch, so that etcd evaluates it
// on the cluster's latest state (without it, etcd answers a transaction
// with no writes from the answering member's own, possibly lagging,
// state). Version 0 never matches (etcd reads it as "absent"), as in
// Update and Delete. Every write gets the transaction's revision: the version
// returned for a CreateOp or UpdateOp is it. The writes are plain etcd
// puts and deletes, seen by List, Watch and WatchRecursive like those of
// Create, Update and Delete. On a Conn rooted at a reserved place (see
// Update), UpdateOp and DeleteOp also compare their key's lease with none
// (LeaseValue(k) = 0; these compares count toward MaxTxnOps) and fail on
// a lock or election entry with NodeExists and NoNode, as Update and
// Delete do.
//
// IfHeld takes a lock descriptor or a leadership term of this backend on
// the same etcd cluster (through another Conn too, even with another
// root); a Fence of another backend, or of another etcd cluster, is a
// *topo.TxnError wrapping InvalidArgument. A claim already known to have
// ended here (Unlock or Stop called, Done closed, its lease lost or past
// its proven-until time) fails with LockLost: at once, without sending
// anything, when it is the first op; otherwise its compare is sent as one
// that never holds, so that an earlier failing op is still reported
// first.
//
// Limits, checked before anything is sent (InvalidArgument, from
// backendkit.TxnTooLarge): at most Options.MaxTxnOps (default 128, etcd's
// --max-txn-ops) compares and writes each (the failure reads, one per
// distinct compared key, are never more than the compares); and at most
// Options.MaxRequestBytes (default 1.5 MiB, etcd's
// --max-request-bytes) for the encoded request (its writes counted
// exactly, each compare at its largest: up to 15 bytes more than it
// takes) plus 64 bytes and the user name for etcd's header. Other
// errors: those of backendkit.CheckTxn, then Closed; Timeout,
// Interrupted or Unavailable when etcd's answer is lost (the transaction
// may have been applied), or when the answer of the failure reads is
// lost (it was not); PermissionDenied when etcd refuses it.
func (c *Conn) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	return c.txn(ctx, nil, ops...)
}

// txn is Txn; afterFail, when not nil, is called with the failed
// transaction's revision before its failure reads are sent (a test seam:
// tests compact the store there).
func (c *Conn) txn(ctx context.Context, afterFail func(rev int64), ops ...topo.TxnOp) ([]topo.Version, error) {
	ck, err := backendkit.CheckTxn(ctx, ops)
	if err != nil {
		return nil, err
	}
	t := txnPlan{ops: ck, guards: make([]*guard, len(ck))}
	for i, op := range ck {
		if op.Kind != topo.TxnIfHeld {
			continue
		}
		var ok bool
		if t.guards[i], ok = guardOf(op.Fence); !ok {
			return nil, backendkit.ForeignFence(op, FactoryName)
		}
	}
	t.build(c)
	if err := c.checkTxnSize(&t); err != nil {
		return nil, err
	}
	if err := c.closedErr(""); err != nil {
		return nil, err
	}
	for i, g := range t.guards {
		if g != nil && g.conn != c {
			if err := c.sameCluster(ctx, ck[i], g); err != nil {
				return nil, err
			}
		}
	}
	if ck[0].Kind == topo.TxnIfHeld && !t.guards[0].held {
		return nil, backendkit.TxnFailed(ck[0], topo.LockLost)
	}
	then := t.then
	if len(then) == 0 {
		// etcd answers a transaction without writes, whose branches hold
		// no linearizable range, from the member's own state, which may
		// lag behind the cluster's (a serializable read): one linearizable
		// count-only range makes it wait for the cluster's latest writes.
		then = []clientv3.Op{clientv3.OpGet(t.keys[0], clientv3.WithCountOnly())}
	}
	resp, err := c.cli.Txn(ctx).If(t.cmps...).Then(then...).Commit()
	if err != nil {
		return nil, c.convertError(ctx, err, "")
	}
	c.clusterID.CompareAndSwap(0, resp.Header.ClusterId)
	if !resp.Succeeded {
		if afterFail != nil {
			afterFail(resp.Header.Revision)
		}
		return nil, c.diagnose(ctx, &t, resp.Header.Revision)
	}
	vs := make([]topo.Version, len(ck))
	for i, op := range ck {
		if op.Kind == topo.TxnCreate || op.Kind == topo.TxnUpdate {
			vs[i] = topo.NumericVersion(resp.Header.Revision)
		}
	}
	return vs, nil
}

// txnPlan is a transaction translated into etcd's terms.
type txnPlan struct {
	ops    []backendkit.TxnOp
	guards []*guard // the guard of each IfHeld op
	// inClaims: the Conn's root is at a reserved place, and the writes
	// compare their key's lease with none (see leaseless).
	inClaims bool

	cmps  []clientv3.Cmp
	then  []clientv3.Op
	reads []failureRead  // sent only when the transaction fails
	keys  []string       // the key each op reads or writes
	read  map[string]int // compared key -> index of its read in reads
}

// failureRead is the read of one compared key after a failed
// transaction.
type failureRead struct {
	key string
	// withValues: a native term's key, or any key at a root at a reserved
	// place: its lease is compared, and etcd 3.7 leaves the Lease out of
	// keys-only reads.
	withValues bool
}

// readsAt returns the failure reads at revision rev (0: the current one).
func (t *txnPlan) readsAt(rev int64) []clientv3.Op {
	ops := make([]clientv3.Op, len(t.reads))
	for i, r := range t.reads {
		opts := []clientv3.OpOption{clientv3.WithRev(rev)}
		if !r.withValues {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		ops[i] = clientv3.OpGet(r.key, opts...)
	}
	return ops
}

// build fills in the compares, the writes and the failure reads.
func (t *txnPlan) build(c *Conn) {
	t.inClaims = c.inClaims
	t.keys = make([]string, len(t.ops))
	t.read = make(map[string]int, len(t.ops))
	for i, op := range t.ops {
		k := c.key(op.Path)
		if op.Kind == topo.TxnIfHeld {
			k = t.guards[i].key
		}
		t.keys[i] = k
		switch op.Kind {
		case topo.TxnIfVersion:
			t.cmps = append(t.cmps, versionIs(k, op.Version))
		case topo.TxnIfAbsent:
			t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0))
		case topo.TxnIfPresent:
			t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(k), ">", 0))
		case topo.TxnIfHeld:
			if t.guards[i].held {
				t.cmps = append(t.cmps, t.guards[i].cmps...)
			} else {
				t.cmps = append(t.cmps, never(k))
			}
		case topo.TxnCreate:
			t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0))
			t.then = append(t.then, clientv3.OpPut(k, string(op.Contents)))
		case topo.TxnUpdate:
			if backendkit.TxnConditioned(op) {
				t.cmps = append(t.cmps, versionIs(k, op.Version))
			}
			t.then = append(t.then, clientv3.OpPut(k, string(op.Contents)))
		case topo.TxnDelete:
			if op.Version == backendkit.AnyVersion {
				t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(k), ">", 0))
			} else {
				t.cmps = append(t.cmps, versionIs(k, op.Version))
			}
			t.then = append(t.then, clientv3.OpDelete(k))
		}
		// A Conn rooted at a reserved place writes no leased key (a lock
		// or election entry: see leaseless).
		entryGuard := c.inClaims && (op.Kind == topo.TxnUpdate || op.Kind == topo.TxnDelete)
		if entryGuard {
			t.cmps = append(t.cmps, leaseless(k))
		}
		if backendkit.TxnConditioned(op) || entryGuard {
			// One read per key, with values if any op on it needs them (a
			// native term's key may also be a file of the Conn).
			withValues := c.inClaims || t.guards[i] != nil && t.guards[i].withValue
			if j, dup := t.read[k]; dup {
				t.reads[j].withValues = t.reads[j].withValues || withValues
			} else {
				t.read[k] = len(t.reads)
				t.reads = append(t.reads, failureRead{key: k, withValues: withValues})
			}
		}
	}
}

// versionIs is the compare of a file at version v: its ModRevision; 0,
// which etcd reads as "absent", never matches.
func versionIs(k string, v int64) clientv3.Cmp {
	if v == 0 {
		return never(k)
	}
	return clientv3.Compare(clientv3.ModRevision(k), "=", v)
}

// never is a compare on k that never holds.
func never(k string) clientv3.Cmp { return clientv3.Compare(clientv3.ModRevision(k), "<", 0) }

// diagnose returns the *topo.TxnError of the first op of t whose
// condition did not hold in the transaction that failed at revision rev.
// It reads every compared key at rev, in one read-only etcd Txn: the
// snapshot etcd evaluated the compares on, so the op named is the one
// that failed. When rev was compacted meanwhile, the diagnosis is from
// the current state: the first op whose condition does not hold now, or,
// when every one does (the state changed back since), the first op whose
// condition could have failed, with the code its kind fails with
// (backendkit.TxnConditionCode). Errors of the reads are converted as
// Txn's own (the transaction was not applied either way).
func (c *Conn) diagnose(ctx context.Context, t *txnPlan, rev int64) error {
	resp, err := c.cli.Txn(ctx).Then(t.readsAt(rev)...).Commit()
	now := errors.Is(err, rpctypes.ErrCompacted)
	if now {
		resp, err = c.cli.Txn(ctx).Then(t.readsAt(0)...).Commit()
	}
	if err != nil {
		return c.convertError(ctx, err, "")
	}
	if err := t.failure(resp); err != nil {
		return err
	}
	for i, op := range t.ops {
		if _, compared := t.read[t.keys[i]]; now && compared && backendkit.TxnConditioned(op) {
			return backendkit.TxnFailed(op, backendkit.TxnConditionCode(op))
		}
	}
	// Reached only if the reads and the compares disagree, or after
	// compaction when no compared op has a condition.
	return backendkit.Wrap(topo.Unavailable, "", errors.New("etcd2topo: transaction failed but every condition held in its failure reads"))
}

// failure returns the *topo.TxnError of the first op whose condition
// does not hold in resp, the answer of t's failure reads, and nil when
// every condition holds there.
func (t *txnPlan) failure(resp *clientv3.TxnResponse) error {
	for i, op := range t.ops {
		j, compared := t.read[t.keys[i]]
		if !compared {
			continue
		}
		var kv *mvccpb.KeyValue
		var rev int64 // the key's ModRevision, if it is there
		if kvs := resp.Responses[j].GetResponseRange().Kvs; len(kvs) > 0 {
			kv, rev = kvs[0], kvs[0].ModRevision
		}
		if t.inClaims && kv != nil && kv.Lease != 0 && (op.Kind == topo.TxnUpdate || op.Kind == topo.TxnDelete) {
			return backendkit.TxnOpError(op, entryError(op.Path, op.Kind == topo.TxnDelete)) // see leaseless
		}
		if !backendkit.TxnConditioned(op) {
			continue
		}
		if g := t.guards[i]; g != nil {
			if !g.held || g.gone(kv) {
				return backendkit.TxnFailed(op, topo.LockLost)
			}
			continue
		}
		if code, failed := backendkit.TxnConditionFails(op, kv != nil, rev); failed {
			return backendkit.TxnFailed(op, code)
		}
	}
	return nil
}

// checkTxnSize returns backendkit.TxnTooLarge's error when t exceeds the
// Conn's MaxTxnOps or MaxRequestBytes.
func (c *Conn) checkTxnSize(t *txnPlan) error {
	if n := len(t.cmps); n > c.opts.MaxTxnOps {
		return backendkit.TxnTooLarge("etcd (--max-txn-ops)", n, c.opts.MaxTxnOps, "compares")
	}
	if n := len(t.then); n > c.opts.MaxTxnOps {
		return backendkit.TxnTooLarge("etcd (--max-txn-ops)", n, c.opts.MaxTxnOps, "writes")
	}
	size := requestOverheadBytes + len(c.opts.Username) + txnRequestSize(t)
	if size > c.opts.MaxRequestBytes {
		return backendkit.TxnTooLarge("etcd (--max-request-bytes)", size, c.opts.MaxRequestBytes, "bytes")
	}
	return nil
}

// txnRequestSize returns a bound, in bytes, on the encoded size of the
// TxnRequest that t sends, computed from the public client API only
// (clientv3.Cmp's and clientv3.Op's accessors, and the protobuf wire
// format of etcd's rpc.proto, which is stable across etcd 3.6 and 3.7),
// never from the generated request types, whose layout differs between
// client versions. The writes are counted exactly; a compare, whose target
// and operator the public API does not show, is counted at its largest:
// both enums set and a 10-byte revision, or its value if longer. A
// compare's bound exceeds its encoded size by at most 15 bytes (about 2
// KiB for 128 compares, against etcd's 1.5 MiB default), so a transaction
// within a few bytes of Options.MaxRequestBytes may be refused here that
// etcd would take. TestTxnRequestSizeBound checks the bound against the
// bytes gRPC sends.
func txnRequestSize(t *txnPlan) int {
	n := 0
	for i := range t.cmps {
		n += embeddedSize(txnRequestCompare, cmpSizeBound(&t.cmps[i]))
	}
	for _, op := range t.then {
		n += embeddedSize(txnRequestSuccess, requestOpSize(op))
	}
	return n
}

// Field numbers of etcd's rpc.proto used by txnRequestSize.
const (
	txnRequestCompare = 1 // TxnRequest.compare
	txnRequestSuccess = 2 // TxnRequest.success

	compareResult    = 1 // Compare.result (enum)
	compareTarget    = 2 // Compare.target (enum)
	compareKey       = 3 // Compare.key
	compareUnion     = 4 // Compare.version, the first of target_union
	compareValue     = 7 // Compare.value
	requestOpPut     = 2 // RequestOp.request_put
	requestOpDelete  = 3 // RequestOp.request_delete_range
	putRequestKey    = 1 // PutRequest.key
	putRequestValue  = 2 // PutRequest.value
	deleteRequestKey = 1 // DeleteRangeRequest.key
)

// embeddedSize is the encoded size of a length-delimited field number num
// holding n bytes.
func embeddedSize(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// cmpSizeBound bounds the encoded size of one Compare: the two enums at
// their largest (a tag and a 1-byte varint each), its key, and its target
// value, a revision (at most a 10-byte varint) or the value compared. A
// compare on a range (WithRange, WithPrefix), whose range end the public
// API does not show, is not bounded: this package never sends one. It
// never reads the generated type behind cmp.
func cmpSizeBound(cmp *clientv3.Cmp) int {
	n := protowire.SizeTag(compareResult) + 1 + protowire.SizeTag(compareTarget) + 1
	n += embeddedSize(compareKey, len(cmp.KeyBytes()))
	n += max(protowire.SizeTag(compareUnion)+protowire.SizeVarint(1<<63),
		embeddedSize(compareValue, len(cmp.ValueBytes())))
	return n
}

// requestOpSize returns the encoded size of the RequestOp of op, a put of
// a key and a value (no lease, no other option) or a delete of one key:
// the only ops build puts in a branch.
func requestOpSize(op clientv3.Op) int {
	optional := func(num protowire.Number, b []byte) int {
		if len(b) == 0 {
			return 0
		}
		return embeddedSize(num, len(b))
	}
	if op.IsPut() {
		return embeddedSize(requestOpPut,
			optional(putRequestKey, op.KeyBytes())+optional(putRequestValue, op.ValueBytes()))
	}
	return embeddedSize(requestOpDelete, optional(deleteRequestKey, op.KeyBytes()))
}

// sameCluster returns nil when g, an entry put through another Conn, is
// on this Conn's etcd cluster, and an InvalidArgument *topo.TxnError for
// op otherwise. The Conn learns its cluster's id from its first answer
// (one read, once, if nothing else told it yet).
func (c *Conn) sameCluster(ctx context.Context, op backendkit.TxnOp, g *guard) error {
	id := c.clusterID.Load()
	if id == 0 {
		resp, err := c.cli.Get(ctx, c.rootPrefix+"\x00", clientv3.WithCountOnly())
		if err != nil {
			return c.convertError(ctx, err, "")
		}
		c.clusterID.CompareAndSwap(0, resp.Header.ClusterId)
		id = resp.Header.ClusterId
	}
	if id != g.clusterID {
		return backendkit.TxnOpError(op, backendkit.Wrap(topo.InvalidArgument, g.path,
			errors.New("if-held: the Fence was issued on another etcd cluster")))
	}
	return nil
}
