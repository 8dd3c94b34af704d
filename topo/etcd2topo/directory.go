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

// ListDir lists the entries directly under dirPath. etcd has no
// directories: ListDir reads every key under <root>/<dirPath>/ (keys only)
// and reports the first path segment below dirPath of each, as a file when
// it is the whole rest of the key and as a directory otherwise. With full
// set, an entry is Ephemeral when every key it stands for is attached to a
// lease: lock keys and the "locks" directories holding them, election
// candidates and their elections, and leased files written by other tools.
// It returns NoNode when no key is under dirPath.
func (c *Conn) ListDir(ctx context.Context, dirPath string, full bool) ([]topo.DirEntry, error) {
	d, err := backendkit.Begin(ctx, dirPath, topo.CleanDirPath, c.isClosed)
	if err != nil {
		return nil, err
	}
	prefix := c.dirPrefix(d)
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly()}
	if full {
		// etcd 3.7 answers a keys-only range from its in-memory index,
		// whose entries carry no lease; a sort by value makes it read the
		// stored entries (still sending no values), which do.
		opts = append(opts, clientv3.WithSort(clientv3.SortByValue, clientv3.SortAscend))
	}
	resp, err := c.cli.Get(ctx, prefix, opts...)
	if err != nil {
		return nil, c.convertError(ctx, err, d)
	}
	kvs := resp.Kvs
	if full {
		// Sorted by value above: back to key order.
		slices.SortFunc(kvs, func(a, b *mvccpb.KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	}
	out := dirEntries(kvs, len(prefix), full)
	if d == electionsDir {
		// The published values of elections (leader.go) are no entry.
		out = slices.DeleteFunc(out, func(e topo.DirEntry) bool { return strings.HasPrefix(e.Name, valuesDir) })
	}
	if len(out) == 0 {
		return nil, topo.NewError(topo.NoNode, d)
	}
	return out, nil
}

// dirEntries returns the entries of a directory from kvs, the keys under
// its prefix (of length plen), sorted by name, each name once. A name
// that is both a file and a directory (possible in etcd, impossible in a
// tree store) is reported as a directory; with full, an entry is
// Ephemeral when every key under its name has a lease.
func dirEntries(kvs []*mvccpb.KeyValue, plen int, full bool) []topo.DirEntry {
	all := make([]topo.DirEntry, 0, len(kvs))
	for _, kv := range kvs {
		name, _, dir := strings.Cut(string(kv.Key[plen:]), "/")
		if name == "" {
			continue // a key that is not a canonical path; not ours
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
	// etcd returns keys sorted, so the keys of one name are adjacent,
	// except that names extending it with a byte below '/' ("n-b") sort
	// between "n" and "n/x": hence MergeEntries' sort.
	return backendkit.MergeEntries(all)
}
