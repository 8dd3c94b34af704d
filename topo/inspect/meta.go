package inspect

import (
	"context"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// MetaField is one item of StoreMeta: a snake_case name and an int64, a
// uint64 (Consul's flags), a string or a []string.
type MetaField = backendkit.MetaField

// MetaReader is implemented by a backend's Conn that can say what its
// store keeps about a path (etcd2topo, zk2topo and consultopo do).
type MetaReader interface {
	StoreMeta(ctx context.Context, p string) ([]backendkit.MetaField, error)
}

// StoreMeta returns what the store itself keeps about the path p, beyond
// the topology interface's version: etcd's create and mod revisions, key
// version and lease; ZooKeeper's zxids, times, data and child versions,
// ephemeral owner and ACL; Consul's create, modify and lock indexes, flags
// and session (see the backends' StoreMeta methods and
// docs/layout-*.md). It returns nil with no error for a backend that has
// nothing to add (memory, custom backends), for a path the store holds no
// key or znode for (an implicit directory), and for the root on etcd and
// Consul. Errors are the store's, InvalidPath for a bad p.
func StoreMeta(ctx context.Context, conn topo.Conn, p string) ([]MetaField, error) {
	r, ok := topo.ConnAs[MetaReader](conn)
	if !ok {
		return nil, nil
	}
	return r.StoreMeta(ctx, p)
}
