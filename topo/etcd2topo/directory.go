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
	if err := backendkit.CheckContext(ctx, dirPath); err != nil {
		return nil, err
	}
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
	kvs := resp.Kvs
	if full {
		// Sorted by value above: back to key order.
		slices.SortFunc(kvs, func(a, b *mvccpb.KeyValue) int { return bytes.Compare(a.Key, b.Key) })
	}
	out := dirEntries(kvs, len(prefix), full)
	if d == electionsDir {
		// The published values of elections (values.go) are no entry.
		out = slices.DeleteFunc(out, func(e topo.DirEntry) bool { return isValuesName(e.Name) })
	}
	if len(out) == 0 {
		return nil, topo.NewError(topo.NoNode, d)
	}
	return out, nil
}

// dirEntries returns the entries of a directory from kvs, the keys under
// its prefix (of length plen) in key order, sorted by name, each name
// once. It streams: etcd returns keys sorted, so the keys of one name are
// adjacent, except that a name that is both a file and a directory ("n"
// and "n/x") can have names that extend it with a byte below '/' ("n-b")
// between its file and its directory keys; that rare case is put in order
// at the end. The names share one string.
func dirEntries(kvs []*mvccpb.KeyValue, plen int, full bool) []topo.DirEntry {
	type span struct{ start, end int } // of a name in buf
	var (
		buf       = make([]byte, 0, 16*len(kvs))
		spans     = make([]span, 0, len(kvs))
		isDir     []bool // per entry, when full
		durable   []bool // per entry, when full: some key under it has no lease
		unordered bool
	)
	if full {
		isDir = make([]bool, 0, len(kvs))
		durable = make([]bool, 0, len(kvs))
	}
	for _, kv := range kvs {
		rest := kv.Key[plen:]
		name, dir := rest, false
		if i := bytes.IndexByte(rest, '/'); i >= 0 {
			name, dir = rest[:i], true
		}
		if len(name) == 0 {
			continue // a key that is not a canonical path; not ours
		}
		if n := len(spans); n > 0 {
			last := buf[spans[n-1].start:spans[n-1].end]
			switch c := bytes.Compare(name, last); {
			case c == 0:
				if full {
					isDir[n-1] = isDir[n-1] || dir
					durable[n-1] = durable[n-1] || kv.Lease == 0
				}
				continue
			case c < 0:
				unordered = true
			}
		}
		start := len(buf)
		buf = append(buf, name...)
		spans = append(spans, span{start, len(buf)})
		if full {
			isDir = append(isDir, dir)
			durable = append(durable, kv.Lease == 0)
		}
	}
	all := string(buf)
	out := make([]topo.DirEntry, len(spans))
	for i, sp := range spans {
		out[i].Name = all[sp.start:sp.end]
		if full {
			// A name that is both a file and a directory (possible in
			// etcd, impossible in a tree store) is reported as a
			// directory.
			out[i].Type = topo.TypeFile
			if isDir[i] {
				out[i].Type = topo.TypeDirectory
			}
			out[i].Ephemeral = !durable[i]
		}
	}
	if unordered {
		out = sortMerge(out, full)
	}
	return out
}

// sortMerge sorts entries by name and merges those of one name (a
// directory wins over a file; durable over ephemeral).
func sortMerge(entries []topo.DirEntry, full bool) []topo.DirEntry {
	slices.SortStableFunc(entries, func(a, b topo.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	out := entries[:0]
	for _, e := range entries {
		if n := len(out); n > 0 && out[n-1].Name == e.Name {
			if full {
				if e.Type == topo.TypeDirectory {
					out[n-1].Type = topo.TypeDirectory
				}
				out[n-1].Ephemeral = out[n-1].Ephemeral && e.Ephemeral
			}
			continue
		}
		out = append(out, e)
	}
	return out
}
