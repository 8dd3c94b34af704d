package templatetopo

import (
	"context"
	"slices"
	"strings"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Every method below has the shape to copy: backendkit.CheckContext
// (Timeout, Interrupted); the argument checks (backendkit.CheckCreate, ...;
// topo.Clean*Path for reads: InvalidPath, InvalidArgument); one request
// (c.do: Closed, Unavailable); the answer mapped by c.mapErr (NoNode, ...).
// So bad input gets the same typed error from every backend, before
// anything is sent, and a closed Conn is reported only for good input.

// Create implements topo.Conn.Create. It returns NodeExists when a file is
// at filePath. Missing parents need no creating: directories are implied by
// the files below them.
func (c *Conn) Create(ctx context.Context, filePath string, contents []byte) (topo.Version, error) {
	if err := backendkit.CheckContext(ctx, filePath); err != nil {
		return nil, err
	}
	p, err := backendkit.CheckCreate(filePath, contents)
	if err != nil {
		return nil, err
	}
	return c.write(ctx, backendkit.TxnOp{Kind: topo.TxnCreate, Path: p, Contents: contents})
}

// Update implements topo.Conn.Update: unconditional (creating the file) with
// a nil version, a compare-and-set otherwise (NoNode when absent,
// BadVersion when the version differs).
func (c *Conn) Update(ctx context.Context, filePath string, contents []byte, version topo.Version) (topo.Version, error) {
	if err := backendkit.CheckContext(ctx, filePath); err != nil {
		return nil, err
	}
	p, want, err := backendkit.CheckUpdate(filePath, contents, version)
	if err != nil {
		return nil, err
	}
	return c.write(ctx, backendkit.TxnOp{Kind: topo.TxnUpdate, Path: p, Contents: contents, Version: want})
}

// write sends op, a checked Create, Update or Delete, as a one-op
// transaction, and maps a failure as the method's own error.
func (c *Conn) write(ctx context.Context, op backendkit.TxnOp) (topo.Version, error) {
	var vs []topo.Version
	err := c.do(func(s *Store) (err error) {
		vs, _, err = s.txn(c, []backendkit.TxnOp{op}, nil)
		return err
	})
	if err != nil {
		return nil, c.mapErr(ctx, err, op.Path)
	}
	return vs[0], nil
}

// Get implements topo.Conn.Get. The returned slice is the caller's.
func (c *Conn) Get(ctx context.Context, filePath string) ([]byte, topo.Version, error) {
	if err := backendkit.CheckContext(ctx, filePath); err != nil {
		return nil, nil, err
	}
	p, err := topo.CleanFilePath(filePath) // reads are not refused at reserved paths
	if err != nil {
		return nil, nil, err
	}
	data, version, err := c.read(ctx, p, backendkit.AnyVersion)
	if err != nil {
		return nil, nil, err
	}
	return data, topo.NumericVersion(version), nil
}

// GetVersion implements topo.Conn.GetVersion: the store keeps the last 32
// versions of each file (the current one included); an older version of
// the file is Compacted, a version the file never had NoNode. A deleted
// file's history goes with it.
func (c *Conn) GetVersion(ctx context.Context, filePath string, version int64) ([]byte, error) {
	if err := backendkit.CheckContext(ctx, filePath); err != nil {
		return nil, err
	}
	p, err := backendkit.CheckGetVersion(filePath, version) // reads are not refused at reserved paths
	if err != nil {
		return nil, err
	}
	data, _, err := c.read(ctx, p, version) // nil data with an error
	return data, err
}

// read returns a copy of the contents of the file at p at version (the
// current one for backendkit.AnyVersion), and the file's current version.
func (c *Conn) read(ctx context.Context, p string, version int64) ([]byte, int64, error) {
	var data []byte
	var cur int64
	err := c.do(func(s *Store) error {
		f := s.files[c.full(p)]
		if f == nil {
			return errNotFound
		}
		d, err := f.data, error(nil)
		if version != backendkit.AnyVersion {
			d, err = f.versionData(version)
		}
		data, cur = append([]byte{}, d...), f.version
		return err
	})
	if err != nil {
		return nil, 0, c.mapErr(ctx, err, p)
	}
	return data, cur, nil
}

// List implements topo.Conn.List: every file whose path starts with the
// plain string prefix, sorted. Lock and election entries are not files.
// No file can be at a reserved path here (writes refuse one); a backend
// whose store other tools write reports those with backendkit.ReservedFiles.
func (c *Conn) List(ctx context.Context, filePathPrefix string) ([]topo.KVInfo, error) {
	if err := backendkit.CheckContext(ctx, filePathPrefix); err != nil {
		return nil, err
	}
	p, err := topo.CleanPrefix(filePathPrefix)
	if err != nil {
		return nil, err
	}
	var out []topo.KVInfo
	err = c.do(func(s *Store) error {
		fp := c.fullPrefix(p)
		for full, f := range s.files {
			if strings.HasPrefix(full, fp) {
				out = append(out, topo.KVInfo{Path: c.rel(full), Value: slices.Clone(f.data), Version: topo.NumericVersion(f.version)})
			}
		}
		return nil
	})
	if err != nil {
		return nil, c.mapErr(ctx, err, p)
	}
	if len(out) == 0 {
		return nil, topo.NewError(topo.NoNode, p)
	}
	slices.SortFunc(out, func(a, b topo.KVInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// Delete implements topo.Conn.Delete: NoNode when absent, BadVersion when a
// version is given and differs. Directories left empty vanish with their
// last file (they are implied by it).
func (c *Conn) Delete(ctx context.Context, filePath string, version topo.Version) error {
	if err := backendkit.CheckContext(ctx, filePath); err != nil {
		return err
	}
	p, want, err := backendkit.CheckDelete(filePath, version)
	if err != nil {
		return err
	}
	_, err = c.write(ctx, backendkit.TxnOp{Kind: topo.TxnDelete, Path: p, Version: want})
	return err
}

// ListDir implements topo.Conn.ListDir. An entry with entries below it is a
// TypeDirectory (even if it also holds a value); any other is a TypeFile.
// With full, an entry that is not a file and has no file below it (a lock
// or election entry, or a directory holding only those) is Ephemeral. It
// returns NoNode when nothing is below dirPath.
func (c *Conn) ListDir(ctx context.Context, dirPath string, full bool) ([]topo.DirEntry, error) {
	if err := backendkit.CheckContext(ctx, dirPath); err != nil {
		return nil, err
	}
	d, err := topo.CleanDirPath(dirPath)
	if err != nil {
		return nil, err
	}
	type seen struct{ children, regular bool }
	names := map[string]*seen{}
	prefix := c.full(d)
	if prefix != "" {
		prefix += "/"
	}
	add := func(storePath string, regular bool) {
		rest, ok := strings.CutPrefix(storePath, prefix)
		if !ok || rest == "" {
			return
		}
		name, _, deeper := strings.Cut(rest, "/")
		if names[name] == nil {
			names[name] = &seen{}
		}
		names[name].children = names[name].children || deeper
		names[name].regular = names[name].regular || regular
	}
	err = c.do(func(s *Store) error {
		for p := range s.files {
			add(p, true)
		}
		for key, q := range s.queues {
			for _, e := range q {
				add(entryPath(key, e.token), false)
			}
		}
		return nil
	})
	if err != nil {
		return nil, c.mapErr(ctx, err, d)
	}
	if len(names) == 0 {
		return nil, topo.NewError(topo.NoNode, d)
	}
	out := make([]topo.DirEntry, 0, len(names))
	for name, e := range names {
		de := topo.DirEntry{Name: name}
		if full {
			de.Type = topo.TypeFile
			if e.children {
				de.Type = topo.TypeDirectory
			}
			de.Ephemeral = !e.regular
		}
		out = append(out, de)
	}
	slices.SortFunc(out, func(a, b topo.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
