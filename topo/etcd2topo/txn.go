package etcd2topo

import (
	"context"
	"errors"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

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

// etcdFence is a Fence this backend issued: a lock descriptor or a
// leadership term, found behind decorators by backendkit.FenceAs.
type etcdFence interface {
	topo.Fence
	// heldClaim returns the entry behind the claim, and ok false when the
	// claim is known to have ended here (released, Done closed, lease
	// lost or no longer proven alive).
	heldClaim() (cl *claim, ok bool)
}

// Txn applies ops as one etcd transaction, in one round trip: the
// conditions (and the implied conditions of the writes) are the
// transaction's compares, the writes its Success branch, and its Failure
// branch reads every compared key (keys only), so that when a compare
// fails the first failing op is found from what etcd read atomically with
// the failed attempt, without another request. The ops map as follows,
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
// Version 0 never matches (etcd reads it as "absent"), as in Update and
// Delete. Every write gets the transaction's revision: the version
// returned for a CreateOp or UpdateOp is it. The writes are plain etcd
// puts and deletes, seen by List, Watch and WatchRecursive like those of
// Create, Update and Delete.
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
// --max-txn-ops) compares, writes, and failure reads (one per compared
// key) each; and at most Options.MaxRequestBytes (default 1.5 MiB, etcd's
// --max-request-bytes) for the encoded request plus 64 bytes and the user
// name for etcd's header. Other errors: those of backendkit.CheckTxn, then
// Closed; Timeout, Interrupted or Unavailable when etcd's answer is lost
// (the transaction may have been applied); PermissionDenied when etcd
// refuses it.
func (c *Conn) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	ck, err := backendkit.CheckTxn(ctx, ops)
	if err != nil {
		return nil, err
	}
	t := txnPlan{ops: ck, claims: make([]*claim, len(ck)), guards: make([]*nativeGuard, len(ck)), held: make([]bool, len(ck))}
	for i, op := range ck {
		if op.Kind != topo.TxnIfHeld {
			continue
		}
		if nf, ok := backendkit.FenceAs[nativeHeld](op.Fence); ok {
			g := nf.nativeGuard()
			t.guards[i], t.held[i] = &g, g.held
			continue
		}
		f, ok := backendkit.FenceAs[etcdFence](op.Fence)
		if !ok {
			return nil, backendkit.ForeignFence(op, FactoryName)
		}
		t.claims[i], t.held[i] = f.heldClaim()
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
			if err := c.sameCluster(ctx, ck[i], &claim{path: g.key, clusterID: g.clusterID}); err != nil {
				return nil, err
			}
		}
	}
	for i, cl := range t.claims {
		if cl != nil && cl.c != c {
			if err := c.sameCluster(ctx, ck[i], cl); err != nil {
				return nil, err
			}
		}
	}
	if ck[0].Kind == topo.TxnIfHeld && !t.held[0] {
		return nil, backendkit.TxnFailed(ck[0], topo.LockLost)
	}
	resp, err := c.cli.Txn(ctx).If(t.cmps...).Then(t.then...).Else(t.els...).Commit()
	if err != nil {
		return nil, c.convertError(ctx, err, "")
	}
	c.clusterID.CompareAndSwap(0, resp.Header.ClusterId)
	if !resp.Succeeded {
		return nil, t.failure(resp)
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
	claims []*claim       // the entry of each IfHeld op
	guards []*nativeGuard // or its native term's guard
	held   []bool         // false: the IfHeld op's claim ended here

	cmps []clientv3.Cmp
	then []clientv3.Op
	els  []clientv3.Op
	keys []string       // the key each op reads or writes
	read map[string]int // compared key -> index of its read in els

	elsKeys []string // the key of each read in els
}

// build fills in the compares, the writes and the failure reads.
func (t *txnPlan) build(c *Conn) {
	t.keys = make([]string, len(t.ops))
	t.read = make(map[string]int, len(t.ops))
	for i, op := range t.ops {
		k := c.key(op.Path)
		if op.Kind == topo.TxnIfHeld {
			if g := t.guards[i]; g != nil {
				k = g.key
			} else {
				k = t.claims[i].key
			}
		}
		t.keys[i] = k
		compared := true
		switch op.Kind {
		case topo.TxnIfVersion:
			t.cmps = append(t.cmps, versionIs(k, op.Version))
		case topo.TxnIfAbsent:
			t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0))
		case topo.TxnIfPresent:
			t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(k), ">", 0))
		case topo.TxnIfHeld:
			if g := t.guards[i]; g != nil && t.held[i] {
				t.cmps = append(t.cmps, g.cmps...)
			} else if t.held[i] {
				t.cmps = append(t.cmps, clientv3.Compare(clientv3.ModRevision(k), "=", t.claims[i].rev))
			} else {
				t.cmps = append(t.cmps, never(k))
			}
		case topo.TxnCreate:
			t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0))
			t.then = append(t.then, clientv3.OpPut(k, string(op.Contents)))
		case topo.TxnUpdate:
			if op.Version == backendkit.AnyVersion {
				compared = false
			} else {
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
		if _, dup := t.read[k]; compared && !dup {
			t.read[k] = len(t.els)
			if op.Kind == topo.TxnIfHeld && t.guards[i] != nil {
				t.els = append(t.els, clientv3.OpGet(k)) // with values: the lease
			} else {
				t.els = append(t.els, clientv3.OpGet(k, clientv3.WithKeysOnly()))
			}
			t.elsKeys = append(t.elsKeys, k)
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

// failure returns the *topo.TxnError of the first op whose condition
// does not hold in resp, the answer of the failed transaction: its
// Failure branch read every compared key at the revision the compares
// were evaluated at.
func (t *txnPlan) failure(resp *clientv3.TxnResponse) error {
	for i, op := range t.ops {
		j, compared := t.read[t.keys[i]]
		if !compared || (op.Kind == topo.TxnUpdate && op.Version == backendkit.AnyVersion) {
			continue
		}
		var kv *mvccpb.KeyValue
		if kvs := resp.Responses[j].GetResponseRange().Kvs; len(kvs) > 0 {
			kv = kvs[0]
		}
		if g := t.guards[i]; g != nil {
			if !t.held[i] || g.gone(kv) {
				return backendkit.TxnFailed(op, topo.LockLost)
			}
			continue
		}
		if code, failed := opFails(op, kv, t.claims[i], t.held[i]); failed {
			return backendkit.TxnFailed(op, code)
		}
	}
	// Unreachable as long as the reads and the compares agree.
	return backendkit.Wrap(topo.Unavailable, "", errors.New("etcd2topo: transaction failed but every condition held in its failure reads"))
}

// opFails evaluates op's condition on kv, its key as the failed
// transaction read it (nil: absent).
func opFails(op backendkit.TxnOp, kv *mvccpb.KeyValue, cl *claim, held bool) (topo.ErrorCode, bool) {
	atVersion := func() (topo.ErrorCode, bool) {
		switch {
		case kv == nil:
			return topo.NoNode, true
		case op.Version == 0 || kv.ModRevision != op.Version:
			return topo.BadVersion, true
		}
		return 0, false
	}
	switch op.Kind {
	case topo.TxnIfVersion:
		return atVersion()
	case topo.TxnIfAbsent, topo.TxnCreate:
		return topo.NodeExists, kv != nil
	case topo.TxnIfPresent:
		return topo.NoNode, kv == nil
	case topo.TxnIfHeld:
		return topo.LockLost, !held || kv == nil || kv.ModRevision != cl.rev
	case topo.TxnUpdate:
		return atVersion()
	case topo.TxnDelete:
		if op.Version == backendkit.AnyVersion {
			return topo.NoNode, kv == nil
		}
		return atVersion()
	}
	return 0, false
}

// checkTxnSize returns backendkit.TxnTooLarge's error when t exceeds the
// Conn's MaxTxnOps or MaxRequestBytes.
func (c *Conn) checkTxnSize(t *txnPlan) error {
	limit := c.opts.MaxTxnOps
	for _, n := range []struct {
		n    int
		unit string
	}{{len(t.cmps), "compares"}, {len(t.then), "writes"}, {len(t.els), "failure reads"}} {
		if n.n > limit {
			return backendkit.TxnTooLarge("etcd (--max-txn-ops)", n.n, limit, n.unit)
		}
	}
	size := requestOverheadBytes + len(c.opts.Username) + txnRequestSize(t)
	if size > c.opts.MaxRequestBytes {
		return backendkit.TxnTooLarge("etcd (--max-request-bytes)", size, c.opts.MaxRequestBytes, "bytes")
	}
	return nil
}

// txnRequestSize returns the encoded size of the TxnRequest that t sends.
func txnRequestSize(t *txnPlan) int {
	req := pb.TxnRequest{
		Compare: make([]*pb.Compare, len(t.cmps)),
		Success: make([]*pb.RequestOp, 0, len(t.then)),
		Failure: make([]*pb.RequestOp, 0, len(t.els)),
	}
	for i := range t.cmps {
		req.Compare[i] = (*pb.Compare)(&t.cmps[i])
	}
	for i, op := range t.ops {
		k := []byte(t.keys[i])
		switch {
		case op.Kind == topo.TxnCreate || op.Kind == topo.TxnUpdate:
			req.Success = append(req.Success, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{
				RequestPut: &pb.PutRequest{Key: k, Value: op.Contents}}})
		case op.Kind == topo.TxnDelete:
			req.Success = append(req.Success, &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{
				RequestDeleteRange: &pb.DeleteRangeRequest{Key: k}}})
		}
	}
	for _, k := range t.elsKeys {
		req.Failure = append(req.Failure, &pb.RequestOp{Request: &pb.RequestOp_RequestRange{
			RequestRange: &pb.RangeRequest{Key: []byte(k), KeysOnly: true}}})
	}
	return req.Size()
}

// sameCluster returns nil when cl, an entry put through another Conn, is
// on this Conn's etcd cluster, and an InvalidArgument *topo.TxnError for
// op otherwise. The Conn learns its cluster's id from its first answer
// (one read, once, if nothing else told it yet).
func (c *Conn) sameCluster(ctx context.Context, op backendkit.TxnOp, cl *claim) error {
	id := c.clusterID.Load()
	if id == 0 {
		resp, err := c.cli.Get(ctx, c.rootPrefix+"\x00", clientv3.WithCountOnly())
		if err != nil {
			return c.convertError(ctx, err, "")
		}
		c.clusterID.CompareAndSwap(0, resp.Header.ClusterId)
		id = resp.Header.ClusterId
	}
	if id != cl.clusterID {
		return &topo.TxnError{Index: op.Index, Kind: op.Kind, Err: backendkit.Wrap(topo.InvalidArgument, cl.path,
			errors.New("if-held: the Fence was issued on another etcd cluster"))}
	}
	return nil
}
