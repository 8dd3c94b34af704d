package inspect

import (
	"context"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/tree"
)

// Lock is a held lock, as Locks finds it.
type Lock struct {
	// Dir is the locked directory's canonical path; Holder the holder's
	// description (see LockHolder).
	Dir, Holder string
}

// Locks returns the held locks on dir (canonical, "" the root) and on the
// directories below it, in walk order (ListDir's order, parents first),
// reading each directory's holder with LockHolder: one walk of the
// subtree and one LockHolder per directory. Directories under keys no path
// reaches are skipped. Errors are the store's, InvalidPath for a bad dir;
// a directory that vanishes while walking is left out.
func Locks(ctx context.Context, conn topo.Conn, dir string) ([]Lock, error) {
	d, err := topo.CleanDirPath(dir)
	if err != nil {
		return nil, err
	}
	var out []Lock
	var visit func(d string, es []*tree.Entry) error
	visit = func(d string, es []*tree.Entry) error {
		h, err := LockHolder(ctx, conn, d)
		switch {
		case err == nil:
			out = append(out, Lock{Dir: d, Holder: h})
		case !topo.IsErrType(err, topo.NoNode):
			return err
		}
		for _, e := range es {
			if e.Type == topo.TypeDirectory && !topo.IsReserved(e.Path) {
				if err := visit(e.Path, e.Children); err != nil {
					return err
				}
			}
		}
		return nil
	}
	es, err := tree.Entries(ctx, conn, d, tree.EntriesOptions{Recursive: true})
	if err != nil && !topo.IsErrType(err, topo.NoNode) {
		return nil, err
	}
	if err := visit(d, es); err != nil {
		return nil, err
	}
	return out, nil
}

// Election is an election and its leader, as Elections finds them.
type Election struct {
	// Name is the election's name; Leader its current leader (an empty
	// ID when nobody leads).
	Name   string
	Leader topo.Leader
}

// Elections returns the elections the store holds candidates for (the
// entries of the reserved "elections" directory of the layout, see
// docs/layout-*.md), each with its leader (see Leader), in ListDir's order.
// A store with no election has none. Errors are the store's.
func Elections(ctx context.Context, conn topo.Conn) ([]Election, error) {
	des, err := conn.ListDir(ctx, backendkit.ElectionsDirName, false)
	if topo.IsErrType(err, topo.NoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Election
	for _, de := range des {
		l, err := Leader(ctx, conn, de.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, Election{Name: de.Name, Leader: l})
	}
	return out, nil
}
