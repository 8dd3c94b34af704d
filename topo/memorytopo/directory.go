package memorytopo

import (
	"context"
	"slices"
	"strings"

	"github.com/topokit/topokit/topo"
)

// ListDir implements topo.Conn.ListDir. A name with names under it is a
// TypeDirectory, even if it also holds a value. With full, those whose
// subtree holds no regular file (entries, and the "locks" and "elections"
// directories holding only entries) are Ephemeral.
func (c *Conn) ListDir(ctx context.Context, dirPath string, full bool) ([]topo.DirEntry, error) {
	p, err := c.begin(ctx, OpListDir, dirPath, topo.CleanDirPath)
	if err != nil {
		return nil, err
	}
	s := c.s
	write := s.rlockPlaced(p, true) // entries show here
	n := s.lookup(c.full(p))
	if n == nil || len(n.children) == 0 {
		s.unlock(write)
		return nil, topo.NewError(topo.NoNode, p)
	}
	out := make([]topo.DirEntry, 0, len(n.children))
	for name, ch := range n.children {
		e := topo.DirEntry{Name: name}
		if full {
			e.Type = topo.TypeFile
			if len(ch.children) > 0 {
				e.Type = topo.TypeDirectory
			}
			e.Ephemeral = ch.files == 0
		}
		out = append(out, e)
	}
	s.unlock(write)
	slices.SortFunc(out, func(a, b topo.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
