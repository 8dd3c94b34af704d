package etcd2topo

import (
	"context"
	"fmt"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// StoreMeta returns what etcd keeps about the key of the file p
// (canonical path, the key <root>/p of docs/layout-etcd.md): the key, its
// create and mod revisions, its version and its lease (hexadecimal, "" for
// none). It returns nil for the root and when there is no such key (an
// implicit directory), InvalidPath for a bad p, and the errors of a read.
// Safe for concurrent use; topo/inspect calls it.
func (c *Conn) StoreMeta(ctx context.Context, p string) ([]backendkit.MetaField, error) {
	d, err := topo.CleanDirPath(p)
	if err != nil || d == "" {
		return nil, err
	}
	key := c.key(d)
	resp, err := c.cli.Get(ctx, key)
	if err != nil {
		return nil, c.convertError(ctx, err, d)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	kv := resp.Kvs[0]
	lease := ""
	if kv.Lease != 0 {
		lease = fmt.Sprintf("%x", kv.Lease)
	}
	return []backendkit.MetaField{
		{Name: "key", Value: key},
		{Name: "create_revision", Value: kv.CreateRevision},
		{Name: "mod_revision", Value: kv.ModRevision},
		{Name: "key_version", Value: kv.Version},
		{Name: "lease", Value: lease},
	}, nil
}
