package etcd2topo

import (
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// claim is what Txn's IfHeld compares in the store for a lock descriptor
// or a leadership term of this backend: the entry's key and token (its
// ModRevision), the Conn that put it, and the etcd cluster it is on.
type claim struct {
	c         *Conn
	path      string // for errors
	key       string
	rev       int64
	clusterID uint64
}

// heldClaim finds the claims engine's claim behind f (see
// claims.FenceGuard) put by an etcd2topo Conn: ok is false for any other
// Fence. held is false when the claim is known to have ended here
// (released, Done closed, its lease lost or no longer proven alive).
func heldClaim(f topo.Fence) (cl *claim, held, ok bool) {
	g, ok := claims.FenceGuard(f)
	if !ok {
		return nil, false, false
	}
	d, ok := g.Driver().(driver)
	if !ok {
		return nil, false, false
	}
	l := g.Session().Ref().(*lease)
	e := g.Entry()
	cl = &claim{c: d.c, path: g.Queue().Path, key: e.Key, rev: e.Token, clusterID: l.clusterID}
	return cl, g.Live() && !l.lost(), true
}
