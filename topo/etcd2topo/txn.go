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

// requestOverheadBytes bounds the Raft header etcd adds to a request
// before checking --max-request-bytes (the user name comes apart).
const requestOverheadBytes = 64

// Txn applies ops as one etcd transaction, in one round trip: the
// conditions (and those the writes imply) are its compares, the writes
// its Success branch; no Failure branch. When a compare fails, a second
// request reads every compared key (keys only; with values for a native
// term's key and at a reserved root) at the failed transaction's
// revision, and the first op whose condition does not hold there is
// reported. If that revision was compacted meanwhile, the current state
// is read: the first op failing now, or, if all hold now, the first op
// with a condition, with its kind's code (BadVersion, NoNode, NodeExists
// or LockLost). Either way nothing was applied, and nothing is re-sent.
// With k the file's key and e the key of a Fence's entry:
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
// Conditions alone carry a linearizable count-only range of the first
// key as the Success branch: etcd answers a transaction without writes
// from the member's own, possibly lagging, state. Version 0 never
// matches, as in Update and Delete. The version returned for CreateOp and
// UpdateOp is the transaction's revision. At a reserved root (package
// doc, Invariants), UpdateOp and DeleteOp also compare LeaseValue(k) = 0
// (counted toward MaxTxnOps) and fail on an entry with NodeExists and
// NoNode, as Update and Delete.
//
// IfHeld takes a lock descriptor or term of this backend on the same
// etcd cluster (through any Conn or root); another backend's or cluster's
// Fence is a *topo.TxnError wrapping InvalidArgument. A claim known to
// have ended here (released, Done closed, its lease lost or unproven)
// fails with LockLost: at once, sending nothing, as the first op;
// otherwise as a compare that never holds, so an earlier failing op is
// reported first.
//
// Limits, checked before sending (InvalidArgument, backendkit.TxnTooLarge):
// Options.MaxTxnOps compares and writes each (the failure reads are never
// more than the compares); Options.MaxRequestBytes for the encoded
// request (writes counted exactly, each compare at most 15 bytes over)
// plus 64 bytes and the user name for etcd's header. Other errors:
// backendkit.CheckTxn's, then Closed; Timeout, Interrupted or Unavailable
// when etcd's answer is lost (the transaction may have been applied) or
// that of the failure reads (it was not); PermissionDenied when refused.
func (c *Conn) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	return c.txn(ctx, nil, ops...)
}

// txn is Txn; afterFail, if set, gets the failed transaction's revision
// before the failure reads (tests compact there).
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
		// Linearizable, not the member's own state: see Txn.
		then = []clientv3.Op{clientv3.OpGet(t.keys[0], clientv3.WithCountOnly())}
	}
	resp, err := c.cli.Txn(ctx).If(t.cmps...).Then(then...).Commit()
	if err != nil {
		return nil, c.convertError(ctx, err, "")
	}
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

	cmps  []clientv3.Cmp
	then  []clientv3.Op
	reads []failureRead  // sent only when the transaction fails
	keys  []string       // the key each op reads or writes
	read  map[string]int // compared key -> index of its read in reads
}

// failureRead is the read of one compared key after a failed
// transaction; withValues when its lease is compared (etcd 3.7 leaves the
// Lease out of keys-only reads).
type failureRead struct {
	key        string
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
	t.keys = make([]string, len(t.ops))
	t.read = make(map[string]int, len(t.ops))
	for i, op := range t.ops {
		k := c.key(op.Path)
		if op.Kind == topo.TxnIfHeld {
			k = t.guards[i].key
		}
		t.keys[i] = k
		switch kind := op.Kind; {
		case kind == topo.TxnIfHeld && t.guards[i].held:
			t.cmps = append(t.cmps, t.guards[i].cmps...)
		case kind == topo.TxnIfHeld:
			t.cmps = append(t.cmps, never(k))
		case kind == topo.TxnIfAbsent || kind == topo.TxnCreate:
			t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0))
		case kind == topo.TxnIfPresent || kind == topo.TxnDelete && op.Version == backendkit.AnyVersion:
			t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(k), ">", 0))
		case backendkit.TxnConditioned(op): // IfVersion, a write at a version
			t.cmps = append(t.cmps, versionIs(k, op.Version))
		}
		switch op.Kind {
		case topo.TxnCreate, topo.TxnUpdate:
			t.then = append(t.then, clientv3.OpPut(k, string(op.Contents)))
		case topo.TxnDelete:
			t.then = append(t.then, clientv3.OpDelete(k))
		}
		entryGuard := c.inClaims && (op.Kind == topo.TxnUpdate || op.Kind == topo.TxnDelete)
		if entryGuard {
			t.cmps = append(t.cmps, leaseless(k))
		}
		if backendkit.TxnConditioned(op) || entryGuard {
			// One read per key, with values if any op on it needs them.
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

// versionIs compares k's ModRevision with v; 0 ("absent") never matches.
func versionIs(k string, v int64) clientv3.Cmp {
	if v == 0 {
		return never(k)
	}
	return clientv3.Compare(clientv3.ModRevision(k), "=", v)
}

func never(k string) clientv3.Cmp { return clientv3.Compare(clientv3.ModRevision(k), "<", 0) }

// diagnose returns the *topo.TxnError of t, failed at revision rev, from
// one read-only Txn of the compared keys (see Txn).
func (c *Conn) diagnose(ctx context.Context, t *txnPlan, rev int64) error {
	resp, err := c.cli.Txn(ctx).Then(t.readsAt(rev)...).Commit()
	now := errors.Is(err, rpctypes.ErrCompacted)
	if now {
		resp, err = c.cli.Txn(ctx).Then(t.readsAt(0)...).Commit()
	}
	if err != nil {
		return c.convertError(ctx, err, "")
	}
	if err := t.failure(resp, c.inClaims); err != nil {
		return err
	}
	for i, op := range t.ops {
		if _, compared := t.read[t.keys[i]]; now && compared && backendkit.TxnConditioned(op) {
			return backendkit.TxnFailed(op, backendkit.TxnConditionCode(op))
		}
	}
	// The reads and the compares disagree, or, after compaction, no
	// compared op has a condition.
	return backendkit.Wrap(topo.Unavailable, "", errors.New("etcd2topo: transaction failed but every condition held in its failure reads"))
}

// failure returns the *topo.TxnError of the first op whose condition
// does not hold in resp, t's failure reads (inClaims: Conn.inClaims); nil
// if none.
func (t *txnPlan) failure(resp *clientv3.TxnResponse, inClaims bool) error {
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
		if inClaims && kv != nil && kv.Lease != 0 && (op.Kind == topo.TxnUpdate || op.Kind == topo.TxnDelete) {
			return backendkit.TxnOpError(op, entryError(op.Path, op.Kind == topo.TxnDelete))
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

// txnRequestSize bounds, in bytes, the encoded TxnRequest of t, from the
// public client API and rpc.proto's wire format only (the generated types
// differ between client versions): writes exactly, a compare (the API
// hides its target and operator) at its largest, at most 15 bytes over.
// TestTxnRequestSizeBound checks it against gRPC.
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

// embeddedSize is the size of length-delimited field num holding n bytes.
func embeddedSize(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// cmpSizeBound bounds one Compare: both enums (tag and 1-byte varint
// each), its key, and a 10-byte revision or the value compared. Ranges
// (never sent here) are not bounded.
func cmpSizeBound(cmp *clientv3.Cmp) int {
	n := protowire.SizeTag(compareResult) + 1 + protowire.SizeTag(compareTarget) + 1
	n += embeddedSize(compareKey, len(cmp.KeyBytes()))
	n += max(protowire.SizeTag(compareUnion)+protowire.SizeVarint(1<<63),
		embeddedSize(compareValue, len(cmp.ValueBytes())))
	return n
}

// requestOpSize is the size of op's RequestOp: a plain put or a delete
// of one key, the only ops build makes.
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

// sameCluster returns an InvalidArgument *topo.TxnError for op unless g,
// put through another Conn, is on this Conn's cluster (learnt, if no
// answer pinned c.guard yet, with one read).
func (c *Conn) sameCluster(ctx context.Context, op backendkit.TxnOp, g *guard) error {
	if c.guard.ID() == 0 {
		if _, err := c.cli.Get(ctx, c.rootPrefix+"\x00", clientv3.WithCountOnly()); err != nil {
			return c.convertError(ctx, err, "")
		}
	}
	if c.guard.ID() != g.clusterID {
		return backendkit.TxnOpError(op, backendkit.Wrap(topo.InvalidArgument, g.path,
			errors.New("if-held: the Fence was issued on another etcd cluster")))
	}
	return nil
}
