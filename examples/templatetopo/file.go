package templatetopo

import (
	"context"
	"slices"
	"strings"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Every method below has the same shape, which is the thing to copy:
//
//	1. backendkit.CheckContext(ctx, path)         Timeout / Interrupted
//	2. the path (and value, version) checks        InvalidPath / InvalidArgument
//	   (backendkit.CheckCreate, CheckUpdate, ...; topo.Clean*Path for reads)
//	3. one request to the store (c.do), which      Closed / Unavailable
//	   refuses it on a closed Conn
//	4. the answer mapped by c.mapErr               NoNode, NodeExists, ...
//
// so that bad input gets the same typed error from every backend, before
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
	var rev int64
	err = c.do(func(s *Store) error {
		full := c.full(p)
		if s.files[full] != nil {
			return errExists
		}
		rev = s.next()
		s.write(full, contents, rev)
		s.notify()
		return nil
	})
	if err != nil {
		return nil, c.mapErr(ctx, err, p)
	}
	return topo.NumericVersion(rev), nil
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
	var rev int64
	err = c.do(func(s *Store) error {
		full := c.full(p)
		if want != backendkit.AnyVersion {
			if err := checkVersion(s.files[full], want); err != nil {
				return err
			}
		}
		rev = s.next()
		s.write(full, contents, rev)
		s.notify()
		return nil
	})
	if err != nil {
		return nil, c.mapErr(ctx, err, p)
	}
	return topo.NumericVersion(rev), nil
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
	var data []byte
	var version int64
	err = c.do(func(s *Store) error {
		f := s.files[c.full(p)]
		if f == nil {
			return errNotFound
		}
		data, version = slices.Clone(f.data), f.version
		return nil
	})
	if err != nil {
		return nil, nil, c.mapErr(ctx, err, p)
	}
	if data == nil {
		data = []byte{}
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
	var data []byte
	err = c.do(func(s *Store) error {
		f := s.files[c.full(p)]
		if f == nil {
			return errNotFound
		}
		d, err := f.versionData(version)
		data = slices.Clone(d)
		return err
	})
	if err != nil {
		return nil, c.mapErr(ctx, err, p)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// List implements topo.Conn.List: every file whose path starts with the
// plain string prefix, sorted. Lock and election entries are not files.
// No file can exist at a reserved path in this store (every write refuses
// one), so List has no foreign files to report; a backend whose store other
// tools write must collect them and return backendkit.ReservedFiles with
// the files it found.
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
	err = c.do(func(s *Store) error {
		full := c.full(p)
		if err := checkVersion(s.files[full], want); err != nil {
			return err
		}
		s.next() // a delete is a write: it takes a revision too
		s.delete(full)
		s.notify()
		return nil
	})
	return c.mapErr(ctx, err, p)
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
	type seen struct{ file, children, regular bool }
	names := map[string]*seen{}
	add := func(storePath string, regular bool, dirPrefix string) {
		rest, ok := strings.CutPrefix(storePath, dirPrefix)
		if !ok || rest == "" {
			return
		}
		name, _, deeper := strings.Cut(rest, "/")
		e := names[name]
		if e == nil {
			e = &seen{}
			names[name] = e
		}
		e.children = e.children || deeper
		e.file = e.file || (!deeper && regular)
		e.regular = e.regular || regular
	}
	err = c.do(func(s *Store) error {
		prefix := c.full(d)
		if prefix != "" {
			prefix += "/"
		}
		for p := range s.files {
			add(p, true, prefix)
		}
		for key, q := range s.queues {
			for _, e := range q {
				add(entryPath(key, e.token), false, prefix)
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
