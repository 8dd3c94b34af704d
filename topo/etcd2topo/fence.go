package etcd2topo

import (
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// guard is what Txn's IfHeld compares for a claim of this backend.
type guard struct {
	conn      *Conn  // that put the entry
	clusterID uint64 // the entry's cluster
	path      string // for errors
	key       string // the entry's key
	// cmps hold exactly while the claim is held in the store.
	cmps []clientv3.Cmp
	// gone reports whether the failure read of key (nil: absent) shows
	// the claim gone.
	gone      func(kv *mvccpb.KeyValue) bool
	withValue bool // the failure read needs the value (the lease)
	held      bool // false when the claim is known ended here
}

// guardOf returns the guard of f if it is a claim of an etcd2topo Conn.
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
	gd := &guard{conn: d.c, clusterID: d.c.guard.ID(), path: q.Path, key: e.Key, held: g.Live() && !l.lost(),
		cmps: []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(e.Key), "=", e.Token)},
		gone: func(kv *mvccpb.KeyValue) bool { return kv == nil || kv.ModRevision != e.Token }}
	if q.Native {
		gd.cmps, gd.withValue = nativeHeldCmps(e, l), true
		gd.gone = func(kv *mvccpb.KeyValue) bool { return !stillOurs(q, kv, e, l) }
	}
	return gd, true
}
