package tree

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/topokit/topokit/topo"
)

// Listing is what List found under a directory.
type Listing struct {
	// Files are the files at or under the directory, sorted by path
	// (canonical paths, without a leading "/").
	Files []topo.KVInfo
	// Reserved are the canonical paths, sorted, of files at reserved paths
	// (topo.IsReserved) that another tool wrote: topokit can neither write
	// nor delete them, so every tree operation names them instead of
	// skipping them silently.
	Reserved []string
	// Odd are the raw keys, sorted, of files that another tool wrote under
	// keys that are no canonical path ("a//b", "t/", "d/./x"): written
	// back they would land at another path, so tree operations leave them
	// alone and name them.
	Odd []string
}

// Skipped reports whether l holds files that a tree operation leaves
// alone (Reserved or Odd).
func (l Listing) Skipped() bool { return len(l.Reserved) > 0 || len(l.Odd) > 0 }

// List returns every file at or under dir (canonical; "" is the root),
// sorted by path, with the files at reserved paths that conn's List
// reported (a PartialResult wrapping *topo.ReservedFilesError) or
// returned as ordinary files, and those under keys that are no canonical
// path. An absent or empty tree is an empty Listing, not an error. Other
// errors are conn's, with the path filled in (see WithPath). ctx bounds
// the one List call.
func List(ctx context.Context, conn topo.Conn, dir string) (Listing, error) {
	kvs, err := conn.List(ctx, dir)
	var l Listing
	var rf *topo.ReservedFilesError
	switch {
	case err == nil:
	case errors.As(err, &rf):
		for _, p := range rf.Paths {
			if Under(p, dir) {
				l.Reserved = append(l.Reserved, p)
			}
		}
	case topo.IsErrType(err, topo.NoNode):
		return l, nil
	default:
		return l, WithPath(err, dir)
	}
	for _, kv := range kvs {
		if !Under(kv.Path, dir) {
			continue
		}
		if !CanonicalFile(kv.Path) {
			l.Odd = append(l.Odd, kv.Path)
			continue
		}
		if topo.IsReserved(kv.Path) {
			l.Reserved = append(l.Reserved, kv.Path)
			continue
		}
		l.Files = append(l.Files, kv)
	}
	SortByPath(l.Files)
	slices.Sort(l.Odd)
	slices.Sort(l.Reserved)
	l.Reserved = slices.Compact(l.Reserved)
	return l, nil
}

// SortByPath sorts kvs by path, in byte order.
func SortByPath(kvs []topo.KVInfo) {
	slices.SortFunc(kvs, func(a, b topo.KVInfo) int { return strings.Compare(a.Path, b.Path) })
}
