package etcd2topo

import (
	"bytes"
	"context"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// ListDir lists the entries directly under dirPath from one keys-only
// read of every key under it: each key's first segment below dirPath, a
// file if it is the whole rest of the key, else a directory. With full,
// an entry is Ephemeral when every key it stands for has a lease (entries,
// their directories, other tools' leased files). NoNode if no key is
// under dirPath.
func (c *Conn) ListDir(ctx context.Context, dirPath string, full bool) ([]topo.DirEntry, error) {
	d, err := backendkit.Begin(ctx, dirPath, topo.CleanDirPath, c.isClosed)
	if err != nil {
		return nil, err
	}
	prefix := c.dirPrefix(d)
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly()}
	if full {
		// etcd 3.7's keys-only ranges come from its index, without leases;
		// sorting by value reads the stored entries (sending no values).
		opts = append(opts, clientv3.WithSort(clientv3.SortByValue, clientv3.SortAscend))
	}
	resp, err := c.cli.Get(ctx, prefix, opts...)
	if err != nil {
		return nil, c.convertError(ctx, err, d)
	}
	kvs := resp.Kvs
	if full {
		slices.SortFunc(kvs, func(a, b *mvccpb.KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	}
	out := dirEntries(kvs, len(prefix), full)
	if d == electionsDir {
		out = slices.DeleteFunc(out, func(e topo.DirEntry) bool { return strings.HasPrefix(e.Name, valuesDir) })
	}
	if len(out) == 0 {
		return nil, topo.NewError(topo.NoNode, d)
	}
	return out, nil
}

// dirEntries returns the entries of a directory from kvs, the keys under
// its prefix (of length plen), sorted by name, once each; a name both a
// file and a directory (possible in etcd) is a directory.
func dirEntries(kvs []*mvccpb.KeyValue, plen int, full bool) []topo.DirEntry {
	all := make([]topo.DirEntry, 0, len(kvs))
	for _, kv := range kvs {
		name, _, dir := strings.Cut(string(kv.Key[plen:]), "/")
		if name == "" {
			continue // not a canonical path
		}
		e := topo.DirEntry{Name: name}
		if full {
			e.Type, e.Ephemeral = topo.TypeFile, kv.Lease != 0
			if dir {
				e.Type = topo.TypeDirectory
			}
		}
		all = append(all, e)
	}
	// Sorted by key, yet "n-b" sorts between "n" and "n/x": MergeEntries.
	return backendkit.MergeEntries(all)
}
