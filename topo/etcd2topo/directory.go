package etcd2topo

import (
	"context"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
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
	d, err := topo.CleanDirPath(dirPath)
	if err != nil {
		return nil, err
	}
	if err := c.check(ctx, d); err != nil {
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
	if len(resp.Kvs) == 0 {
		return nil, topo.NewError(topo.NoNode, d)
	}
	type entry struct {
		isDir   bool
		isFile  bool
		durable bool // some key under it has no lease
	}
	entries := map[string]*entry{}
	for _, kv := range resp.Kvs {
		rest := string(kv.Key[len(prefix):])
		name, _, isDir := strings.Cut(rest, "/")
		if name == "" {
			continue // a key that is not a canonical path; not ours
		}
		e := entries[name]
		if e == nil {
			e = &entry{}
			entries[name] = e
		}
		if isDir {
			e.isDir = true
		} else {
			e.isFile = true
		}
		if kv.Lease == 0 {
			e.durable = true
		}
	}
	if len(entries) == 0 {
		return nil, topo.NewError(topo.NoNode, d)
	}
	out := make([]topo.DirEntry, 0, len(entries))
	for name, e := range entries {
		de := topo.DirEntry{Name: name}
		if full {
			// A name that is both a file and a directory (possible in etcd,
			// impossible in a tree store) is reported as a directory.
			de.Type = topo.TypeFile
			if e.isDir {
				de.Type = topo.TypeDirectory
			}
			de.Ephemeral = !e.durable
		}
		out = append(out, de)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
