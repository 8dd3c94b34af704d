package etcd2topo

import (
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// guard is what Txn's IfHeld compares in the store for a lock descriptor
// or a leadership term of this backend, in either layout.
type guard struct {
	// conn is the Conn that put the entry, clusterID the etcd cluster it
	// is on (for Txn's same-cluster check of a Fence of another Conn).
	conn      *Conn
	clusterID uint64
	path      string // for errors
	key       string // the entry's key
	// cmps hold exactly while the claim is held in the store: the
	// entry's ModRevision is its token (Vitess layout); its
	// CreateRevision is its token and its lease the claim's (native
	// layout, where Proclaim moves the ModRevision).
	cmps []clientv3.Cmp
	// gone reports whether the failure read of key (nil: absent) shows
	// the claim gone: the IfHeld op then fails with LockLost.
	gone func(kv *mvccpb.KeyValue) bool
	// withValue: the failure read of key includes its value (a native
	// term's lease is compared, and etcd 3.7 leaves the lease out of
	// keys-only reads).
	withValue bool
	// held is false when the claim is known to have ended here (released,
	// Done closed, its lease lost or no longer proven alive): Txn then
	// fails the op with LockLost without relying on the store.
	held bool
}

// guardOf returns the guard of f when it is a claim (see
// claims.FenceGuard) put by an etcd2topo Conn: ok is false for any other
// Fence.
func guardOf(f topo.Fence) (*guard, bool) {
	g, ok := claims.FenceGuard(f)
	if !ok {
		return nil, false
	}
	d, ok := g.Driver().(driver)
	if !ok {
		return nil, false
	}
	q, l, e := g.Queue(), g.Session().Ref().(*lease), g.Entry()
	gd := &guard{conn: d.c, clusterID: l.clusterID, path: q.Path, key: e.Key, held: g.Live() && !l.lost(),
		cmps: []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(e.Key), "=", e.Token)},
		gone: func(kv *mvccpb.KeyValue) bool { return kv == nil || kv.ModRevision != e.Token }}
	if q.Native {
		gd.cmps, gd.withValue = nativeHeldCmps(e, l), true
		gd.gone = func(kv *mvccpb.KeyValue) bool { return !stillOurs(q, kv, e, l) }
	}
	return gd, true
}
