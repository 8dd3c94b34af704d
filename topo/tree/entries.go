package tree

import (
	"context"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Entry is one entry of a directory, as Entries reads it.
type Entry struct {
	// Name is the entry's name in its directory; Path its canonical path.
	Name, Path string
	// Type is a file or a directory.
	Type topo.DirEntryType
	// Ephemeral is set for entries that vanish with their owner's session
	// (lock and election entries).
	Ephemeral bool
	// Version is a file's version when EntriesOptions.Versions was set
	// (nil for directories, and for a file that vanished meanwhile).
	Version topo.Version
	// Children are a directory's entries when EntriesOptions.Recursive
	// was set.
	Children []*Entry
}

// EntriesOptions are the choices of Entries.
type EntriesOptions struct {
	// Versions reads each file's version (one Get per file).
	Versions bool
	// Recursive reads every descendant directory too.
	Recursive bool
	// CallTimeout bounds each store call (0: no bound beyond ctx).
	CallTimeout time.Duration
	// Unreachable, when set, is called with the directory and the name of
	// each entry that is a directory under a key that no path reaches
	// ("d/./x", "a//b", written by another tool): its contents are not
	// read. It is called in walk order, from the calling goroutine.
	Unreachable func(dir, name string)
}

// Entries returns the entries of dir (canonical, "" the root) in conn, in
// ListDir's order, with versions and descendants as opts asks. Entries
// that vanish while walking are left out. Errors are conn's (NoNode when
// dir holds nothing), with the path filled in (see WithPath).
func Entries(ctx context.Context, conn topo.Conn, dir string, opts EntriesOptions) ([]*Entry, error) {
	cctx, cancel := callCtx(ctx, opts.CallTimeout)
	des, err := conn.ListDir(cctx, dir, true)
	cancel()
	if err != nil {
		return nil, WithPath(err, dir)
	}
	out := make([]*Entry, 0, len(des))
	for _, de := range des {
		p := backendkit.JoinPath(dir, de.Name)
		e := &Entry{Name: de.Name, Path: p, Type: de.Type, Ephemeral: de.Ephemeral}
		if opts.Versions && de.Type == topo.TypeFile {
			cctx, cancel := callCtx(ctx, opts.CallTimeout)
			_, v, err := conn.Get(cctx, p)
			cancel()
			switch {
			case err == nil:
				e.Version = v
			case topo.IsErrType(err, topo.NoNode):
			default:
				return nil, WithPath(err, p)
			}
		}
		if c, err := topo.CleanDirPath(p); opts.Recursive && de.Type == topo.TypeDirectory && (err != nil || c != p) {
			if opts.Unreachable != nil {
				opts.Unreachable(dir, de.Name)
			}
		} else if opts.Recursive && de.Type == topo.TypeDirectory {
			kids, err := Entries(ctx, conn, p, opts)
			if err != nil && !topo.IsErrType(err, topo.NoNode) {
				return nil, err
			}
			e.Children = kids
		}
		out = append(out, e)
	}
	return out, nil
}

// callCtx bounds one store call by d (no bound when d is 0).
func callCtx(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
